"""Issue #39's GPU proof, replayed: two models shared one lent GPU (tests/device/many_models/, vLLM 0.22.0), started
one after another, each with the --kv-cache-memory-bytes of the placement (placement.place on that GPU's gpu_facts,
the models' published config.json files).  The captures (tests/fixtures/gpu/many-models-*/) hold each engine's boot
log, nvidia-smi's memory before and after each start, and the answers of both; here: the placement still plans what
was served, each engine reserved and sized its KV cache within 1% of the plan, the second started only once the first
was healthy, both answered by their kind, and each process stayed inside its share of the GPU plus the CUDA-context
headroom the placement keeps for it."""
import csv
import glob
import json
import os
import re

import pytest

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.model_list import model_list
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import engine_memory as EM
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import model_profiles as M
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import placement as PL
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.lora import planned_lora
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.units import GIB, MIB
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.vllm_bootlog import parse_boot_log
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks import runner_flags as RF
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_args import merge_vllm_args, render_vllm_args
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.gpu_catalogue import annotate_gpu_facts, load_catalogue
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.topology import gpu_facts_from_spec

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
GPU = os.path.join(ROOT, "tests", "fixtures", "gpu")
CONFIGS = os.path.join(ROOT, "tests", "fixtures", "model_configs")
CAPTURES = sorted(glob.glob(os.path.join(GPU, "many-models-*")))
# vLLM 0.22.0's gpu_worker, when --kv-cache-memory-bytes is given (format_gib: two decimals)
RESERVED = re.compile(r"reserved ([0-9.]+) GiB memory for KV Cache as specified by kv_cache_memory_bytes")
HARNESS = re.compile(r"^\[(\d\d):(\d\d):(\d\d)\] (\S+): (start|healthy)")


def read(capture, *path):
    with open(os.path.join(capture, *path)) as fh:
        return fh.read()


def specs(capture):
    """The instances served, in the order they started (the harness's argv files)."""
    out = [json.loads(read(capture, "argv", f)) for f in sorted(os.listdir(os.path.join(capture, "argv")))]
    return sorted(out, key=lambda s: s["port"])


def gpu_facts(capture):
    """The lent GPU as the placement saw it: the H200's own capture, else the catalogue's entry."""
    gpu = json.loads(read(capture, "plan.json"))["gpus"][0]["name"]
    if gpu == "NVIDIA H200":
        with open(os.path.join(GPU, "device-h200x1-2026-11-30", "gpu_facts_nvml.json")) as fh:
            return annotate_gpu_facts(json.load(fh)["gpu_facts"], load_catalogue())
    return annotate_gpu_facts(gpu_facts_from_spec("1x H100 SXM", load_catalogue()), load_catalogue())


def config(spec):
    with open(os.path.join(CONFIGS, spec["config"] + ".json")) as fh:
        return json.load(fh)


def placed_now(capture):
    """The placement of the captured list, planned by today's code from the published config.json files."""
    entries = [dict(name=s["model"], model=s["config"].replace("--", "/"), runner=s["runner"],
                    max_model_len=s["planned"]["max_model_len"]) for s in specs(capture)]
    checked = model_list(entries, gpu_count=1)
    assert checked["problems"] == []
    inputs = {}
    for e, s in zip(checked["models"], specs(capture)):
        arch = M.normalize_config(config(s), e["model"])
        profile = M.profile_from_model_dir(config(s), weights_bytes=EM.weights_from_config(arch, None), name=e["model"])
        inputs[e["name"]] = {"profile": profile, "plan_args": {"max_model_len": e["max_model_len"]}}
    return PL.place(gpu_facts(capture), checked["models"], inputs)


def boot(capture, spec):
    text = read(capture, "logs", "serve_%s.log" % spec["instance"])
    return text, parse_boot_log(text)


