#!/usr/bin/env python
"""The model_weights role's no-op re-run with three models of llmfleet_models against one (issue #39 item 9).

On the test bed (make testbed: MOLECULE_HOST_IMAGE, LLMFLEET_TEST_HUB_ARCH_REPOS, LLMFLEET_TEST_MODEL_DIR, the HF
mirror and the wheelhouse): one fresh systemd test host; the three models are the tiny Llama and Gemma 3 by repo id
from the mirror and the tiny Qwen3-MoE uploaded from the controller; the one model is the tiny Llama. Each list
keeps its own record file (model_weights_record_file), so that both stay no-ops when they alternate. After a
placing run of each, the re-runs alternate (--rounds times each) through ansible-runner as a user runs the role.

Prints, per list: task-host pairs of a re-run (ok, changed, skipped, failed), changed, and the median wall time;
then the ratio of the medians and `uptime`'s load average. With --json the last line is one JSON object.

Usage: weights_models_noop.py [--rounds 3] [--json] [--keep]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import reliability_common as C  # noqa: E402

PLAY = """
- name: Weights of llmfleet_models
  hosts: gpu_nodes
  become: true
  gather_facts: false
  roles:
    - llmfleet.vllm.model_weights
"""


def lists(env):
    repos = [r.split("@", 1) for r in env["LLMFLEET_TEST_HUB_ARCH_REPOS"].split(",")]
    llama = {"name": "llama", "model": repos[0][0], "revision": repos[0][1]}
    gemma = {"name": "gemma", "model": repos[1][0], "revision": repos[1][1]}
    tiny = {"name": "tiny", "model": "tiny-qwen3-moe", "source": "local", "local_path": env["LLMFLEET_TEST_MODEL_DIR"]}
    return {"1": [llama], "3": [llama, gemma, tiny]}


def run(env, inventory, models, record):
    extravars = {"llmfleet_models": models, "model_weights_endpoint": env["LLMFLEET_TEST_HF_ENDPOINT_FROM_HOSTS"],
                 "model_weights_wheelhouse": env["LLMFLEET_TEST_WHEELHOUSE"], "model_weights_record_file": record}
    res = C.run_playbook(PLAY, inventory, extravars=extravars, timeout=1200, keep=True)
    events = [e for e in res.runner.events if e.get("event") in ("runner_on_ok", "runner_on_skipped",
                                                                 "runner_on_failed")]
    shutil.rmtree(res.data_dir, ignore_errors=True)
    if res.status != "successful":
        raise SystemExit("the run failed: %s" % res.message)
    return {"pairs": len(events), "changed": res.changed_total, "wall_s": res.wall_s}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the test host")
    args = ap.parse_args()
    env = C.load_env()
    host = os.environ.get("LLMFLEET_WEIGHTS_BENCH_HOST", "llmfleet-weights-bench")
    work = tempfile.mkdtemp(prefix="llmfleet-weights-bench-")
    inventory = os.path.join(work, "hosts.yml")
    with open(inventory, "w") as fh:
        json.dump(C.docker_inventory([host]), fh)
    C.start_host(host, env["MOLECULE_HOST_IMAGE"])
    try:
        models = lists(env)
        records = {n: "/etc/llmfleet/model_weights-%s.json" % n for n in models}
        for n in models:  # the placing runs
            run(env, inventory, models[n], records[n])
        runs = {n: [] for n in models}
        for _round in range(args.rounds):
            for n in models:
                runs[n].append(run(env, inventory, models[n], records[n]))
    finally:
        if not args.keep:
            C.remove_host(host)
        shutil.rmtree(work, ignore_errors=True)
    load = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    out = {"rounds": args.rounds, "load": load}
    for n, rs in runs.items():
        out["models_%s" % n] = {"pairs": sorted(set(r["pairs"] for r in rs)), "changed": sum(r["changed"] for r in rs),
                                "wall_s": [round(r["wall_s"], 1) for r in rs],
                                "median_s": round(statistics.median(r["wall_s"] for r in rs), 1)}
        print("%s model(s): %s task-host pairs, changed=%d, wall %s s (median %.1f s)" % (
            n, out["models_%s" % n]["pairs"], out["models_%s" % n]["changed"], out["models_%s" % n]["wall_s"],
            out["models_%s" % n]["median_s"]))
    out["ratio"] = round(out["models_3"]["median_s"] / out["models_1"]["median_s"], 2)
    print("re-run ratio 3 models / 1 model: %.2f (bar: 1.3); %s" % (out["ratio"], load))
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
