#!/usr/bin/env python
"""Reliability and security in three numbers: bad inputs tried / refused cleanly, faults survived, secret hits.

    .venv/bin/python tests/reliability_report.py            # run everything, then print the counts
    .venv/bin/python tests/reliability_report.py --collect  # only print the counts of the last runs

Runs, with pytest (one process for the three files of this suite, so the fault tests and the secrets audit share
one served test host):
  tests/integration/test_bad_inputs.py         every case through ansible-runner: failed, changed=0, the fix named
  tests/integration/test_faults.py             container kill -9, dockerd restart, host restart, re-run after them;
                                               then issue 16's convergence cases (a port change onto a held port
                                               refused with the replica untouched; the bind failure diagnosed; one
                                               good re-run serving again from auto-restart, crash loop, failed,
                                               stopped and stale states)
  tests/integration/test_security.py           every route without the key from the network (2xx outside the
                                               allow-list), vLLM exiting 0, a request that crashes the engine
  tests/integration/test_secrets_audit.py      sentinel API key and hub token: hits outside the 0600 env file
  tests/integration/test_model_fetch_faults.py (the weights' own fault tests, counted here, not repeated):
                                               interrupted download, corrupted shard, disk too small
and reads the fleet's rolling-upgrade result (a broken image stops the roll at the first host with no failed
request: molecule/fleet, written to .cache/fleet-report.json by `molecule test -s fleet`; --fleet runs it).

Needs `make testbed` for the host tests (sources .cache/testbed.env). Exit status 0 only when every input was
refused cleanly, every fault was survived and there are 0 secret hits.
"""
import argparse
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.environ.get("LLMFLEET_RELIABILITY_OUT", os.path.join(TOP, ".cache", "reliability"))
SUITE = ["tests/integration/test_bad_inputs.py", "tests/integration/test_faults.py",
         "tests/integration/test_watchdog.py",
         "tests/integration/test_security.py", "tests/integration/test_secrets_audit.py"]
WEIGHTS_FAULTS = "tests/integration/test_model_fetch_faults.py"
# Which weights test covers which fault of issue 9.
WEIGHTS_MAP = [("interrupted download", "test_kill_mid_download_then_rerun_keeps_finished_files"),
               ("corrupted shard", "test_corrupt_shard_in_place_is_detected_and_refetched"),
               ("corrupted shard (in staging)", "test_corrupt_finished_file_in_staging_is_refetched"),
               ("disk full", "test_disk_too_small_is_refused_before_downloading")]


def testbed_env():
    env = dict(os.environ)
    path = os.path.join(TOP, ".cache", "testbed.env")
    if os.path.exists(path):
        with open(path) as fh:
            for line in fh:
                if "=" in line and not line.startswith("#"):
                    k, v = line.rstrip("\n").split("=", 1)
                    env.setdefault(k, v)
    env["LLMFLEET_RELIABILITY_OUT"] = OUT
    return env


def pytest(args, env):
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"] + args
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=TOP, env=env, check=False).returncode


def load(name):
    try:
        with open(os.path.join(OUT, name)) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def weights_faults(junit):
    """[(fault, survived, detail)] from the weights tests' JUnit XML (parametrised cases all must pass)."""
    if not os.path.exists(junit):
        return []
    cases = {}
    for tc in ET.parse(junit).getroot().iter("testcase"):
        base = tc.get("name").split("[")[0]
        bad = any(child.tag in ("failure", "error") for child in tc)
        skipped = any(child.tag == "skipped" for child in tc)
        cases.setdefault(base, []).append("failed" if bad else "skipped" if skipped else "passed")
    out = []
    for fault, test in WEIGHTS_MAP:
        states = cases.get(test)
        if states:
            out.append((fault, all(s == "passed" for s in states),
                        "%s: %s" % (test, ", ".join(states))))
    return out


