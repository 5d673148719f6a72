#!/usr/bin/env python
"""Engine cache: how much faster a replica restarts when vLLM's compile caches survive the container.

Deploys the demo profile (cpu accelerator, tiny model, the test bed's vLLM CPU image) with torch.compile ON
(vllm_server_args_extra without enforce-eager) on a FRESH local test host through site.yml, then restarts the
replica through systemd twice: once after emptying its engine cache directory (cold), once with the cache the
previous start left (warm). Same image, same flags, same host. Every time is read from the engine's own log
(`docker logs --timestamps`): container start -> "Application startup complete.", plus vLLM's own
"torch.compile took ... s in total" and "init engine ... took ... s" lines.

    flock /tmp/llmfleet-heavy.lock .venv/bin/python tests/bench/engine_cache.py [--keep]

Needs the test bed (.cache/testbed.env). Prints cold, warm and warm/cold; exit 1 when warm > 0.5 x cold.
"""
import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import ansible_runner

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "integration"))
from reliability_common import load_env, remove_host, start_host  # noqa: E402  (the reliability tests' test hosts)

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOST = "ops-bench-engine-cache"
CACHE_DIR = "/var/cache/llmfleet/engine"
GOAL = 0.5


def sh(*argv, check=True):
    """Run a command inside the test host; stdout."""
    r = subprocess.run(["docker", "exec", HOST] + list(argv), capture_output=True, check=False, text=True)
    if check and r.returncode != 0:
        raise RuntimeError("%s: rc=%d %s" % (" ".join(argv), r.returncode, r.stderr[-2000:]))
    return r.stdout


def parse_ts(text):
    """Docker's RFC 3339 timestamps (nanoseconds) -> epoch seconds."""
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z", text.strip())
    base = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return base.timestamp() + float("0." + (m.group(2) or "0"))


# Start-up phases, each from the first engine log line that marks its end (the CPU engine's markers; a marker that
# is missing is skipped, so the GPU engine's log reads as well).
PHASES = [("process start + imports", r"vLLM API server version|non-default args"),
          ("engine config", r"Starting to load model|Initializing a V1 LLM engine"),
          ("model load", r"Model loading took|Loading weights took"),
          ("MoE setup", r"Warming up model for the compilation|Starting torch\.compile"),
          # Ends at the first cache line (TORCH_LOGS' AOTAutograd lookup, vLLM's AOT load or failure): dynamo's trace;
          # a hit is logged after the cached graph and its kernels are loaded, so when warm it holds that load too.
          ("dynamo trace (+ cache load when warm)", r"AOTAutograd cache (?:hit|miss)|Directly load|load failure"),
          ("compile or cache load + warm-up run", r"Warming up done|Initial profiling/warmup run took|init engine"),
          ("KV cache + API server up", r"Application startup complete")]
# The engine's own lines that say what came from the cache: vLLM's (AOT artefact, VllmBackend graphs) and, with
# TORCH_LOGS naming the two cache modules, torch's AOTAutograd and inductor FX graph caches.
CACHE_LINES = r"Directly load|load failure|saved AOT|AOTAutograd cache (?:hit|miss)|fx graph cache (?:hit|miss)"


