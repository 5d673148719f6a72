#!/usr/bin/env python
"""Read the logs of tests/device/run_vllm_engine.sh and print one JSON object per log (a list), or with --markdown a
table: the case, the rendered argv, what vLLM logged (weights, available KV memory, attention block size, KV tokens,
maximum concurrency, init time), the startup, the throughput run and the serve client's answers.

  summarize_vllm_logs.py LOG... [--markdown]
"""
import json
import re
import sys

PATTERNS = {
    "weights_gib": r"Model loading took ([\d.]+) GiB memory",
    "available_kv_gib": r"Available KV cache memory: ([\d.]+) GiB",
    "attention_block_size": r"Setting attention block size to (\d+) tokens",
    "kv_cache_tokens": r"GPU KV cache size: ([\d,]+) tokens",
    "max_concurrency": r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x",
    "cudagraph_estimate_gib": r"Estimated CUDA graph memory: ([\d.]+) GiB",
    "cudagraph_actual_gib": r"CUDA graph pool memory: ([\d.]+) GiB \(actual\)",
    "init_engine_s": r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s",
    "torch_compile_s": r"torch.compile took ([\d.]+) s in total",
    "profiling_run_s": r"Initial profiling/warmup run took ([\d.]+) s",
    "mamba_cache_mode_warning": r"Mamba cache mode is set to '(\w+)'",
}


def _num(text):
    text = text.replace(",", "")
    return float(text) if "." in text else int(text)


def summarize(path):
    out = {"log": path.rsplit("/", 1)[-1]}
    tags = {}
    with open(path, errors="replace") as fh:
        for line in fh:
            m = re.match(r"^([A-Z_]+_JSON|STARTUP_DONE|HARNESS_[A-Z]+) (\{.*\})\s*$", line)
            if m:
                try:
                    tags.setdefault(m.group(1), json.loads(m.group(2)))
                except ValueError:
                    pass
            for key, pat in PATTERNS.items():
                if key not in out:
                    hit = re.search(pat, line)
                    if hit:
                        out[key] = hit.group(1) if key == "mamba_cache_mode_warning" else _num(hit.group(1))
    head = tags.get("HARNESS_JSON", {})
    out.update(kind=head.get("kind"), case=head.get("case"), rendered_argv=head.get("rendered_argv"),
               planner=head.get("plan"))
    if "STARTUP_DONE" in tags:
        out["startup_s"] = tags["STARTUP_DONE"].get("startup_s")
    result = tags.get("RESULT_JSON", {})
    if result:
        out["mamba_cache_mode"] = result.get("mamba_cache_mode")
        probe = result.get("probe") or {}
        out["num_blocks"] = probe.get("num_blocks")
        out["kv_cache_groups"] = probe.get("kv_cache_groups")
        out["memory_terms"] = {k: probe.get(k) for k in ("non_torch_memory", "peak_activation_memory",
                                                         "cudagraph_memory_estimate", "available_kv_cache_memory_bytes",
                                                         "requested_memory", "model_memory_usage")}
        if "bench" in result:
            out["bench"] = result["bench"]
    if head.get("kind") == "serve":
        steps = {}
        with open(path, errors="replace") as fh:
            for line in fh:
                if line.startswith("CLIENT_JSON "):
                    d = json.loads(line[len("CLIENT_JSON "):])
                    steps[d.get("step")] = d
        out["ready_after_s"] = steps.get("health", {}).get("ready_after_s")
        out["answered"] = {s: steps[s].get("status") for s in ("models", "completions", "chat_completions")
                           if s in steps}
    out["exit"] = tags.get("HARNESS_EXIT")
    return out


def markdown(rows):
    lines = ["| log | weights GiB | available KV GiB | block | KV tokens (log) | max concurrency (log) | planner "
             "concurrency | startup s | answered / bench |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        extra = r.get("answered") or (r.get("bench") and "%s output tok/s" % r["bench"]["output_tok_per_s"]) or ""
        startup = r.get("startup_s") or r.get("ready_after_s")
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["log"], r.get("weights_gib"), r.get("available_kv_gib"), r.get("attention_block_size"),
            "{:,}".format(r["kv_cache_tokens"]) if r.get("kv_cache_tokens") else None, r.get("max_concurrency"),
            (r.get("planner") or {}).get("max_concurrency_at_max_model_len"), startup, extra))
    return "\n".join(lines)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--markdown"]
    rows = [summarize(p) for p in args]
    print(markdown(rows) if "--markdown" in sys.argv else json.dumps(rows, indent=1, sort_keys=True))
