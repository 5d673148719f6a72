#!/usr/bin/env python
"""Plan two models on the lent H200 together (issue #39, the GPU proof) and write each instance's `vllm serve` argv.

Runs HERE, on the controller, from the repository root (PYTHONPATH: the collection, as the unit tests have it):
    python tests/device/many_models/plan_argv.py KITDIR [FIXTUREDIR]
The placement is llmfleet.vllm.vllm_placement's own (placement.place) on the gpu_facts captured on the lent 1 x H200
(device-h200x1-2026-11-30), the models planned from their published config.json files
(tests/fixtures/model_configs); the argv is the vllm_server role's rendering (merge_vllm_args, then
render_vllm_args).  Writes, per GPU of GPUS, KITDIR/<gpu>/argv/<instance>.json ({instance, model, config, runner, port, argv,
planned}), KITDIR/<gpu>/order.txt and configs/, and FIXTUREDIR/plan-<gpu>.json (the placement) when given.
"""
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.model_list import model_list  # noqa: E402
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import engine_memory as EM  # noqa: E402
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import model_profiles as M  # noqa: E402
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import placement as PL  # noqa: E402
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.gpu_catalogue import (  # noqa: E402
    annotate_gpu_facts, load_catalogue)
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.topology import gpu_facts_from_spec  # noqa: E402
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_args import (  # noqa: E402
    merge_vllm_args, render_vllm_args)
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks import runner_flags as RF  # noqa: E402

GPU_FACTS = os.path.join(ROOT, "tests", "fixtures", "gpu", "device-h200x1-2026-11-30", "gpu_facts_nvml.json")
CONFIGS = os.path.join(ROOT, "tests", "fixtures", "model_configs")
# The list: a Llama-3.1-8B-class chat model and an embedding model (Qwen3-1.7B's published config.json on the pooling
# runner, the Qwen3-Embedding architecture), neither pinned: the placement packs the second beside the first.
MODELS = [
    {"name": "llama-3.1-8b", "model": "meta-llama/Llama-3.1-8B-Instruct", "max_model_len": 32768},
    {"name": "embed", "model": "Qwen/Qwen3-1.7B", "runner": "pooling", "max_model_len": 8192},
]
PORT_BASE = 8000
# The LoRA set (served after the pair, alone): Llama with one rank-16 adapter made on the machine (make_adapter.py),
# planned as vllm_placement plans an entry with adapters (its inputs' ``lora``), the LoRA flags as serve_list renders
# them from the image's flag table (the H200 capture's `vllm serve --help=all`, vLLM 0.22.0).
LORA_MODELS = [dict(MODELS[0], adapters=[{"name": "llama-lora", "rank": 16}])]
LORA_ADAPTER_DIR = "/root/stage/adapters"  # the machine's path; the role mounts /adapters/<name> in the container
HELP_ALL = os.path.join(ROOT, "tests", "fixtures", "gpu", "vllm-h200-2026-12-01", "vllm_serve_help_all.txt")
# Kits for the GPUs the device tool may lend for nvidia-h200 (run.sh picks by nvidia-smi's name).
GPUS = ("H200", "H100")
# What the vllm_server role adds for runner: pooling (the role's rendering of that runner is another #39 item).
RUNNER_ARGS = {"pooling": ["--runner", "pooling", "--convert", "embed"]}


def config_of(repo):
    with open(os.path.join(CONFIGS, repo.replace("/", "--") + ".json")) as fh:
        return json.load(fh)


def profile(repo):
    """The planner's profile from the published config.json, weights as the planner counts them (BF16)."""
    config = config_of(repo)
    arch = M.normalize_config(config, repo)
    return M.profile_from_model_dir(config, weights_bytes=EM.weights_from_config(arch, None), name=repo)


