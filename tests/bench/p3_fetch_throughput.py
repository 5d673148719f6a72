#!/usr/bin/env python
"""P3: model_fetch throughput vs a plain HTTP client (curl) over the same local mirror and files.

Builds a synthetic model with large random shards (default 2 x 200 MiB, generated on the fly, never
committed), publishes it as one git/LFS repo, serves it with olah (Hugging Face API) and the test bed's
ModelScope server, then per hub and per round:
  * curl: every file of the repo fetched in parallel (curl -Z, one connection per file, like the SDKs)
    from the same resolve URLs the SDK uses, into a fresh directory on the same filesystem;
  * model_fetch: the module itself (python plugins/modules/model_fetch.py ARGS.json, no ansible-playbook
    start-up in the timing), end to end: listing, download, sha256 + git-blob verification, header
    checks, atomic rename.
Prints each round, the medians, and the ratio = model_fetch throughput / curl throughput (goal >= 0.9).

End to end includes fixed costs (importing the SDK, the file listing, the final checks, ~1 s here); the
download+verify phase ratio is what a large checkpoint approaches. --link-mib N puts one shared N MiB/s
link (tests/testbed/throttle_proxy.py --shared) between both clients and the mirror, as when the mirror
is across a network; without it the loopback test is CPU-bound on this machine.

Usage: p3_fetch_throughput.py [--shard-mb 200,200] [--rounds 3] [--hubs hf,modelscope] [--link-mib N]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "testbed"))
import hub_repo  # noqa: E402
import hubs  # noqa: E402

REPO = "bench/p3-model"


def curl_fetch(urls, out_dir):
    out_dir.mkdir(parents=True)
    cmd = ["curl", "-sS", "--no-progress-meter", "-f", "-L", "-Z", "--parallel-max", "8"]
    for i, (name, url) in enumerate(urls):
        cmd += ["-o", str(out_dir / ("f%d" % i)), url]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - t0


def module_fetch(args, work):
    work.mkdir(parents=True, exist_ok=True)
    argfile = work / "args.json"
    argfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "collections"), HF_HOME=str(work / "hf-home"),
               MODELSCOPE_CACHE=str(work / "ms-home"))
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, str(ROOT / "plugins" / "modules" / "model_fetch.py"), str(argfile)],
                       env=env, capture_output=True, text=True, check=False)
    dt = time.perf_counter() - t0
    try:
        res = json.loads(p.stdout)
    except ValueError:
        raise SystemExit("model_fetch printed no JSON: %s\n%s" % (p.stdout[-2000:], p.stderr[-2000:]))
    if res.get("failed"):
        raise SystemExit("model_fetch failed: %s" % res.get("msg"))
    return dt, res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shard-mb", default="200,200")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hubs", default="hf,modelscope")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--link-mib", type=float, default=0,
                    help="put a shared-rate proxy (one link of N MiB/s for all connections) in front of each hub")
    a = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="llmfleet-p3-", dir=a.workdir))
    servers = []
    try:
        model = hub_repo.synth_model(base / "model", [float(x) for x in a.shard_mb.split(",")], seed=3)
        commit = hub_repo.publish(model, base / "mirrors", REPO)
        files = sorted(p.name for p in model.iterdir())
        total = sum((model / f).stat().st_size for f in files)
        print("P3: %d files, %.1f MiB, commit %s" % (len(files), total / 2 ** 20, commit[:12]))
        summary = {}
        for hub in a.hubs.split(","):
            if hub == "hf":
                srv = hubs.start_olah(base / "mirrors", probe_repo=REPO)
                urls = [(f, "%s/%s/resolve/%s/%s" % (srv.url, REPO, commit, f)) for f in files]
                args = {"source": "hf", "repo_id": REPO, "revision": commit, "endpoint": srv.url}
            else:
                srv = hubs.start_modelscope(base / "mirrors")
                urls = [(f, "%s/api/v1/models/%s/repo?Revision=v1&FilePath=%s" % (srv.url, REPO, f)) for f in files]
                args = {"source": "modelscope", "repo_id": REPO, "revision": "v1", "endpoint": srv.url}
            servers.append(srv)
            if a.link_mib:
                proxy = hubs.start_throttle(srv.url, a.link_mib * 2 ** 20, shared=True)
                servers.append(proxy)
                urls = [(f, u.replace(srv.url, proxy.url)) for f, u in urls]
                args["endpoint"] = proxy.url
            curl_fetch(urls, base / ("warm-" + hub))  # warm the server (olah builds its cache of the repo)
            shutil.rmtree(base / ("warm-" + hub))
            t_curl, t_mod, t_phase = [], [], []
            for r in range(a.rounds):
                d = base / ("curl-%s-%d" % (hub, r))
                t_curl.append(curl_fetch(urls, d))
                shutil.rmtree(d)
                dest = base / "dest" / ("%s-%d" % (hub, r))
                dt, res = module_fetch(dict(args, dest=str(dest)), base / ("mod-%s-%d" % (hub, r)))
                assert res["bytes_fetched"] == total and res["changed"], res
                t_mod.append(dt)
                t_phase.append(res["seconds"])
                shutil.rmtree(dest)
                print("  %-10s round %d: curl %6.2f s (%7.1f MiB/s)   model_fetch %6.2f s (%7.1f MiB/s, "
                      "download phase %.2f s, verified %s, hashed while downloading %s)" % (
                          hub, r + 1, t_curl[-1], total / t_curl[-1] / 2 ** 20, dt, total / dt / 2 ** 20,
                          res["seconds"], res["verified"], res.get("streamed_hashes")))
            mc, mm, mp = statistics.median(t_curl), statistics.median(t_mod), statistics.median(t_phase)
            summary[hub] = (mc / mm, mc / mp)
            print("  %-10s median: curl %.1f MiB/s, model_fetch %.1f MiB/s end to end (ratio %.2f), "
                  "%.1f MiB/s in its download+verify phase (ratio %.2f)" % (
                      hub, total / mc / 2 ** 20, total / mm / 2 ** 20, mc / mm, total / mp / 2 ** 20, mc / mp))
            srv.stop()
        link = ("over one %.0f MiB/s link" % a.link_mib) if a.link_mib else "over loopback (no link limit)"
        for hub, (ratio, phase_ratio) in summary.items():
            print("P3 %s %s, %s: model_fetch / curl throughput = %.2f end to end, %.2f download+verify phase "
                  "(goal >= 0.9) %s" % (hub, link, a.shard_mb, ratio, phase_ratio,
                                        "PASS" if ratio >= 0.9 else "BELOW GOAL"))
        return 0 if all(r[0] >= 0.9 for r in summary.values()) else 1
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