def smi(capture, tag):
    """nvidia-smi's rows of one snapshot: the GPU's (used, free, total MiB) and {pid: used MiB}."""
    rows = list(csv.reader(read(capture, "logs", "smi_%s.csv" % tag).splitlines()))
    gpu = [int(v) for v in rows[1]]
    procs = {r[0].strip(): int(r[1]) for r in rows[3:] if len(r) == 2}
    return gpu, procs


def test_there_is_a_capture():
    assert CAPTURES, "no tests/fixtures/gpu/many-models-* capture"


@pytest.mark.parametrize("capture", CAPTURES, ids=os.path.basename)
def test_the_placement_still_plans_what_was_served(capture):
    now = placed_now(capture)
    assert now["fits"] and now["start_order"] == [s["instance"] for s in specs(capture)]
    for inst, spec in zip(now["instances"], specs(capture)):
        assert inst["kv_cache_memory_bytes"] == spec["planned"]["kv_cache_memory_bytes"]
        assert render_vllm_args(merge_vllm_args(inst["vllm_args"], {})) == spec["argv"][:len(spec["argv"]) - (
            4 if spec["runner"] == "pooling" else 0)]
    assert sum(t["share"] for t in now["gpus"][0]["tenants"]) <= 1.0


@pytest.mark.parametrize("capture", CAPTURES, ids=os.path.basename)
def test_each_engine_holds_its_planned_kv_cache_within_1pct(capture):
    for spec in specs(capture):
        text, numbers = boot(capture, spec)
        planned = spec["planned"]
        reserved = float(RESERVED.search(text).group(1)) * GIB
        assert abs(reserved / planned["kv_cache_memory_bytes"] - 1) < 0.01, spec["instance"]
        assert abs(numbers["kv_cache_tokens"] / float(planned["kv_cache_tokens"]) - 1) < 0.01, spec["instance"]


@pytest.mark.parametrize("capture", CAPTURES, ids=os.path.basename)
def test_the_second_started_once_the_first_was_healthy(capture):
    events = {}
    for line in read(capture, "logs", "harness.log").splitlines():
        m = HARNESS.match(line)
        if m:
            events[(m.group(4), m.group(5))] = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3))
    first, second = [s["instance"] for s in specs(capture)]
    assert events[(first, "healthy")] <= events[(second, "start")] < events[(second, "healthy")]


@pytest.mark.parametrize("capture", CAPTURES, ids=os.path.basename)
def test_both_answered_by_their_kind(capture):
    lines = [line for line in read(capture, "logs", "client.log").splitlines() if line.startswith("CLIENT_JSON ")]
    answers = {a["instance"]: a for a in (json.loads(line.split(" ", 1)[1]) for line in lines)}
    for spec in specs(capture):
        got = answers[spec["instance"]]
        assert got["status"] == 200, got
        if spec["runner"] == "pooling":
            assert got["dims"] == [config(spec)["hidden_size"]] * got["vectors"]
        else:
            assert got["completion_tokens"] == 16


@pytest.mark.parametrize("capture", CAPTURES, ids=os.path.basename)
def test_each_process_stays_inside_its_share_and_headroom(capture):
    """nvidia-smi after both started: each engine's process within gpu_memory_utilization x total + the headroom the
    placement keeps outside it (its CUDA context), and the GPU's memory in use within its budget."""
    plan = json.loads(read(capture, "plan.json"))
    (used, _free, total), _procs = smi(capture, "after_client")
    order = [s["instance"] for s in specs(capture)]
    for n, spec in enumerate(specs(capture)):
        _gpu, before = smi(capture, "after_" + order[n - 1]) if n else (None, {})
        _gpu, after = smi(capture, "after_" + spec["instance"])
        [mib] = [v for pid, v in after.items() if pid not in before]
        allowed = spec["planned"]["gpu_memory_utilization"] * total * MIB + plan["cuda_context_headroom_bytes"]
        assert mib * MIB <= allowed, (spec["instance"], mib, allowed / MIB)
    assert used * MIB <= plan["gpus"][0]["budget_bytes"] + len(order) * plan["cuda_context_headroom_bytes"]


