#!/usr/bin/env python
"""Deploy speed (#18), all in one command: P1, P2 (one host and a fleet), P5 (warm make demo).

    P1  = cold site.yml wall time / (max(image pull, weight placement) + time to healthy)
    P2  = wall time of the second, idempotent site.yml run on one host (changed must be 0)
    P2N = the same re-run over N hosts at once, and its ratio to P2 (the fleet must cost little more), with the
          CPU time of each re-run (controller and hosts) and the ratio this machine's cores allow at the least
    P5w = a warm `make demo`: tests/testbed/up.sh (everything cached) + tests/testbed/demo.sh on a NEW host

Runs the demo profile (cpu accelerator, tiny model, the test bed's vLLM CPU image pulled by digest) against FRESH
local test hosts (Debian 12 + systemd containers, names from --prefix), through ansible-runner, and reads the stage
times from the task events. Needs `make testbed` first (reads .cache/testbed.env). Prints the numbers, the load
average and the ten slowest tasks of each run; asserts nothing about speed. The machine's load makes every number
an upper bound: read them with the load average printed beside them.

    .venv/bin/python tests/bench/p1_p2_deploy.py [--hosts 4] [--models 3 [--ab-rounds 3]] [--demo] [--keep]
                                                 [--prefix llmfleet-bench] [--tasks-out tasks.json]

--hosts 0 skips the fleet. --models N also deploys one host serving N of the test bed's models at once
(llmfleet_models: the tiny Qwen3-MoE, the tiny Llama, the tiny BERT on the pooling runner) and prints its cold deploy
and no-op re-run beside the one-model host's, with the ratios and task-host pairs (issue #39 item 9): each cold run
against the work it cannot avoid (max(pull, weights) + the engines' start, first start to last /health) and what the
playbook adds to it (the overhead, compared). --ab-rounds N then re-runs the two hosts alternately N times each and
prints the ratio of the medians: one pair of re-runs moves with the machine's load.

The image pull runs in the background while the weights are placed (playbooks/model.yml), so "pull" is the span
from the pull's start to the end of the wait for it: with the weights placed first it is max(pull, weights).
"Time to healthy" is the replica unit's own start, from systemd's timestamps (the container starting to /health
answering): the serve role sets up the edge and the watchdog while it runs.
P5 cold (a machine without the test bed) is not measured here: it needs the test bed's images and caches removed.
"""
import argparse
import datetime
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import ansible_runner

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "integration"))
from reliability_common import load_env, remove_host, start_host  # noqa: E402  (the reliability tests' test hosts)

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Before the replicas started in the background: the serve task that started each replica and returned once
# /health answered (older names). Now the unit's own timestamps are read instead (replica_healthy_s).
HEALTH_TASKS = ("Enable each replica and start it, or restart it where its configuration is not what it runs",
                "Enable and start each replica (systemd waits until /health answers)")


def replica_healthy_s(host, unit="llmfleet-vllm@0.service"):
    """The replica's time to healthy as systemd saw it: from leaving 'inactive' (ExecStartPre, the container's start)
    to entering 'active' (its ExecStartPost got /health). The playbook overlaps this with other work, so no task's
    duration is it any more."""
    spans = unit_spans(host, [unit])
    return spans[0][1] - spans[0][0] if spans else None


def unit_spans(host, units=None):
    """(start, healthy) in seconds of systemd's monotonic clock for each replica unit of the host (all
    llmfleet-vllm@ units unless named) that has both timestamps."""
    if units is None:
        units = subprocess.run(["docker", "exec", host, "systemctl", "list-units", "llmfleet-vllm@*", "--all",
                                "--plain", "--no-legend"], capture_output=True, text=True, check=False).stdout.split()
        units = [u for u in units if u.startswith("llmfleet-vllm@") and u.endswith(".service")]
    spans = []
    for unit in units:
        out = subprocess.run(["docker", "exec", host, "systemctl", "show", unit,
                              "--property=InactiveExitTimestampMonotonic,ActiveEnterTimestampMonotonic"],
                             capture_output=True, text=True, check=False).stdout
        stamps = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        try:
            left, entered = int(stamps["InactiveExitTimestampMonotonic"]), int(stamps["ActiveEnterTimestampMonotonic"])
        except (KeyError, ValueError):
            continue
        if entered > left > 0:
            spans.append((left / 1e6, entered / 1e6))
    return spans


