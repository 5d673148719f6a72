"""Faults on a served host: each must end with the service healthy again within its bound, by itself.

One fresh systemd test host runs the whole site.yml (demo profile: the vLLM CPU engine serving the tiny model,
shared with the secrets audit), then, in order:
  kill -9 of the vLLM container    systemd (Restart=on-failure) starts a new one: healthy again within the bound
  dockerd restart                   live-restore: the same container keeps serving, never restarted
  host restart                      the enabled unit starts the replica at boot: healthy again within the bound
and a site.yml re-run must change nothing (no half-written file left in a final path after the faults).

Then issue 16 on the same host - wrong input never takes the replica down, and one good re-run always converges:
  port change onto a port another process holds   refused by preflight, changed=0, the same container serving
  the issue's bind failure                         the replica's files moved to a held port (as a run before the
                                                   checks existed left them), restarted: docker's "bind: address
                                                   already in use" is diagnosed as port_in_use; freeing the port and
                                                   one good site.yml re-run serve on 8000 again
  crash loop (activating / auto-restart)           a run with a KV budget vLLM refuses fails at the health gate;
                                                   the previous configuration is rolled back and serves again
                                                   before the run ends; one good re-run converges
  failed unit                                      the container killed under Restart=no (unit failed); one re-run
  stopped by hand (inactive)                       one re-run
  stale container (running)                        its files newer than its container (a run that wrote them and
                                                   did not restart): one re-run restarts it, the next changes nothing
Written to .cache/reliability/convergence.json.

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


serving_ok = C.serving_ok
wait_serving = C.wait_serving


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


# ---- issue 16: wrong input never takes the replica down; one good re-run converges from any state ----------------

CONVERGENCE = {}


def record_convergence(name, **doc):
    CONVERGENCE[name] = doc
    C.write_result("convergence", {"cases": CONVERGENCE, "tried": len(CONVERGENCE),
                                   "ok": sum(1 for r in CONVERGENCE.values() if r["ok"])})


def site(served, extravars=None, timeout=1800):
    return C.run_playbook(os.path.join(C.TOP, "site.yml"), served["inventory"], envvars=served["envvars"],
                          extravars=extravars or {}, timeout=timeout, cmdline="-e @%s" % served["secrets_file"])


def unit_state():
    return "%s/%s" % (unit("ActiveState"), unit("SubState"))


def container_port():
    r = C.host_exec(HOST, "docker", "inspect", "--format", "{{json .NetworkSettings.Ports}}", CONTAINER, timeout=30)
    try:
        return sorted(int(b["HostPort"]) for v in json.loads(r.stdout or "{}").values() for b in (v or []))
    except (ValueError, TypeError, KeyError):
        return []


class PortHolder:
    """A process of the test host's own (a transient systemd unit) listening on a port: the "something else"."""

    def __init__(self, port):
        self.unit = "llmfleet-test-port-holder-%d" % port
        C.host_exec(HOST, "systemctl", "stop", self.unit)
        C.host_exec(HOST, "systemctl", "reset-failed", self.unit)
        C.host_exec(HOST, "systemd-run", "--unit", self.unit, "python3", "-m", "http.server", str(port), check=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if C.host_exec(HOST, "python3", "-c", "import socket; socket.create_connection(('127.0.0.1', %d), 1)"
                           % port).returncode == 0:
                return
            time.sleep(0.5)
        raise AssertionError("the port holder on %d did not start" % port)

    def stop(self):
        C.host_exec(HOST, "systemctl", "stop", self.unit)


def good_ports(served):
    """The container's published host ports of the good deployment (8000, or 8000 + the edge's offset behind the
    edge), read once, at the start of the first test that asks (every test starts from the good state)."""
    if "good_ports" not in served:
        served["good_ports"] = container_port()
        assert served["good_ports"], "the served replica publishes no port"
    return served["good_ports"]


def good_rerun_converges(served, name, state_before, **extra):
    """One good site.yml re-run: successful, serving on 8000 with the good configuration."""
    started = time.monotonic()
    run = site(served)
    recovered = wait_serving(served["ip"], 300, time.monotonic())
    run_file = C.host_exec(HOST, "cat", "/etc/llmfleet/vllm-0.run").stdout
    ok = (run.status == "successful" and recovered is not None and container_port() == good_ports(served)
          and "--port 8000" in run_file and "8123" not in run_file)
    record_convergence(name, ok=ok, kind="converged", state_before_rerun=state_before, rerun_status=run.status,
                       rerun_s=round(time.monotonic() - started, 1), unit_after=unit_state(),
                       container_ports=container_port(), **extra)
    assert run.status == "successful", "the good re-run failed from state %s: %s" % (state_before, run.message
                                                                                     or run.stdout[-3000:])
    assert recovered is not None, "not serving after the good re-run (unit %s)" % unit_state()
    assert ok, "not the good configuration: ports %s, run file:\n%s" % (container_port(), run_file)
    return run


def wait_unit(states, timeout=240):
    """Wait until the unit is in one of states (ActiveState/SubState, or ActiveState alone)."""
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        state = unit_state()
        if state not in seen:
            seen.append(state)
        if state in states or state.split("/")[0] in states:
            return state, seen
        time.sleep(1)
    raise AssertionError("unit never reached %s (seen %s)" % (states, seen))


def test_port_change_onto_a_held_port_is_refused_and_the_replica_untouched(served):
    good_ports(served)
    holder = PortHolder(8123)
    try:
        before = container_state()
        run = site(served, {"vllm_server_port_base": 8123}, timeout=1200)
        after = container_state()
        serving = serving_ok(served["ip"], C.SENTINEL_API_KEY)
    finally:
        holder.stop()
    fragments = ["Port 8123 on %s is in use by another process" % HOST, "vllm_server_port_base"]
    missing = [f for f in fragments if f not in run.message]
    ok = run.status == "failed" and run.changed_total == 0 and not missing and before == after and serving
    record_convergence("port change onto a held port", ok=ok, kind="refused", changed=run.changed_total,
                       container_untouched=before == after, serving=serving, message=run.message[-400:])
    assert run.status == "failed" and run.changed_total == 0, (run.status, run.changed_tasks)
    assert not missing, "message lacks %s:\n%s" % (missing, run.message)
    assert before == after and serving, "the serving replica was touched: %s -> %s" % (before, after)


def test_bind_failure_is_diagnosed_and_one_good_rerun_converges(served):
    """The issue's sequence: the replica's files moved to a port something else holds and the unit restarted onto
    them (what a run did before the checks existed); the diagnosis must name the bind failure; after freeing the
    port, one good re-run serves again whatever the unit is doing (auto-restart loop, or up on the bad port)."""
    [host_port] = good_ports(served)
    bad_port = host_port + 123
    holder = PortHolder(bad_port)
    try:
        # The container's published host port (vLLM's own port; behind the edge it is 8000 + the edge's offset).
        C.host_exec(HOST, "sed", "-i", "s/:%d:8000 /:%d:8000 /" % (host_port, bad_port), "/etc/llmfleet/vllm-0.run",
                    check=True)
        C.host_exec(HOST, "sed", "-i", "s#:%d/#:%d/#" % (host_port, bad_port), "/etc/llmfleet/vllm-0.unit.conf",
                    check=True)
        assert ":%d:8000" % bad_port in C.host_exec(HOST, "cat", "/etc/llmfleet/vllm-0.run").stdout
        C.host_exec(HOST, "systemctl", "restart", "--no-block", UNIT, check=True)
        state, seen = wait_unit(["activating/auto-restart", "failed"], timeout=180)
        diag = C.run_playbook(os.path.join(C.TOP, "playbooks", "diagnose.yml"), served["inventory"],
                              envvars=served["envvars"], cmdline="-e @%s" % served["secrets_file"], timeout=600)
    finally:
        holder.stop()
    diagnosed = ("port_in_use" in diag.stdout and "port %d is already taken" % bad_port in diag.stdout
                 and "No known failure signature matched" not in diag.stdout)
    record_convergence("bind failure diagnosed", ok=diagnosed, kind="diagnosed", unit=state,
                       evidence=[line for line in diag.stdout.splitlines() if "port_in_use" in line][:2])
    assert diagnosed, "the bind failure was not diagnosed:\n%s" % diag.stdout[-4000:]
    good_rerun_converges(served, "bind failure on a held port, then one good re-run", state, seen=seen)


KV_TOO_SMALL = {"enforce-eager": True, "distributed-executor-backend": "uni", "kv-cache-memory-bytes": 16384}


def test_crash_loop_is_rolled_back_then_one_good_rerun_converges(served):
    """A run with a KV budget vLLM refuses fails at the health gate; the known-good configuration is put back and
    serves again before the run ends (issue 28), and one good re-run converges."""
    good_ports(served)
    bad = site(served, {"vllm_server_args_extra": KV_TOO_SMALL})
    assert bad.status == "failed", "a 16 KiB KV cache should not serve 512 tokens"
    serving_after_bad_run = serving_ok(served["ip"], C.SENTINEL_API_KEY)
    assert "is serving again" in bad.message, bad.message[-2000:]
    assert serving_after_bad_run, "the previous configuration does not serve after the rollback"
    good_rerun_converges(served, "crash loop (health gate failed) rolled back, then one good re-run", unit_state(),
                         bad_run_failed_task=bad.message[:300], serving_after_bad_run=serving_after_bad_run)


def test_failed_unit_then_one_good_rerun_converges(served):
    good_ports(served)
    dropin = "/run/systemd/system/%s.d" % UNIT
    C.host_exec(HOST, "mkdir", "-p", dropin, check=True)
    C.host_exec(HOST, "sh", "-c", "printf '[Service]\\nRestart=no\\n' > %s/llmfleet-test-norestart.conf" % dropin,
                check=True)
    try:
        C.host_exec(HOST, "systemctl", "daemon-reload", check=True)
        C.host_exec(HOST, "docker", "kill", "--signal", "KILL", CONTAINER, check=True)
        state, seen = wait_unit(["failed"], timeout=120)
    finally:
        C.host_exec(HOST, "rm", "-rf", dropin)
        C.host_exec(HOST, "systemctl", "daemon-reload")
    good_rerun_converges(served, "failed unit, then one good re-run", state, seen=seen)


def test_stopped_unit_then_one_good_rerun_converges(served):
    good_ports(served)
    C.host_exec(HOST, "systemctl", "stop", UNIT, check=True, timeout=180)
    good_rerun_converges(served, "unit stopped by hand, then one good re-run", unit_state())


def test_stale_container_is_restarted_then_nothing_changes(served):
    """Files newer than the running container (a run that wrote them and never restarted): the re-run restarts it
    although the files are unchanged now and the unit is running; the run after that changes nothing."""
    good_ports(served)
    before = container_state()
    C.host_exec(HOST, "touch", "/etc/llmfleet/vllm-0.run", check=True)
    state = unit_state()
    run = good_rerun_converges(served, "running a stale configuration, then one good re-run", state)
    after = container_state()
    assert before.split()[0] != after.split()[0], "the stale container was not restarted"
    again = site(served, timeout=1200)
    record_convergence("re-run after convergence changes nothing", ok=again.status == "successful"
                       and again.changed_total == 0, kind="idempotent", changed=again.changed_total,
                       changed_tasks=again.changed_tasks)
    assert again.status == "successful" and again.changed_total == 0, again.changed_tasks
    assert run.status == "successful"
