#!/usr/bin/env python
"""P4: is the planner's KV capacity what vLLM itself allocates?

Starts the vLLM CPU engine image on the tiny test model with a given --kv-cache-memory-bytes, reads the KV
capacity vLLM logs ("GPU KV cache size: N tokens", printed by the CPU engine too), plans the same model with
the same budget (llmfleet.vllm planner, accelerator cpu) and prints the ratio planned / logged.
Goal: within 10% (exit status 1 otherwise).

  tests/bench/kv_accuracy.py --model-dir /path/to/tiny-qwen3-moe [--image llmfleet-testbed/vllm-cpu:latest]
      [--budget 67108864 --budget 268435456] [--max-model-len 512] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "collections"))

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import model_profiles as M  # noqa: E402
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import planner as P  # noqa: E402

KV_LINE = re.compile(r"KV cache size: ([\d,]+) tokens")
CONC_LINE = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")


def vllm_logged_tokens(image, model_dir, budget, max_model_len, timeout):
    """Run the engine until it logs its KV capacity; returns (tokens, log line, concurrency line)."""
    name = "llmfleet-planner-p4-%d-%d" % (os.getpid(), budget)
    cmd = ["docker", "run", "--rm", "--name", name, "--network", "none",
           "-e", "VLLM_ENABLE_V1_MULTIPROCESSING=0", "-e", "HF_HUB_OFFLINE=1",
           "-v", "%s:/model:ro" % os.path.abspath(model_dir), image,
           "/model", "--kv-cache-memory-bytes", str(budget), "--max-model-len", str(max_model_len),
           "--enforce-eager", "--distributed-executor-backend", "uni", "--max-num-seqs", "16"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    found = conc = None
    lines = []
    deadline = time.time() + timeout
    try:
        for line in proc.stdout:
            lines.append(line.rstrip())
            m = KV_LINE.search(line)
            if m:
                found = (int(m.group(1).replace(",", "")), line.strip())
            if CONC_LINE.search(line):
                conc = line.strip()
            if found and conc or time.time() > deadline:
                break
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
        proc.kill()
        proc.wait()
    if not found:
        raise SystemExit("vLLM did not log its KV cache size; last lines:\n" + "\n".join(lines[-30:]))
    return found[0], found[1], conc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--image", default="llmfleet-testbed/vllm-cpu:latest")
    ap.add_argument("--budget", type=int, action="append")
    ap.add_argument("--max-model-len", type=int, default=512)
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--json")
    a = ap.parse_args()
    budgets = a.budget or [64 * 1024 * 1024, 256 * 1024 * 1024]

    config, index, wb = M.read_model_dir(a.model_dir)
    profile = M.profile_from_model_dir(config, index=index, weights_bytes=wb, name=a.model_dir)
    rows = []
    ok = True
    for b in budgets:
        plan = P.plan(None, profile, accelerator="cpu", kv_cache_memory_bytes=b, max_model_len=a.max_model_len,
                      max_num_seqs=16)
        logged, line, conc = vllm_logged_tokens(a.image, a.model_dir, b, a.max_model_len, a.timeout)
        ratio = plan["kv_cache_tokens"] / logged
        ok = ok and abs(ratio - 1) <= 0.10
        rows.append({"kv_cache_memory_bytes": b, "planned_tokens": plan["kv_cache_tokens"],
                     "vllm_logged_tokens": logged, "ratio": round(ratio, 4),
                     "kv_bytes_per_token": plan["kv_cache_bytes_per_token"], "vllm_line": line,
                     "vllm_concurrency_line": conc})
        print("budget %d bytes: planned %d tokens, vLLM logged %d tokens, ratio %.4f  [%s]"
              % (b, plan["kv_cache_tokens"], logged, ratio, line))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=2)
    print("P4 %s: every ratio within 10%%" % ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