def fleet_fault(path):
    try:
        with open(path) as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return None
    r = doc.get("roll_broken_image")
    if not r:
        return None
    failed = (r.get("requests") or {}).get("failed")
    ok = r.get("playbook_rc", 0) != 0 and not r.get("hosts_upgraded") and failed == 0
    return ("broken image during a rolling upgrade", ok,
            "roll stopped (rc %s), hosts upgraded %s, failed requests %s, balancer %s"
            % (r.get("playbook_rc"), r.get("hosts_upgraded"), failed, r.get("balancer_after")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--collect", action="store_true", help="do not run anything, print the last results")
    ap.add_argument("--bad-inputs-only", action="store_true", help="run only the host-free bad-input matrix")
    ap.add_argument("--fleet", action="store_true", help="also run `molecule test -s fleet` (long)")
    ap.add_argument("--fleet-report", default=os.path.join(TOP, ".cache", "fleet-report.json"))
    args = ap.parse_args()
    env = testbed_env()
    junit = os.path.join(OUT, "weights-faults.xml")
    if not args.collect:
        os.makedirs(OUT, exist_ok=True)
        for name in ("bad_inputs.json", "faults.json", "secrets_audit.json", "security.json", "convergence.json",
                     "watchdog.json"):
            if os.path.exists(os.path.join(OUT, name)):
                os.remove(os.path.join(OUT, name))
        pytest(SUITE[:1] if args.bad_inputs_only else SUITE, env)
        if not args.bad_inputs_only and os.path.exists(os.path.join(TOP, WEIGHTS_FAULTS)):
            pytest([WEIGHTS_FAULTS, "--junitxml", junit], env)
        if args.fleet:
            subprocess.run([os.path.join(os.path.dirname(sys.executable), "molecule"), "test", "-s", "fleet"],
                           cwd=TOP, env=env, check=False)

    bad = load("bad_inputs.json") or {"tried": 0, "refused_cleanly": 0, "cases": {}}
    faults = load("faults.json") or {"faults": {}}
    audit = load("secrets_audit.json")
    convergence = load("convergence.json")
    security = load("security.json") or {"checks": {}}

    def detail(r):
        if r.get("recovery_s") is not None:
            text = "healthy again after %ss (bound %ss)" % (r["recovery_s"], r["bound_s"])
            if "container_kept" in r:
                text += ", same container: %s" % ("yes" if r["container_kept"] else "NO")
            if "systemd_restarts" in r:
                text += ", systemd restarts: %d" % r["systemd_restarts"]
            return text
        if "changed" in r:
            return "changed=%d in %ss (bound %ss)%s" % (r["changed"], r.get("wall_s"), r["bound_s"],
                                                        ": %s" % r["changed_tasks"] if r["changed_tasks"] else "")
        return json.dumps({k: v for k, v in r.items() if k != "survived"})

    rows = [(name, r["survived"], detail(r)) for name, r in faults["faults"].items() if "changed" not in r]
    # Not a fault: the check after them (a re-converge finds every final path complete: changed=0).
    after = [(name, r["survived"], detail(r)) for name, r in faults["faults"].items() if "changed" in r]
    rows += [(name, r["survived"], detail(r)) for name, r in (load("watchdog.json") or {"faults": {}})["faults"].items()]
    rows += [(name.replace("_", " "), r["survived"], detail(r)) for name, r in security["checks"].items()
             if "survived" in r]
    rows += weights_faults(junit)
    fleet = fleet_fault(args.fleet_report)
    if fleet:
        rows.append(fleet)

    print()
    print("Bad inputs: %d tried, %d refused cleanly (failed, changed=0, message names the fix)"
          % (bad["tried"], bad["refused_cleanly"]))
    for cid, c in sorted(bad["cases"].items()):
        if not c["refused_cleanly"]:
            print("  NOT CLEAN  %s (%s): status %s, changed %s: %s" % (cid, c["what"], c["status"], c["changed"],
                                                                       c["message"][-300:]))
    survived = sum(1 for _unused, ok, _unused in rows if ok)
    print("Faults: %d tried, %d survived" % (len(rows), survived))
    for name, ok, detail in rows:
        print("  %-8s %-40s %s" % ("ok" if ok else "FAILED", name, detail))
    for name, ok, text in after:
        print("After the faults: %s %s: %s" % (name, "ok" if ok else "FAILED", text))
    if not fleet:
        print("  (not counted: broken image during a rolling upgrade; no roll_broken_image in %s, run "
              "`molecule test -s fleet` or --fleet)" % args.fleet_report)
    if convergence:
        print("Convergence (issue 16): %d tried, %d ok (refused with the replica untouched, or serving again after one "
              "good re-run)" % (convergence["tried"], convergence["ok"]))
        for name, c in convergence["cases"].items():
            bits = ["%s" % c.get("kind")]
            if c.get("state_before_rerun"):
                bits.append("unit before the re-run: %s" % c["state_before_rerun"])
            if c.get("rerun_s") is not None:
                bits.append("re-run %ss" % c["rerun_s"])
            if "changed" in c:
                bits.append("changed=%s" % c["changed"])
            print("  %-8s %-58s %s" % ("ok" if c["ok"] else "FAILED", name, ", ".join(bits)))
    else:
        print("Convergence: not measured (the served-host tests did not run: make test-full / LLMFLEET_FULL=1)")
    probe = security["checks"].get("route_probe")
    if probe:
        print("Unauthenticated 2xx outside the allow-list: %d (%d routes of /openapi.json, %d requests, reachable %s)"
              % (len(probe["violations"]), probe["routes"], probe["requests"], ", ".join(probe["reachable_targets"])))
        for v in probe["violations"]:
            print("  OPEN  %s %s%s -> %s" % (v["method"], v["target"], v["path"], v["status"]))
    else:
        print("Unauthenticated 2xx: not measured (tests/integration/test_security.py did not run)")
    if audit:
        print("Secret hits: %d (places searched %d, containers %d, processes %d; env file %s %s holds %d of 2)"
              % (audit["secret_hits"], audit["places_searched"], audit["containers_inspected"],
                 audit["processes_checked"], audit["env_file"], audit["env_file_mode_owner"], audit["env_file_holds"]))
        for place, hits in audit["places"].items():
            if hits:
                print("  HIT  %s: %s" % (place, hits))
    else:
        print("Secret hits: not measured (the audit did not run: make testbed?)")
    good = (bad["tried"] > 0 and bad["tried"] == bad["refused_cleanly"] and rows and survived == len(rows)
            and all(ok for _unused, ok, _unused in after)
            and (convergence is None or convergence["tried"] == convergence["ok"])
            and audit is not None and audit["secret_hits"] == 0
            and probe is not None and not probe["violations"])
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