def gpu_facts(gpu):
    """The lent GPU's gpu_facts: the capture of the H200, the catalogue's H100 SXM (nvidia-smi's 81559 MiB)."""
    if gpu == "H200":
        with open(GPU_FACTS) as fh:
            return annotate_gpu_facts(json.load(fh)["gpu_facts"], load_catalogue())
    return annotate_gpu_facts(gpu_facts_from_spec("1x H100 SXM", load_catalogue()), load_catalogue())


def placed(gpu="H200", models=None):
    """The placement of MODELS on the lent GPU (what the replay test recomputes)."""
    checked = model_list(models or MODELS, gpu_count=1)
    assert checked["problems"] == [], checked["problems"]
    inputs = {e["name"]: {"profile": profile(e["model"]), "plan_args": {"max_model_len": e["max_model_len"]}}
              for e in checked["models"]}
    for entry in checked["models"]:
        if entry["adapters"]:
            inputs[entry["name"]]["lora"] = {"max_loras": len(entry["adapters"]),
                                             "max_lora_rank": max(a["rank"] for a in entry["adapters"])}
    return PL.place(gpu_facts(gpu), checked["models"], inputs)


def main(kit, fixture=None):
    for gpu in GPUS:
        write_kit(os.path.join(kit, gpu), gpu, fixture and os.path.join(fixture, "plan-%s.json" % gpu))
        write_kit(os.path.join(kit, gpu, "lora"), gpu, fixture and os.path.join(fixture, "plan-%s-lora.json" % gpu),
                  LORA_MODELS)


def lora_flags(models, name):
    """The entry's LoRA flags as serve_list.served_flags renders them, the adapters' paths on the machine."""
    with open(HELP_ALL) as fh:
        table = RF.flag_table(fh.read())
    entry = [m for m in models if m["name"] == name][0]
    adapters = [dict(a, path="%s/%s" % (LORA_ADAPTER_DIR, a["name"])) for a in entry.get("adapters") or []]
    return RF.lora_args(adapters, table), [a["name"] for a in adapters]


def write_kit(kit, gpu, plan_file, models=None):
    models = models or MODELS
    result = placed(gpu, models)
    assert result["fits"], result["problems"]
    os.makedirs(os.path.join(kit, "argv"), exist_ok=True)
    os.makedirs(os.path.join(kit, "configs"), exist_ok=True)
    repos = {m["name"]: m["model"] for m in models}
    for n, inst in enumerate(result["instances"]):
        repo = repos[inst["model"]]
        cfg = repo.replace("/", "--")
        shutil.copy(os.path.join(CONFIGS, cfg + ".json"), os.path.join(kit, "configs", cfg + ".json"))
        lora, adapters = lora_flags(models, inst["model"])
        argv = render_vllm_args(merge_vllm_args(inst["vllm_args"], lora)) + RUNNER_ARGS.get(inst["runner"], [])
        out = dict(instance=inst["instance"], model=inst["model"], config=cfg, runner=inst["runner"],
                   port=PORT_BASE + n, start_after=inst["start_after"], argv=argv, adapters=adapters,
                   planned={k: inst.get(k) for k in ("kv_cache_memory_bytes", "kv_cache_tokens", "gpu_memory_utilization",
                                                     "share", "weights_bytes_per_gpu", "max_concurrency",
                                                     "max_num_seqs", "max_model_len", "lora_memory_bytes")})
        with open(os.path.join(kit, "argv", inst["instance"] + ".json"), "w") as fh:
            json.dump(out, fh, indent=1)
        print(inst["instance"], " ".join(argv))
    with open(os.path.join(kit, "order.txt"), "w") as fh:
        fh.write(" ".join(result["start_order"]) + "\n")
    if plan_file:
        os.makedirs(os.path.dirname(plan_file), exist_ok=True)
        with open(plan_file, "w") as fh:
            json.dump(result, fh, indent=1, sort_keys=True)
            fh.write("\n")


if __name__ == "__main__":
    main(*sys.argv[1:3])