def boot_times(container):
    """Seconds from the container's start to vLLM's 'Application startup complete.', by phase, and vLLM's own
    numbers and cache lines."""
    started = parse_ts(sh("docker", "inspect", "--format", "{{.State.StartedAt}}", container))
    log = subprocess.run(["docker", "exec", HOST, "docker", "logs", "--timestamps", container],
                         capture_output=True, check=False, text=True)
    lines = (log.stdout + log.stderr).splitlines()
    ready = warmup_start = warmup_end = None
    marks = {}
    for line in lines:
        stamp = line.split(" ", 1)[0]
        for name, pattern in PHASES:
            if name not in marks and re.search(pattern, line):
                marks[name] = parse_ts(stamp)
        if "Application startup complete" in line:
            ready = parse_ts(stamp)
        elif "Warming up model for the compilation" in line or "Starting torch.compile" in line:
            warmup_start = warmup_start or parse_ts(stamp)
        elif "Initial profiling/warmup run took" in line or "Warming up done" in line:
            warmup_end = parse_ts(stamp)
    text = "\n".join(lines)
    compile_s = re.findall(r"torch\.compile took ([\d.]+) s in total", text)
    init_s = re.findall(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s", text)
    if ready is None:
        raise RuntimeError("no 'Application startup complete' in the log of %s:\n%s" % (container, text[-3000:]))
    phases, last = {}, started
    for name, _pattern in PHASES:
        if name in marks and marks[name] >= last:
            phases[name] = round(marks[name] - last, 1)
            last = marks[name]
    cache_lines = [re.sub(r"\s+", " ", line.split(" ", 1)[-1])[:220] for line in lines if re.search(CACHE_LINES, line)]
    return {"to_ready_s": round(ready - started, 1),
            "phases_s": phases,
            # GPU (VLLM_COMPILE mode) prints torch.compile's total; the CPU engine's mode does not: there the
            # compile + first warm-up run is read between its two log lines.
            "torch_compile_s": float(compile_s[-1]) if compile_s else None,
            "compile_and_warmup_s": round(warmup_end - warmup_start, 1) if warmup_start and warmup_end else None,
            "init_engine_s": float(init_s[-1]) if init_s else None,
            "loaded_from_cache": len(re.findall(r"Directly load|AOTAutograd cache hit|fx graph cache hit", text)),
            "cache_load_failures": re.findall(r"Compiling model again due to a load failure.*reason: (.*)", text),
            "cache_lines": cache_lines[:12] + (["... %d more" % (len(cache_lines) - 12)] if len(cache_lines) > 12 else [])}


def restart(unit):
    t0 = time.monotonic()
    sh("systemctl", "restart", unit)  # returns once /health answers (ExecStartPost)
    return round(time.monotonic() - t0, 1)


def measure(deploy_s, args):
    """Warm restart (the cache the previous start wrote), then cold restart (cache emptied), same image + flags."""
    serving = json.loads(sh("cat", "/etc/llmfleet/serving.json"))
    name = serving["replicas"][0]["name"]
    unit, container = "llmfleet-vllm@%s.service" % name, "llmfleet-vllm-%s" % name
    env_file = "/etc/llmfleet/vllm-%s.env" % name
    for pair in args.env:
        key = pair.split("=", 1)[0]
        sh("sh", "-c", "grep -v '^%s=' %s > %s.new; echo '%s' >> %s.new; cat %s.new > %s; rm %s.new"
           % (key, env_file, env_file, pair, env_file, env_file, env_file, env_file))
    first = boot_times(container)
    if args.reuse or args.env:
        # Prime: a start with the current settings fills the cache (a changed environment is a new cache key).
        restart(unit)
        first = boot_times(container)
    cache = sh("sh", "-c", "ls -d %s/*/" % CACHE_DIR).split()[0].rstrip("/")
    # Warm restart: the cache the previous start wrote.
    warm_wall = restart(unit)
    warm = boot_times(container)
    size = sh("du", "-sh", cache).split()[0]
    # Cold restart: same image, same flags, the cache emptied while the replica is stopped.
    sh("systemctl", "stop", unit)
    sh("sh", "-c", "rm -rf %s/* %s/.[!.]*" % (cache, cache), check=False)
    cold_wall = restart(unit)
    cold = boot_times(container)
    ratio = warm["to_ready_s"] / cold["to_ready_s"]
    print(json.dumps({"deploy_site_yml_s": deploy_s, "engine_cache": cache, "cache_size": size, "env": args.env,
                      "first_start": first, "cold_restart": dict(cold, systemctl_restart_s=cold_wall),
                      "warm_restart": dict(warm, systemctl_restart_s=warm_wall),
                      "warm_over_cold": round(ratio, 2), "goal": GOAL}, indent=2))
    for label, run in (("cold", cold), ("warm", warm)):
        print("%s restart by phase (s): %s" % (label, ", ".join("%s %.1f" % kv for kv in run["phases_s"].items())))
        for line in run["cache_lines"]:
            print("  %s cache: %s" % (label, line))
    print("restart to ready (engine log): cold %.1f s, warm %.1f s, warm/cold = %.2f (goal <= %.2f)"
          % (cold["to_ready_s"], warm["to_ready_s"], ratio, GOAL))
    return 0 if ratio <= GOAL else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="leave the test host running")
    parser.add_argument("--reuse", action="store_true",
                        help="measure on the test host a previous --keep run left (no new deployment)")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                        help="add to the replica's environment file before measuring (a priming start first); e.g. "
                             "TORCH_LOGS=torch._functorch._aot_autograd.autograd_cache,torch._inductor.codecache "
                             "makes torch log its cache hits")
    args = parser.parse_args()
    if args.reuse:
        return measure(None, args)
    env = load_env(os.path.join(TOP, ".cache", "testbed.env"))
    inventory = tempfile.mkdtemp(prefix="ops-cache-inv-")
    shutil.copytree(os.path.join(TOP, "inventories", "demo", "group_vars"), os.path.join(inventory, "group_vars"))
    with open(os.path.join(inventory, "hosts.yml"), "w") as fh:
        json.dump({"all": {"children": {"gpu_nodes": {"hosts": {HOST: {
            "ansible_connection": "community.docker.docker", "ansible_python_interpreter": "/usr/bin/python3",
            # torch.compile ON: the demo's enforce-eager is left out (one process, as in the demo).
            "vllm_server_args_extra": {"distributed-executor-backend": "uni"}}}}}}}, fh)
    key_dir = tempfile.mkdtemp(prefix="ops-cache-key-")
    with open(os.path.join(key_dir, "api_key"), "w") as fh:
        fh.write("engine-cache-bench-key\n")
    env.update({"LLMFLEET_DEMO_API_KEY_FILE": os.path.join(key_dir, "api_key"),
                "ANSIBLE_COLLECTIONS_PATH": os.path.join(TOP, "collections"),
                "ANSIBLE_CONFIG": os.path.join(TOP, "ansible.cfg"),
                "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")})
    start_host(HOST, env["MOLECULE_HOST_IMAGE"])
    data = tempfile.mkdtemp(prefix="ops-cache-run-")
    try:
        t0 = time.monotonic()
        r = ansible_runner.run(private_data_dir=data, project_dir=TOP, playbook=os.path.join(TOP, "site.yml"),
                               inventory=inventory, envvars=env, quiet=True)
        if r.rc != 0:
            print("site.yml failed (rc=%s); see %s" % (r.rc, data))
            return 2
        return measure(round(time.monotonic() - t0, 1), args)
    finally:
        if not args.keep:
            remove_host(HOST)
        shutil.rmtree(inventory, ignore_errors=True)
        shutil.rmtree(key_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
