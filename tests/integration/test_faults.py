"""Faults on a served host: each must end with the service healthy again within its bound, by itself.

One fresh systemd test host runs the whole site.yml (demo profile: the vLLM CPU engine serving the tiny model,
shared with the secrets audit), then, in order:
  kill -9 of the vLLM container    systemd (Restart=on-failure) starts a new one: healthy again within the bound
  dockerd restart                   live-restore: the same container keeps serving, never restarted
  host restart                      the enabled unit starts the replica at boot: healthy again within the bound
and last, a site.yml re-run must change nothing (no half-written file left in a final path after the faults).

Each fault's recovery time is measured from the fault to the first 200 from /health AND /v1/models listing the
served name, polled every second. Needs `make testbed`. Writes .cache/reliability/faults.json.

Faults covered elsewhere and counted by tests/reliability_report.py (not repeated here): interrupted download,
corrupted shard and a too-small disk (tests/integration/test_model_fetch_faults.py); a broken image during a
rolling upgrade (the fleet's upgrade Molecule scenario).
"""
import json
import os
import sys
import time
import urllib.error
import urllib.request

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability_common as C  # noqa: E402

pytestmark = C.full_deployment_marks()

HOST = C.SERVED_HOST
CONTAINER = "llmfleet-vllm-0"
UNIT = "llmfleet-vllm@0.service"
RESULTS = {}


def record(name, **doc):
    RESULTS[name] = doc
    C.write_result("faults", {"faults": RESULTS, "survived": sum(1 for r in RESULTS.values() if r["survived"]),
                              "tried": len(RESULTS)})


def serving_ok(ip, key):
    """True when /health answers 200 and /v1/models lists the served name (with the API key)."""
    try:
        with urllib.request.urlopen("http://%s:8000/health" % ip, timeout=3) as r:
            if r.status != 200:
                return False
        req = urllib.request.Request("http://%s:8000/v1/models" % ip, headers={"Authorization": "Bearer " + key})
        with urllib.request.urlopen(req, timeout=5) as r:
            return any(m.get("id") == "tiny" for m in json.load(r).get("data", []))
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_serving(ip, bound_s, started):
    while time.monotonic() - started < bound_s:
        if serving_ok(ip, C.SENTINEL_API_KEY):
            return time.monotonic() - started
        time.sleep(1)
    return None


def container_state():
    r = C.host_exec(HOST, "docker", "inspect", "--format", "{{.Id}} {{.State.StartedAt}} {{.State.Running}}",
                    CONTAINER, timeout=30)
    return r.stdout.strip() if r.returncode == 0 else None


def unit(prop):
    return C.host_exec(HOST, "systemctl", "show", "-p", prop, "--value", UNIT).stdout.strip()


@pytest.fixture(scope="module")
def served():
    d = C.deploy_site()
    run = d["run"]
    assert run.status == "successful", "site.yml failed on the fresh test host:\n%s" % (run.message or
                                                                                        run.stdout[-4000:])
    ip = C.host_ip(HOST)
    assert wait_serving(ip, 300, time.monotonic()) is not None, "not serving after site.yml"
    return dict(d, ip=ip)


def test_container_kill_9_comes_back_by_itself(served):
    bound = C.START_TIMEOUT_S
    before = container_state()
    restarts = int(unit("NRestarts") or 0)
    started = time.monotonic()
    C.host_exec(HOST, "docker", "kill", "--signal", "KILL", CONTAINER, check=True)
    # The old container is gone or dead first (the fault took effect), then a new one serves.
    while time.monotonic() - started < 30 and serving_ok(served["ip"], C.SENTINEL_API_KEY):
        time.sleep(0.5)
    recovered = None
    while time.monotonic() - started < bound:
        state = container_state()
        if state and state.split()[0] != before.split()[0] and serving_ok(served["ip"], C.SENTINEL_API_KEY):
            recovered = time.monotonic() - started
            break
        time.sleep(1)
    record("container kill -9", survived=recovered is not None, recovery_s=recovered and round(recovered, 1),
           bound_s=bound, systemd_restarts=int(unit("NRestarts") or 0) - restarts)
    assert recovered is not None, "not serving %ds after kill -9 (unit %s: %s)" % (
        bound, unit("ActiveState"), C.host_exec(HOST, "journalctl", "-u", UNIT, "-n", "30", "-o", "cat").stdout)
    assert int(unit("NRestarts")) > restarts, "systemd did not restart the unit"


def test_dockerd_restart_keeps_the_container_serving(served):
    bound = 300
    before = container_state()
    started = time.monotonic()
    C.host_exec(HOST, "systemctl", "restart", "docker", check=True, timeout=240)
    restarted_s = time.monotonic() - started
    recovered = wait_serving(served["ip"], bound, started)
    time.sleep(15)  # a unit that lost its container would be restarting by now (RestartSec=10)
    after = container_state()
    kept = bool(before and after and before.split()[:2] == after.split()[:2])
    active = unit("ActiveState")
    ok = recovered is not None and kept and active == "active" and serving_ok(served["ip"], C.SENTINEL_API_KEY)
    record("dockerd restart", survived=ok, recovery_s=recovered and round(recovered, 1), bound_s=bound,
           dockerd_restart_s=round(restarted_s, 1), container_kept=kept, unit=active)
    assert recovered is not None, "not serving %ds after restarting dockerd" % bound
    assert kept, "live-restore should keep the container; before %s, after %s" % (before, after)
    assert active == "active", "unit %s after the dockerd restart" % active


def test_host_restart_brings_the_replica_back_at_boot(served):
    bound = C.START_TIMEOUT_S + 300
    started = time.monotonic()
    C.host_exec(HOST, "sync")
    import subprocess
    subprocess.run(["docker", "restart", "--time", "30", HOST], check=True, capture_output=True, timeout=120)
    C.wait_systemd(HOST, timeout=180, booting_ok=True)
    ip = C.host_ip(HOST)
    recovered = wait_serving(ip, bound, started)
    record("host restart", survived=recovered is not None, recovery_s=recovered and round(recovered, 1),
           bound_s=bound, unit_enabled=C.host_exec(HOST, "systemctl", "is-enabled", UNIT).stdout.strip())
    assert recovered is not None, "not serving %ds after the host restart (unit %s)" % (bound, unit("ActiveState"))
    served["ip"] = ip


def test_rerun_after_the_faults_changes_nothing(served):
    """No half-written file in a final path: re-converging after the faults finds everything in place."""
    d = served
    run = C.run_playbook(os.path.join(C.TOP, "site.yml"), d["inventory"], envvars=d["envvars"], timeout=1200,
                         cmdline="-e @%s" % d["secrets_file"])
    record("site.yml re-run after the faults", survived=run.status == "successful" and run.changed_total == 0,
           recovery_s=None, bound_s=1200, wall_s=round(run.wall_s, 1), changed=run.changed_total,
           changed_tasks=run.changed_tasks)
    assert run.status == "successful", run.message or run.stdout[-3000:]
    assert run.changed_total == 0, "changed after the faults: %s" % run.changed_tasks
