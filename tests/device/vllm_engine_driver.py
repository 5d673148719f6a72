#!/usr/bin/env python
"""Drive the real vLLM CUDA engine with the collection's rendered arguments (run by tests/device/run_vllm_engine.sh
on the lent GPU machine; see tests/device/README.md).

  offline CASE_JSON MODEL_DIR [--bench N,IN,OUT]
      Parses CASE_JSON's "argv" (what the vllm_server role puts after `vllm serve MODEL`) with vLLM's own
      `vllm serve` argument parser, adds only the device-only arguments (--load-format dummy: random weights of
      the real shapes; --gdn-prefill-backend triton: no FlashInfer on these machines), builds
      LLM.from_engine_args() (the model directory holds the generated tokenizer: the rendered --reasoning-parser
      refuses --skip-tokenizer-init) and logs vLLM's own capacity lines ("Available KV cache
      memory", "GPU KV cache size", "Maximum concurrency").  Then: a short generation, the memory terms read from
      the worker (PROBE_JSON), and with --bench an offline throughput run of N random prompts of IN tokens, OUT
      output tokens each (greedy, ignore_eos) (BENCH_JSON).  Lines the harness adds start with an upper-case tag
      and a JSON object: ENGINE_ARGS_JSON, STARTUP_DONE, GENERATE_JSON, PROBE_JSON, BENCH_JSON, RESULT_JSON.

  client PORT SERVED_NAME [--timeout S] [--chat]
      Waits for a `vllm serve` on 127.0.0.1:PORT to answer /health, then sends /v1/models, one /v1/completions and
      (--chat) one /v1/chat/completions request and prints CLIENT_JSON lines; exit 0 when every answer was 200.
"""
import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request

DEVICE_ONLY_ARGV = ["--load-format", "dummy", "--gdn-prefill-backend", "triton"]


def emit(tag, obj):
    print("%s %s" % (tag, json.dumps(obj, sort_keys=True, default=str)), flush=True)


def _probe(worker):
    """Runs inside the worker process (collective_rpc): the memory terms vLLM used to size the KV cache."""
    out = {}
    for name in ("non_torch_memory", "peak_activation_memory", "cudagraph_memory_estimate",
                 "available_kv_cache_memory_bytes", "requested_memory"):
        out[name] = getattr(worker, name, None)
    out["init_snapshot"] = str(getattr(worker, "init_snapshot", None))
    runner = getattr(worker, "model_runner", None)
    out["model_memory_usage"] = getattr(runner, "model_memory_usage", None)
    kvc = getattr(runner, "kv_cache_config", None)
    if kvc is not None:
        out["num_blocks"] = getattr(kvc, "num_blocks", None)
        groups = []
        for g in getattr(kvc, "kv_cache_groups", []) or []:
            spec = g.kv_cache_spec
            groups.append({"layers": len(g.layer_names), "spec": type(spec).__name__,
                           "block_size": getattr(spec, "block_size", None),
                           "page_size_bytes": getattr(spec, "page_size_bytes", None)})
        out["kv_cache_groups"] = groups
        out["kv_cache_tensors"] = len(getattr(kvc, "kv_cache_tensors", []) or [])
    try:
        import torch
        free, total = torch.cuda.mem_get_info()
        out["cuda_free_after_init"] = free
        out["cuda_total"] = total
    except Exception as exc:  # noqa: BLE001 - a probe must never fail the run
        out["cuda_error"] = str(exc)
    return out


