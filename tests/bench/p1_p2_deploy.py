#!/usr/bin/env python3
"""P1 / P2: how close a cold site.yml comes to its unavoidable work, and what an idempotent re-run costs.

    P1 = cold site.yml wall time / (max(image pull, weight placement) + time to healthy)
    P2 = wall time of the second, idempotent site.yml run (changed must be 0)

Runs the demo profile (cpu accelerator, tiny model, the test bed's vLLM CPU image pulled by digest) against a
FRESH local test host, through ansible-runner, and reads the stage times from the task events. Needs
`make testbed` first (sources .cache/testbed.env itself). Prints the numbers; asserts nothing about speed.

    .venv/bin/python tests/bench/p1_p2_deploy.py [--keep]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import ansible_runner

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOST = os.environ.get("LLMFLEET_BENCH_HOST", "llmfleet-bench-p1")


def load_env(path):
    env = {}
    with open(path) as fh:
        for line in fh:
            if "=" in line and not line.startswith("#"):
                key, value = line.rstrip("\n").split("=", 1)
                env[key] = value
    return env


def start_host(image):
    subprocess.run(["docker", "rm", "-f", HOST], capture_output=True)
    subprocess.run(["docker", "run", "-d", "--name", HOST, "--hostname", HOST, "--cap-add", "SYS_ADMIN",
                    "--cap-add", "NET_ADMIN", "--security-opt", "seccomp=unconfined", "--security-opt",
                    "apparmor=unconfined", "--cgroupns", "host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
                    "-v", "/var/lib/docker", "--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp",
                    image, "/lib/systemd/systemd"], check=True, capture_output=True)
    for _ in range(60):
        state = subprocess.run(["docker", "exec", HOST, "systemctl", "is-system-running"],
                               capture_output=True, text=True).stdout.strip()
        if state in ("running", "degraded"):
            return
        time.sleep(1)


def run_site(inventory_dir, env):
    data = tempfile.mkdtemp(prefix="llmfleet-p1-")
    started = time.monotonic()
    r = ansible_runner.run(private_data_dir=data, project_dir=TOP, playbook=os.path.join(TOP, "site.yml"),
                           inventory=inventory_dir, envvars=env, quiet=True)
    wall = time.monotonic() - started
    role_time, task_time, slow = {}, {}, []
    for event in r.events:
        if event.get("event") not in ("runner_on_ok", "runner_on_failed", "runner_on_skipped"):
            continue
        ed = event["event_data"]
        duration = ed.get("duration") or 0.0
        role = ed.get("role") or "-"
        role_time[role] = role_time.get(role, 0.0) + duration
        task_time[ed.get("task", "")] = task_time.get(ed.get("task", ""), 0.0) + duration
        key = "%s | %s" % (role, ed.get("task", ""))
        slow.append((duration, key))
    stats = r.stats or {}
    changed = sum((stats.get("changed") or {}).values())
    shutil.rmtree(data, ignore_errors=True)
    run_site.slow = sorted(slow, reverse=True)[:10]
    return r.rc, wall, changed, role_time, task_time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="leave the test host running")
    args = parser.parse_args()
    env = load_env(os.path.join(TOP, ".cache", "testbed.env"))
    inventory = tempfile.mkdtemp(prefix="llmfleet-p1-inv-")
    shutil.copytree(os.path.join(TOP, "inventories", "demo", "group_vars"), os.path.join(inventory, "group_vars"))
    with open(os.path.join(inventory, "hosts.yml"), "w") as fh:
        json.dump({"all": {"children": {"gpu_nodes": {"hosts": {HOST: {
            "ansible_connection": "community.docker.docker", "ansible_python_interpreter": "/usr/bin/python3"}}}}}}, fh)
    key_dir = tempfile.mkdtemp(prefix="llmfleet-p1-key-")
    with open(os.path.join(key_dir, "api_key"), "w") as fh:
        fh.write("p1-bench-key\n")
    env.update({"LLMFLEET_DEMO_API_KEY_FILE": os.path.join(key_dir, "api_key"),
                "ANSIBLE_COLLECTIONS_PATH": os.path.join(TOP, "collections"),
                "ANSIBLE_CONFIG": os.path.join(TOP, "ansible.cfg"),
                # ansible-runner starts ansible-playbook from PATH: the one next to this interpreter.
                "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")})
    start_host(env["MOLECULE_HOST_IMAGE"])
    try:
        rc, cold, changed1, roles, tasks = run_site(inventory, env)
        if rc != 0:
            print("cold site.yml failed (rc=%s)" % rc)
            return 1
        pull = roles.get("vllm_image", 0.0)
        weights = roles.get("model_weights", 0.0)
        healthy = tasks.get("Enable and start each replica (systemd waits until /health answers)", 0.0)
        cold_slow = run_site.slow
        rc2, warm, changed2, _, _ = run_site(inventory, env)
        warm_slow = run_site.slow
        p1 = cold / (max(pull, weights) + healthy)
        print(json.dumps({
            "cold_wall_s": round(cold, 1), "image_pull_s": round(pull, 1), "weight_placement_s": round(weights, 1),
            "time_to_healthy_s": round(healthy, 1), "P1": round(p1, 2),
            "rerun_wall_s": round(warm, 1), "rerun_changed": changed2, "rerun_rc": rc2, "P2_s": round(warm, 1),
            "per_role_s": {k: round(v, 1) for k, v in sorted(roles.items(), key=lambda kv: -kv[1])},
        }, indent=2))
        print("P1 = %.1f / (max(%.1f, %.1f) + %.1f) = %.2f   P2 = %.1f s (changed=%d)"
              % (cold, pull, weights, healthy, p1, warm, changed2))
        print("load average: %s" % open("/proc/loadavg").read().strip())
        for title, slow in (("cold", cold_slow), ("re-run", warm_slow)):
            print("ten slowest tasks (%s):" % title)
            for d, k in slow:
                print("  %6.1f s  %s" % (d, k))
        return 0 if rc2 == 0 and changed2 == 0 else 1
    finally:
        if not args.keep:
            subprocess.run(["docker", "rm", "-f", HOST], capture_output=True)
        shutil.rmtree(inventory, ignore_errors=True)
        shutil.rmtree(key_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