def cold_breakdown(wall, pull, weights, spans):
    """A cold run against the work it cannot avoid: the image pull or the weights (they overlap), then the engines'
    start from the first replica's start to the last one's /health (in the order the host needs: at once on the CPU
    test bed, one after another on a shared GPU). overhead: what the playbook adds to that; P1: wall / unavoidable."""
    engines = (max(end for _s, end in spans) - min(start for start, _e in spans)) if spans else 0.0
    unavoidable = max(pull, weights) + engines
    return {"pull_s": round(pull, 1), "weights_s": round(weights, 1), "engines_start_s": round(engines, 1),
            "engines": len(spans), "unavoidable_s": round(unavoidable, 1), "overhead_s": round(wall - unavoidable, 1),
            "P1": round(wall / unavoidable, 2) if unavoidable else None}


def loadavg():
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


def _ts(value):
    try:
        return datetime.datetime.fromisoformat(value).timestamp()
    except (TypeError, ValueError):
        return None


def host_cpu_s(hosts):
    """CPU seconds the test hosts' containers used so far (cgroup v1 cpuacct, or v2 cpu.stat), everything in them
    counted: systemd, the modules Ansible runs there, dockerd and the vLLM engine. None where it cannot be read."""
    total = 0.0
    for host in hosts:
        cid = subprocess.run(["docker", "inspect", "-f", "{{.Id}}", host], capture_output=True, text=True,
                             check=False).stdout.strip()
        v1 = "/sys/fs/cgroup/cpuacct/docker/%s/cpuacct.usage" % cid
        v2 = [p for p in ("/sys/fs/cgroup/system.slice/docker-%s.scope/cpu.stat" % cid,
                          "/sys/fs/cgroup/unified/docker/%s/cpu.stat" % cid) if os.path.exists(p)]
        try:
            if os.path.exists(v1):
                with open(v1) as fh:
                    total += int(fh.read()) / 1e9
            elif v2:
                with open(v2[0]) as fh:
                    total += int(dict(line.split() for line in fh)["usage_usec"]) / 1e6
            else:
                return None
        except (OSError, ValueError, KeyError):
            return None
    return total