def offline(args):
    case = json.load(open(args.case_json))
    t0 = time.time()
    import vllm
    from vllm.engine.arg_utils import EngineArgs
    from vllm.entrypoints.llm import LLM
    from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.entrypoints.utils import get_non_default_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    extra = list(DEVICE_ONLY_ARGV)
    # What `vllm serve MODEL <argv>` parses (the model as the positional model_tag, as in the unit's ExecStart).
    full = [args.model_dir] + list(case["argv"]) + extra
    ns = make_arg_parser(FlexibleArgumentParser()).parse_args(full)
    ns.model = ns.model_tag
    validate_parsed_serve_args(ns)
    engine_args = EngineArgs.from_cli_args(ns)
    emit("ENGINE_ARGS_JSON", {"case": case.get("case"), "rendered_argv": case["argv"], "device_only_argv": extra,
                              "non_default_engine_args": get_non_default_args(engine_args),
                              "vllm_version": vllm.__version__})
    t1 = time.time()
    llm = LLM.from_engine_args(engine_args)
    startup = time.time() - t1
    emit("STARTUP_DONE", {"startup_s": round(startup, 1), "import_and_parse_s": round(t1 - t0, 1)})
    result = {"case": case.get("case"), "vllm_version": vllm.__version__, "startup_s": round(startup, 1)}
    cc = llm.llm_engine.vllm_config.cache_config
    result.update(num_gpu_blocks=cc.num_gpu_blocks, block_size=cc.block_size,
                  enable_prefix_caching=cc.enable_prefix_caching,
                  mamba_cache_mode=str(getattr(cc, "mamba_cache_mode", None)),
                  mamba_block_size=getattr(cc, "mamba_block_size", None))

    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    t2 = time.time()
    outs = llm.generate([TokensPrompt(prompt_token_ids=list(range(1000 + i, 1064 + i))) for i in range(4)],
                        SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True), use_tqdm=False)
    emit("GENERATE_JSON", {"prompts": 4, "output_tokens": [len(o.outputs[0].token_ids) for o in outs],
                           "first_output_ids": list(outs[0].outputs[0].token_ids), "s": round(time.time() - t2, 2)})
    try:
        result["probe"] = llm.collective_rpc(_probe)[0]
        emit("PROBE_JSON", result["probe"])
    except Exception as exc:  # noqa: BLE001
        emit("PROBE_JSON", {"error": repr(exc)})

    if args.bench:
        n, n_in, n_out = (int(x) for x in args.bench.split(","))
        import random
        rng = random.Random(0)
        prompts = [TokensPrompt(prompt_token_ids=[rng.randrange(0, 200000) for _i in range(n_in)]) for _j in range(n)]
        sp = SamplingParams(temperature=0.0, max_tokens=n_out, ignore_eos=True)
        t3 = time.time()
        outs = llm.generate(prompts, sp, use_tqdm=False)
        dt = time.time() - t3
        out_tokens = sum(len(o.outputs[0].token_ids) for o in outs)
        result["bench"] = {"prompts": n, "input_tokens": n_in, "output_tokens_each": n_out, "seconds": round(dt, 2),
                           "output_tokens": out_tokens, "output_tok_per_s": round(out_tokens / dt, 1),
                           "total_tok_per_s": round((out_tokens + n * n_in) / dt, 1)}
        emit("BENCH_JSON", result["bench"])
    emit("RESULT_JSON", result)
    return 0


def _http(method, url, body=None, timeout=120):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


def client(args):
    base = "http://127.0.0.1:%d" % args.port
    t0 = time.time()
    ready = None
    while time.time() - t0 < args.timeout:
        try:
            status, _unused = _http("GET", base + "/health", timeout=5)
            if status == 200:
                ready = time.time() - t0
                break
        except Exception:  # noqa: BLE001 - not up yet
            pass
        if args.server_pid and not os.path.exists("/proc/%d" % args.server_pid):
            emit("CLIENT_JSON", {"step": "health", "ok": False, "why": "server process exited",
                                 "waited_s": round(time.time() - t0, 1)})
            return 2
        time.sleep(2)
    emit("CLIENT_JSON", {"step": "health", "ok": ready is not None, "ready_after_s": ready and round(ready, 1)})
    if ready is None:
        return 2
    ok = True
    steps = [("models", "GET", "/v1/models", None),
             ("completions", "POST", "/v1/completions",
              {"model": args.served_name, "prompt": "Hello , my name is", "max_tokens": 16, "temperature": 0})]
    if args.chat:
        steps.append(("chat_completions", "POST", "/v1/chat/completions",
                      {"model": args.served_name, "max_tokens": 16, "temperature": 0,
                       "messages": [{"role": "user", "content": "What is the capital of France ?"}]}))
    for step, method, path, body in steps:
        t = time.time()
        try:
            status, text = _http(method, base + path, body)
        except Exception as exc:  # noqa: BLE001
            status, text = None, repr(exc)
        try:
            payload = json.loads(text)
        except ValueError:
            payload = text[:2000]
        emit("CLIENT_JSON", {"step": step, "status": status, "ok": status == 200, "s": round(time.time() - t, 2),
                             "request": body, "response": payload})
        ok = ok and status == 200
    try:
        status, text = _http("GET", base + "/metrics", timeout=10)
        prefixes = ("vllm:num_gpu_blocks", "vllm:cache_config_info", "vllm:kv_cache_usage_perc")
        keep = [ln for ln in text.splitlines() if ln.startswith(prefixes)]
        emit("CLIENT_JSON", {"step": "metrics", "status": status, "lines": keep[:20]})
    except Exception as exc:  # noqa: BLE001
        emit("CLIENT_JSON", {"step": "metrics", "error": repr(exc)})
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("offline")
    o.add_argument("case_json")
    o.add_argument("model_dir")
    o.add_argument("--bench", help="N,IN,OUT: N random prompts of IN tokens, OUT output tokens each")
    c = sub.add_parser("client")
    c.add_argument("port", type=int)
    c.add_argument("served_name")
    c.add_argument("--timeout", type=float, default=480)
    c.add_argument("--server-pid", type=int)
    c.add_argument("--chat", action="store_true")
    args = ap.parse_args()
    return offline(args) if args.cmd == "offline" else client(args)


if __name__ == "__main__":
    sys.exit(main())