# The LoRA set of a capture (lora/): Llama alone with one rank-16 adapter, flagged as serve_list renders LoRA.
LORA_CAPTURES = [c for c in CAPTURES if os.path.isdir(os.path.join(c, "lora"))]
GRAPHS = re.compile(r"Profiling CUDA graph memory: PIECEWISE=(\d+) \(largest=\d+\), FULL=(\d+)")
HELP_ALL = os.path.join(GPU, "vllm-h200-2026-12-01", "vllm_serve_help_all.txt")


def lora_placed_now(capture):
    """The LoRA set's placement by today's code, with its adapters' slots (vllm_placement's inputs' ``lora``)."""
    [spec] = specs(os.path.join(capture, "lora"))
    entry = dict(name=spec["model"], model=spec["config"].replace("--", "/"),
                 max_model_len=spec["planned"]["max_model_len"], adapters=[{"name": a, "rank": 16}
                                                                            for a in spec["adapters"]])
    checked = model_list([entry], gpu_count=1)
    arch = M.normalize_config(config(spec), entry["model"])
    profile = M.profile_from_model_dir(config(spec), weights_bytes=EM.weights_from_config(arch, None),
                                       name=entry["model"])
    inputs = {spec["model"]: {"profile": profile, "plan_args": {"max_model_len": entry["max_model_len"]},
                              "lora": planned_lora(entry["adapters"])}}
    return spec, arch, PL.place(gpu_facts(capture), checked["models"], inputs)["instances"][0]


@pytest.mark.parametrize("capture", LORA_CAPTURES, ids=os.path.basename)
def test_the_adapter_answered_by_its_own_name_with_the_flags_the_role_renders(capture):
    spec, _arch, inst = lora_placed_now(capture)
    with open(HELP_ALL) as fh:
        lora = RF.lora_args([{"name": a, "rank": 16, "path": "/root/stage/adapters/" + a} for a in spec["adapters"]],
                            RF.flag_table(fh.read()))
    assert render_vllm_args(merge_vllm_args(inst["vllm_args"], lora)) == spec["argv"]
    [line] = [x for x in read(capture, "lora", "logs", "client.log").splitlines() if x.startswith("CLIENT_JSON ")]
    got = json.loads(line.split(" ", 1)[1])
    assert got["status"] == 200 and got["completion_tokens"] == 16
    assert [(a["model"], a["status"], a["completion_tokens"]) for a in got["adapters"]] == [("llama-lora", 200, 16)]
    assert sorted(got["listed"]) == sorted([spec["model"]] + spec["adapters"])


@pytest.mark.parametrize("capture", LORA_CAPTURES, ids=os.path.basename)
def test_the_lora_plan_is_within_1pct_of_vllms_kv_cache_and_never_above_it(capture):
    """vLLM profiled this one (alone, no --kv-cache-memory-bytes): its KV cache after the LoRA slots and the CUDA
    graphs it captures again for active LoRA.  A plan above it would oversell a GPU shared with another model."""
    spec, arch, inst = lora_placed_now(capture)
    text = read(capture, "lora", "logs", "serve_%s.log" % spec["instance"])
    numbers = parse_boot_log(text)
    assert 0.99 < inst["kv_cache_memory_bytes"] / float(numbers["available_kv_cache_bytes"]) <= 1.0
    assert 0.99 < inst["kv_cache_tokens"] / float(numbers["kv_cache_tokens"]) <= 1.0
    # the graphs twice over: the planner's capture sizes, each captured without and with active LoRA
    piecewise = EM.capture_sizes(inst["max_num_seqs"], inst["vllm_args"]["max-num-batched-tokens"])
    full = [s for s in piecewise if s <= inst["max_num_seqs"]]
    assert [int(n) for n in GRAPHS.search(text).groups()] == [2 * len(piecewise), 2 * len(full)]