def controller_cpu_s():
    """CPU seconds of this process's finished children: ansible-playbook and the workers it forked."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Run:
    """One site.yml run: wall time, changed count, per-role and per-task times, the pull's span, and the CPU time
    the controller and the hosts spent on it (on this machine both share its cores)."""

    def __init__(self, inventory_dir, env, hosts=()):
        data = tempfile.mkdtemp(prefix="llmfleet-bench-")
        cpu_ctl, cpu_hosts = controller_cpu_s(), host_cpu_s(hosts)
        started = time.monotonic()
        r = ansible_runner.run(private_data_dir=data, project_dir=TOP, playbook=os.path.join(TOP, "site.yml"),
                               inventory=inventory_dir, envvars=env, quiet=True)
        self.wall = time.monotonic() - started
        self.cpu_controller = controller_cpu_s() - cpu_ctl
        after = host_cpu_s(hosts)
        self.cpu_hosts = after - cpu_hosts if after is not None and cpu_hosts is not None else None
        self.rc = r.rc
        self.load = loadavg()
        self.roles, self.tasks, self.slow = {}, {}, []
        pull_start, pull_end, self.task_count, self.skipped_count, self.failures = {}, {}, 0, 0, []
        for event in r.events:
            if event.get("event") not in ("runner_on_ok", "runner_on_failed", "runner_on_skipped"):
                continue
            ed = event["event_data"]
            host, task, role = ed.get("host", ""), ed.get("task", ""), ed.get("role") or "-"
            duration = ed.get("duration") or 0.0
            if event["event"] != "runner_on_skipped":
                self.task_count += 1
            else:
                self.skipped_count += 1
            if event["event"] == "runner_on_failed" and not ed.get("ignore_errors"):
                res = ed.get("res") or {}
                self.failures.append("%s | %s: %s" % (host, task, json.dumps(res, default=str)[:1500]))
            self.roles[role] = self.roles.get(role, 0.0) + duration
            self.tasks[task] = max(self.tasks.get(task, 0.0), duration)
            self.slow.append((duration, "%s | %s%s" % (role, task, "" if host == "" else " [%s]" % host)))
            start, end = _ts(ed.get("start")), _ts(ed.get("end"))
            if role == "vllm_image" and task.startswith("Pull ") and event["event"] == "runner_on_ok" and start:
                pull_start[host] = start
                pull_end[host] = end
            if (role == "vllm_image" and task == "Wait for the background pull of the pinned image"
                    and event["event"] == "runner_on_ok" and end):
                pull_end[host] = end
        self.pull = max([pull_end[h] - pull_start[h] for h in pull_start if pull_end.get(h)] or [0.0])
        self.slow.sort(reverse=True)
        self.changed = sum(((r.stats or {}).get("changed") or {}).values())
        shutil.rmtree(data, ignore_errors=True)

    def show_slow(self, title, n=10):
        print("ten slowest tasks (%s, %.1f s wall, %d tasks ran, %d skipped, CPU: controller %.1f s, hosts %s, load %s):"
              % (title, self.wall, self.task_count, self.skipped_count, self.cpu_controller,
                 "?" if self.cpu_hosts is None else "%.1f s" % self.cpu_hosts, self.load))
        for duration, key in self.slow[:n]:
            print("  %6.1f s  %s" % (duration, key))


def bench_models(env, count):
    """The first ``count`` test-bed models as llmfleet_models (issue #39 item 9): the tiny Qwen3-MoE, the tiny Llama
    (another architecture) and the tiny BERT on the pooling runner, each uploaded from the controller into its own
    directory. count 0: none (the one-model variables)."""
    arch = dict(item.split("=", 1) for item in env.get("LLMFLEET_TEST_ARCH_MODEL_DIRS", "").split(",") if "=" in item)
    models = [("tiny", env["LLMFLEET_TEST_MODEL_DIR"], "generate", 512),
              ("tiny-llama", arch.get("tiny-llama", ""), "generate", 256),
              ("tiny-bert", env.get("LLMFLEET_TEST_POOLING_MODEL_DIR", ""), "pooling", 128)]
    if count > len(models) or any(not path for _n, path, _r, _l in models[:count]):
        raise SystemExit("--models %d: the test bed has %d of these models (make testbed)" % (
            count, sum(1 for _n, path, _r, _l in models if path)))
    return [{"name": name, "model": "llmfleet-test/" + os.path.basename(path.rstrip("/")), "source": "local",
             "local_path": path, "weights_dir": "/srv/llmfleet/models/" + name, "max_model_len": length,
             "runner": runner} for name, path, runner, length in models[:count]]


def inventory_for(hosts, models=None):
    """The demo inventory for ``hosts``, with its own CA directory and, given ``models``, llmfleet_models."""
    inventory = tempfile.mkdtemp(prefix="llmfleet-bench-inv-")
    shutil.copytree(os.path.join(TOP, "inventories", "demo", "group_vars"), os.path.join(inventory, "group_vars"))
    extra = {"llmfleet_tls_ca_dir": os.path.join(inventory, "tls")}
    if models:
        extra["llmfleet_models"] = models
    with open(os.path.join(inventory, "group_vars", "all", "bench.yml"), "w") as fh:
        json.dump(extra, fh)
    with open(os.path.join(inventory, "hosts.yml"), "w") as fh:
        json.dump({"all": {"children": {"gpu_nodes": {"hosts": {h: {
            "ansible_connection": "community.docker.docker_api", "ansible_python_interpreter": "/usr/bin/python3"}
            for h in hosts}}}}}, fh)
    return inventory


def alternate_reruns(targets, env, rounds):
    """No-op re-runs of each target ({label: (inventory, hosts)}) in turn, ``rounds`` times, the order rotated each
    round, so the machine's changing load falls on all alike: {label: [wall s]}, and the changed count over all."""
    labels, walls, changed = list(targets), {label: [] for label in targets}, 0
    for i in range(rounds):
        for label in labels[i % len(labels):] + labels[:i % len(labels)]:
            run = Run(targets[label][0], env, targets[label][1])
            walls[label].append(round(run.wall, 1))
            changed += run.changed + (0 if run.rc == 0 else 1000)
    return walls, changed


def bench_many(prefix, env, count, one, keep, rounds=0):
    """Cold deploy and no-op re-run of one host serving ``count`` models, against the one-model runs ``one`` (cold,
    rerun, breakdown, inventory, host) (item 9: the re-run at most 1.3x the one-model re-run; the cold deploy their
    unavoidable work plus the same fixed overhead). rounds: then that many re-runs of each host, alternating."""
    one_cold, one_rerun, one_breakdown, one_inventory, one_host = one
    name = "%s-m%d" % (prefix, count)
    inventory = inventory_for([name], bench_models(env, count))
    try:
        start_host(name, env["MOLECULE_HOST_IMAGE"])
        cold = Run(inventory, env, [name])
        breakdown = cold_breakdown(cold.wall, cold.pull, cold.roles.get("model_weights", 0.0), unit_spans(name))
        rerun = Run(inventory, env, [name]) if cold.rc == 0 else None
        out = {"models": count, "models_cold_wall_s": round(cold.wall, 1), "models_cold_rc": cold.rc,
               "models_cold_load": cold.load, "models_cold_failures": cold.failures,
               "models_cold_ratio": round(cold.wall / one_cold.wall, 2),
               "models_cold_breakdown": breakdown,
               "models_cold_overhead_ratio": round(breakdown["overhead_s"] / one_breakdown["overhead_s"], 2),
               "models_cold_tasks": cold.task_count + cold.skipped_count}
        if rerun:
            out.update({"models_rerun_s": round(rerun.wall, 1), "models_rerun_changed": rerun.changed,
                        "models_rerun_rc": rerun.rc, "models_rerun_load": rerun.load,
                        "models_rerun_tasks": rerun.task_count + rerun.skipped_count,
                        "models_rerun_ratio": round(rerun.wall / one_rerun.wall, 2)})
            rerun.show_slow("re-run, one host, %d models" % count)
        if rerun and rounds:
            walls, changed = alternate_reruns({"one": (one_inventory, [one_host]), "many": (inventory, [name])},
                                              env, rounds)
            out.update({"ab_rerun_s": walls, "ab_rerun_changed": changed, "ab_rerun_load": loadavg(),
                        "ab_rerun_ratio_of_medians": round(statistics.median(walls["many"])
                                                           / statistics.median(walls["one"]), 2)})
        cold.show_slow("cold, one host, %d models" % count)
        return out, {"models_cold": cold, "models_rerun": rerun}
    finally:
        if not keep:
            remove_host(name)
        shutil.rmtree(inventory, ignore_errors=True)


def bench_demo(prefix, env):
    """A warm `make demo`: the test bed's up.sh (all cached) into a scratch env file, then demo.sh on a new host."""
    name = "%s-demo" % prefix
    remove_host(name)
    scratch = tempfile.mkdtemp(prefix="llmfleet-bench-demo-")
    try:
        started = time.monotonic()
        up = subprocess.run(["tests/testbed/up.sh", os.path.join(scratch, "testbed.env")], cwd=TOP, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            text=True, start_new_session=True, check=False)
        testbed = time.monotonic() - started
        if up.returncode != 0:
            print(up.stdout[-3000:])
            return {"P5_warm_rc": up.returncode}
        demo_env = dict(env, **load_env(os.path.join(scratch, "testbed.env")))
        demo_env["LLMFLEET_DEMO_HOST"] = name
        started = time.monotonic()
        demo = subprocess.run(["tests/testbed/demo.sh"], cwd=TOP, env=demo_env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, check=False)
        demo_s = time.monotonic() - started
        if demo.returncode != 0:
            print(demo.stdout[-3000:])
        return {"P5_warm_s": round(testbed + demo_s, 1), "P5_warm_testbed_s": round(testbed, 1),
                "P5_warm_demo_sh_s": round(demo_s, 1), "P5_warm_rc": demo.returncode, "P5_warm_load": loadavg()}
    finally:
        remove_host(name)
        shutil.rmtree(scratch, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=4, help="hosts for the fleet re-run (0: skip it)")
    parser.add_argument("--demo", action="store_true", help="also time a warm make demo on a new host (P5 warm)")
    parser.add_argument("--prefix", default=os.environ.get("LLMFLEET_BENCH_PREFIX", "llmfleet-bench"),
                        help="test host name prefix")
    parser.add_argument("--keep", action="store_true", help="leave the test hosts running")
    parser.add_argument("--models", type=int, default=0,
                        help="also deploy one host serving this many test-bed models (llmfleet_models, 2-3) and print "
                             "its cold deploy and re-run against the one-model host's")
    parser.add_argument("--ab-rounds", type=int, default=0,
                        help="with --models: then this many no-op re-runs of the one-model and the many-model host, "
                             "alternating, and the ratio of their medians")
    parser.add_argument("--tasks-out", help="write every task's duration of each run to this JSON file")
    args = parser.parse_args()
    env = load_env(os.path.join(TOP, ".cache", "testbed.env"))
    key_dir = tempfile.mkdtemp(prefix="llmfleet-bench-key-")
    with open(os.path.join(key_dir, "api_key"), "w") as fh:
        fh.write("bench-key\n")
    env.update({"LLMFLEET_DEMO_API_KEY_FILE": os.path.join(key_dir, "api_key"),
                "ANSIBLE_COLLECTIONS_PATH": os.path.join(TOP, "collections"),
                "ANSIBLE_CONFIG": os.path.join(TOP, "ansible.cfg"),
                # ansible-runner starts ansible-playbook from PATH: the one next to this interpreter.
                "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")})
    one = "%s-p1" % args.prefix
    fleet = ["%s-f%d" % (args.prefix, i + 1) for i in range(args.hosts)]
    inventories = []
    result = {"load_at_start": loadavg()}
    try:
        start_host(one, env["MOLECULE_HOST_IMAGE"])
        inventories.append(inventory_for([one]))
        cold = Run(inventories[-1], env, [one])
        if cold.rc != 0:
            print("cold site.yml failed (rc=%s): %s" % (cold.rc, cold.failures))
            cold.show_slow("cold, failed")
            return 1
        weights = cold.roles.get("model_weights", 0.0)
        healthy = replica_healthy_s(one) or next((cold.tasks[t] for t in HEALTH_TASKS if t in cold.tasks), 0.0)
        breakdown = cold_breakdown(cold.wall, cold.pull, weights, unit_spans(one))
        rerun = Run(inventories[-1], env, [one])
        p1 = cold.wall / (max(cold.pull, weights) + healthy)
        result.update({
            "cold_wall_s": round(cold.wall, 1), "image_pull_s": round(cold.pull, 1),
            "weight_placement_s": round(weights, 1), "time_to_healthy_s": round(healthy, 1), "P1": round(p1, 2),
            "cold_load": cold.load, "cold_breakdown": breakdown, "cold_tasks": cold.task_count + cold.skipped_count,
            "P2_s": round(rerun.wall, 1), "rerun_changed": rerun.changed, "rerun_rc": rerun.rc,
            "rerun_load": rerun.load, "rerun_tasks": rerun.task_count + rerun.skipped_count,
            "rerun_cpu_controller_s": round(rerun.cpu_controller, 1),
            "rerun_cpu_hosts_s": None if rerun.cpu_hosts is None else round(rerun.cpu_hosts, 1),
            "per_role_cold_s": {k: round(v, 1) for k, v in sorted(cold.roles.items(), key=lambda kv: -kv[1])},
            "per_role_rerun_s": {k: round(v, 1) for k, v in sorted(rerun.roles.items(), key=lambda kv: -kv[1])},
        })
        if not args.keep and not args.models:
            remove_host(one)
        fleet_runs = None
        if fleet:
            for name in fleet:
                start_host(name, env["MOLECULE_HOST_IMAGE"])
            inventories.append(inventory_for(fleet))
            fleet_cold = Run(inventories[-1], env, fleet)
            fleet_rerun = Run(inventories[-1], env, fleet) if fleet_cold.rc == 0 else None
            fleet_runs = (fleet_cold, fleet_rerun)
            result.update({
                "fleet_hosts": len(fleet), "fleet_cold_wall_s": round(fleet_cold.wall, 1),
                "fleet_cold_rc": fleet_cold.rc, "fleet_cold_load": fleet_cold.load,
                "fleet_cold_failures": fleet_cold.failures})
            if fleet_rerun:
                result.update({
                    "P2_fleet_s": round(fleet_rerun.wall, 1), "P2_fleet_ratio": round(fleet_rerun.wall / rerun.wall, 2),
                    "fleet_rerun_changed": fleet_rerun.changed, "fleet_rerun_rc": fleet_rerun.rc,
                    "fleet_rerun_load": fleet_rerun.load,
                    "fleet_rerun_cpu_controller_s": round(fleet_rerun.cpu_controller, 1),
                    "fleet_rerun_cpu_hosts_s": None if fleet_rerun.cpu_hosts is None else round(fleet_rerun.cpu_hosts, 1)})
                # What the fleet's re-run costs at the least on this machine's cores, from the one-host run's own CPU
                # time: N times its CPU spread over all cores, against its wall time. A ratio floor above 1.5 means the
                # target cannot be shown here, whatever the playbook does, without hosts that have their own CPUs.
                if rerun.cpu_hosts is not None:
                    floor = len(fleet) * (rerun.cpu_controller + rerun.cpu_hosts) / (os.cpu_count() or 1)
                    result.update({"P2_fleet_cpu_floor_s": round(floor, 1),
                                   "P2_fleet_ratio_cpu_floor": round(floor / rerun.wall, 2),
                                   "cores": os.cpu_count()})
            if not args.keep:
                for name in fleet:
                    remove_host(name)
        many_runs = {}
        if args.models:
            many, many_runs = bench_many(args.prefix, env, args.models, (cold, rerun, breakdown, inventories[0], one),
                                         args.keep, args.ab_rounds)
            result.update(many)
        if args.demo:
            demo_env = {k: v for k, v in env.items() if k.startswith(("ANSIBLE_", "PATH"))}
            result.update(bench_demo(args.prefix, dict(os.environ, **demo_env)))
        print(json.dumps(result, indent=2))
        print("P1 = %.1f / (max(%.1f, %.1f) + %.1f) = %.2f   P2 = %.1f s (changed=%d)%s%s   load %s"
              % (cold.wall, cold.pull, weights, healthy, p1, rerun.wall, rerun.changed,
                 ("   P2 x%d = %.1f s (%.2fx)" % (len(fleet), result["P2_fleet_s"], result["P2_fleet_ratio"])
                  if "P2_fleet_s" in result else ""),
                 ("   P5 warm = %.1f s" % result["P5_warm_s"] if "P5_warm_s" in result else ""), loadavg()))
        if "models_rerun_s" in result:
            many = result["models_cold_breakdown"]
            print("%d models on one host: cold %.1f s (%.2fx one model's; unavoidable %.1f s = max(pull %.1f, weights "
                  "%.1f) + %d engines' start %.1f s; overhead %.1f s against one model's %.1f s: %.2fx), re-run %.1f s "
                  "(%.2fx; changed=%d; %d vs %d task-host pairs)"
                  % (args.models, result["models_cold_wall_s"], result["models_cold_ratio"], many["unavoidable_s"],
                     many["pull_s"], many["weights_s"], many["engines"], many["engines_start_s"], many["overhead_s"],
                     breakdown["overhead_s"], result["models_cold_overhead_ratio"], result["models_rerun_s"],
                     result["models_rerun_ratio"], result["models_rerun_changed"], result["models_rerun_tasks"],
                     result["rerun_tasks"]))
        if "ab_rerun_s" in result:
            print("alternating no-op re-runs: one model %s s, %d models %s s; ratio of the medians %.2f (changed=%d, "
                  "load %s)" % (result["ab_rerun_s"]["one"], args.models, result["ab_rerun_s"]["many"],
                                result["ab_rerun_ratio_of_medians"], result["ab_rerun_changed"], result["ab_rerun_load"]))
        if args.tasks_out:
            runs = {"cold": cold, "rerun": rerun}
            if fleet_runs:
                runs.update({"fleet_cold": fleet_runs[0], "fleet_rerun": fleet_runs[1]})
            runs.update(many_runs)
            with open(args.tasks_out, "w") as fh:
                json.dump({name: {"wall_s": run.wall, "load": run.load, "tasks": run.slow}
                           for name, run in runs.items() if run}, fh, indent=1)
        cold.show_slow("cold, one host")
        rerun.show_slow("re-run, one host")
        if fleet_runs and fleet_runs[1]:
            fleet_runs[1].show_slow("re-run, %d hosts" % len(fleet))
        ok = rerun.rc == 0 and rerun.changed == 0
        if args.models:
            ok = ok and result.get("models_rerun_rc") == 0 and result.get("models_rerun_changed") == 0
            ok = ok and result.get("ab_rerun_changed", 0) == 0
        if fleet_runs:
            ok = ok and fleet_runs[1] is not None and fleet_runs[1].rc == 0 and fleet_runs[1].changed == 0
        return 0 if ok else 1
    finally:
        if not args.keep:
            for name in [one] + fleet:
                remove_host(name)
        for inventory in inventories:
            shutil.rmtree(inventory, ignore_errors=True)
        shutil.rmtree(key_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
