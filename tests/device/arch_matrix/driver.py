#!/usr/bin/env python
"""One device-run case of tests/device/arch_matrix (run by run.sh on the lent GPU machine).

  driver.py CASES_JSON CASE MODEL_DIR

Parses the case's argv with vLLM's own `vllm serve` parser (as the vllm_server role's ExecStart would pass it), adds
only the device-only arguments (--load-format dummy: random weights of the config's real shapes;
--skip-tokenizer-init: no tokenizer on the machine), builds LLM.from_engine_args() and lets vLLM log its own
capacity lines ("Model loading took", "Available KV cache memory", "GPU KV cache size", "Maximum concurrency").
Then a 4-prompt greedy generation from token ids, and the memory terms read from the worker (PROBE_JSON, the same
probe as tests/device/vllm_engine_driver.py).  Tagged lines: ENGINE_ARGS_JSON, STARTUP_DONE, GENERATE_JSON,
PROBE_JSON, RESULT_JSON.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
DEVICE_ONLY_ARGV = ["--load-format", "dummy", "--skip-tokenizer-init"]


def emit(tag, obj):
    print("%s %s" % (tag, json.dumps(obj, sort_keys=True, default=str)), flush=True)


def main(cases_json, name, model_dir):
    case = next(c for c in json.load(open(cases_json))["cases"] if c["case"] == name)
    import vllm
    from vllm.engine.arg_utils import EngineArgs
    from vllm.entrypoints.llm import LLM
    from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.entrypoints.utils import get_non_default_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    from vllm_engine_driver import _probe

    extra = list(DEVICE_ONLY_ARGV) + list(case.get("device_argv") or [])
    ns = make_arg_parser(FlexibleArgumentParser()).parse_args([model_dir] + case["argv"] + extra)
    ns.model = ns.model_tag
    validate_parsed_serve_args(ns)
    engine_args = EngineArgs.from_cli_args(ns)
    emit("ENGINE_ARGS_JSON", {"case": name, "argv": case["argv"], "device_only_argv": extra,
                              "non_default_engine_args": get_non_default_args(engine_args),
                              "vllm_version": vllm.__version__})
    t1 = time.time()
    llm = LLM.from_engine_args(engine_args)
    emit("STARTUP_DONE", {"startup_s": round(time.time() - t1, 1)})
    cc = llm.llm_engine.vllm_config.cache_config
    result = {"case": name, "vllm_version": vllm.__version__, "num_gpu_blocks": cc.num_gpu_blocks,
              "block_size": cc.block_size, "enable_prefix_caching": cc.enable_prefix_caching,
              "mamba_cache_mode": str(getattr(cc, "mamba_cache_mode", None))}
    sched = llm.llm_engine.vllm_config.scheduler_config
    result.update(max_num_seqs=sched.max_num_seqs, max_num_batched_tokens=sched.max_num_batched_tokens)
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    try:
        outs = llm.generate([TokensPrompt(prompt_token_ids=list(range(100 + i, 164 + i))) for i in range(4)],
                            SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True, detokenize=False),
                            use_tqdm=False)
        emit("GENERATE_JSON", {"output_tokens": [len(o.outputs[0].token_ids) for o in outs]})
    except Exception as exc:  # noqa: BLE001 - the capacity lines are already logged
        emit("GENERATE_JSON", {"error": repr(exc)})
    try:
        result["probe"] = llm.collective_rpc(_probe)[0]
        emit("PROBE_JSON", result["probe"])
    except Exception as exc:  # noqa: BLE001
        emit("PROBE_JSON", {"error": repr(exc)})
    emit("RESULT_JSON", result)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
