"""A hung engine on a served host: the hang watchdog finds it, restarts the replica, and touches nothing else.

The deployment is the one the fault tests use (tests/integration/reliability_common.py: a fresh test host, the
whole site.yml, demo profile, the watchdog at its defaults). The fault: SIGSTOP of vLLM's engine core process
inside the container. The API server keeps answering /health 200 (the case the watchdog exists for), a
completion never comes back. Bound: failures x interval + timeout (the watchdog's settings on the host) + 30 s
for detection; then the replica's own start-up bound until it serves again. Also checked: the reason and the
diagnosis in the watchdog's journal, llmfleet_watchdog_restarts_total, and that the edge and dockerd were not
restarted. Writes .cache/reliability/watchdog.json (counted by tests/reliability_report.py).

Set LLMFLEET_WATCHDOG_TEST_HOST to run it on a host name of your own (the default shares the fault tests' host).
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

HOST = os.environ.get("LLMFLEET_WATCHDOG_TEST_HOST", C.SERVED_HOST)
CONTAINER = "llmfleet-vllm-0"
UNIT = "llmfleet-vllm@0.service"
FIND_ENGINE = ("import os\n"
               "for p in os.listdir('/proc'):\n"
               "    if not p.isdigit() or p == str(os.getpid()): continue\n"
               "    try: t = open('/proc/%s/cmdline' % p, 'rb').read() + open('/proc/%s/comm' % p, 'rb').read()\n"
               "    except OSError: continue\n"
               "    if b'EngineCore' in t: print(p)\n")


def completion_ok(ip, timeout=10):
    body = json.dumps({"model": "tiny", "prompt": "hello", "max_tokens": 1}).encode()
    req = urllib.request.Request(C.edge_url(ip, "/v1/completions"), data=body, method="POST",
                                 headers={"Authorization": "Bearer " + C.SENTINEL_API_KEY,
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status == 200 and bool(json.load(r).get("choices"))
    except (urllib.error.URLError, OSError, ValueError):
        return False


def health(ip):
    try:
        with urllib.request.urlopen(C.edge_url(ip, "/health"), timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as err:
        return err.code
    except (urllib.error.URLError, OSError):
        return None


def started_and_serving(ip):
    """A completion, sent only once the replica's unit is active (its start gate has passed): what a client behind
    the balancer sees, and the test does not race the start gate."""
    return show(UNIT, "ActiveState") == "active" and completion_ok(ip)


def show(unit, prop):
    return C.host_exec(HOST, "systemctl", "show", "-p", prop, "--value", unit).stdout.strip()


def container_id():
    r = C.host_exec(HOST, "docker", "inspect", "--format", "{{.Id}}", CONTAINER, timeout=30)
    return r.stdout.strip() if r.returncode == 0 else None


@pytest.fixture(scope="module")
def served():
    d = C.deploy_site(host=HOST)
    assert d["run"].status == "successful", d["run"].message or d["run"].stdout[-4000:]
    ip = C.host_ip(HOST)
    started = time.monotonic()
    while not started_and_serving(ip) and time.monotonic() - started < 300:
        time.sleep(2)
    assert started_and_serving(ip), "not serving after site.yml"
    return dict(d, ip=ip)


def test_a_frozen_engine_is_found_and_restarted_and_nothing_else_is_touched(served):
    ip = served["ip"]
    config = json.loads(C.host_exec(HOST, "cat", "/etc/llmfleet/watchdog.json", check=True).stdout)
    timer = C.host_exec(HOST, "cat", "/etc/systemd/system/llmfleet-watchdog.timer", check=True).stdout
    interval = int([line.split("=", 1)[1] for line in timer.splitlines() if line.startswith("OnUnitActiveSec=")][0])
    bound_detect = config["failures"] * interval + config["timeout"] + 30
    bound_serve = bound_detect + C.START_TIMEOUT_S
    before = {"container": container_id(), "unit_restarts": int(show(UNIT, "NRestarts") or 0),
              "edge": show("llmfleet-edge.service", "ActiveEnterTimestampMonotonic"),
              "docker": show("docker.service", "ActiveEnterTimestampMonotonic")}
    pids = C.host_exec(HOST, "docker", "exec", CONTAINER, "python3", "-c", FIND_ENGINE, check=True).stdout.split()
    assert pids, "no EngineCore process in %s" % CONTAINER
    started = time.monotonic()
    C.host_exec(HOST, "docker", "exec", CONTAINER, "kill", "-STOP", *pids, check=True)
    # The case the watchdog exists for: /health says 200, a completion never comes back.
    health_while_frozen = health(ip)
    frozen_completion_ok = completion_ok(ip, timeout=8)
    detected = recovered = None
    while time.monotonic() - started < bound_serve:
        if detected is None and container_id() not in (None, before["container"]):
            detected = time.monotonic() - started
        if detected is not None and started_and_serving(ip):
            recovered = time.monotonic() - started
            break
        time.sleep(2)
    journal = C.host_exec(HOST, "journalctl", "--no-pager", "-o", "cat", "-u", "llmfleet-watchdog.service").stdout
    metrics = C.host_exec(HOST, "cat", config["textfile"]).stdout
    after = {"edge": show("llmfleet-edge.service", "ActiveEnterTimestampMonotonic"),
             "docker": show("docker.service", "ActiveEnterTimestampMonotonic")}
    doc = {"survived": bool(detected is not None and detected <= bound_detect and recovered is not None
                            and before["edge"] == after["edge"] and before["docker"] == after["docker"]),
           "health_while_frozen": health_while_frozen, "completion_while_frozen": frozen_completion_ok,
           "detected_s": detected and round(detected, 1), "detect_bound_s": bound_detect,
           "recovery_s": recovered and round(recovered, 1), "bound_s": bound_serve,
           "edge_untouched": before["edge"] == after["edge"], "dockerd_untouched": before["docker"] == after["docker"],
           "watchdog": {"interval_s": interval, "timeout_s": config["timeout"], "failures": config["failures"]}}
    C.write_result("watchdog", {"faults": {"engine frozen (SIGSTOP), /health still 200": doc}})
    print("watchdog: %s" % json.dumps(doc))
    assert health_while_frozen == 200, "the fault did not reproduce a hang behind a healthy /health"
    assert not frozen_completion_ok, "a completion answered while the engine was frozen"
    assert detected is not None and detected <= bound_detect, \
        "the watchdog did not replace the container within %ss:\n%s" % (bound_detect, journal[-3000:])
    assert recovered is not None, "not serving %ss after the freeze" % bound_serve
    assert "is hung" in journal and "restarting it" in journal, journal[-3000:]
    assert 'llmfleet_watchdog_restarts_total{replica="0"} 1' in metrics, metrics
    assert doc["edge_untouched"] and doc["dockerd_untouched"], (before, after)
