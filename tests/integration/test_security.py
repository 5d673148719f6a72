"""Security of a served host, probed as an attacker on the same network would (issue 21).

The deployment is the one the fault tests and the secrets audit share (a fresh test host running the whole
site.yml with the demo profile: one replica, API key set). In order:
  route probe        every route of the server's own /openapi.json, without a key, from another container on the
                     test network, against the edge's port and the replica's own port: 0 answers 2xx outside
                     the allow-list (GET /health)
  engine exits 0     vLLM is stopped from inside (SIGTERM to the engine: it shuts down cleanly, exit code 0):
                     systemd starts it again (Restart=always), healthy within the bound
  crashing request   POST /generative_scoring with label_token_ids, sent on the host itself (the edge never lets
                     it through): the replica serves again within the bound, and if it went down the diagnosis
                     names the request's failure
  container confined no capabilities, no-new-privileges, read-only root, no host IPC on the cpu profile
Writes .cache/reliability/security.json for tests/reliability_report.py.
"""
import json
import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import reliability_common as C  # noqa: E402
import security_probe  # noqa: E402

pytestmark = C.full_deployment_marks()

HOST = C.SERVED_HOST
CONTAINER = "llmfleet-vllm-0"
UNIT = "llmfleet-vllm@0.service"
EDGE_PORT = 8000
REPLICA_PORT = 18000  # vllm_server_port_base + vllm_server_edge_port_offset
BOUND_S = 300  # restart delay (10 s) + the CPU engine's start on a loaded 2-core test bed
RESULTS = {}


def record(name, **doc):
    RESULTS[name] = doc
    faults = {k: v for k, v in RESULTS.items() if "survived" in v}
    C.write_result("security", {"checks": RESULTS, "faults_tried": len(faults),
                                "faults_survived": sum(1 for v in faults.values() if v["survived"]),
                                "probe_violations": len(RESULTS.get("route_probe", {}).get("violations", []))})


wait_serving = C.wait_serving


def unit(prop):
    return C.host_exec(HOST, "systemctl", "show", "-p", prop, "--value", UNIT).stdout.strip()


def container_started_at():
    return C.host_exec(HOST, "docker", "inspect", "-f", "{{.State.StartedAt}}", CONTAINER).stdout.strip()


@pytest.fixture(scope="module")
def served():
    d = C.deploy_site()
    assert d["run"].status == "successful", "site.yml failed:\n%s" % (d["run"].message or d["run"].stdout[-4000:])
    ip = C.host_ip(HOST)
    assert wait_serving(ip, 300, time.monotonic()) is not None, "not serving after site.yml"
    return dict(d, ip=ip)


def test_no_route_answers_without_the_key_from_the_network(served):
    ip = served["ip"]
    openapi = C.host_exec(HOST, "curl", "-fsS", "http://127.0.0.1:%d/openapi.json" % REPLICA_PORT, timeout=30)
    assert openapi.returncode == 0, "the replica's own /openapi.json is not readable on the host: %s" % openapi.stderr
    spec = json.loads(openapi.stdout)
    report = security_probe.run_in_container(
        "bridge", C.load_env()["MOLECULE_HOST_IMAGE"], spec,
        [C.edge_url(ip, port=EDGE_PORT), "http://%s:%d" % (ip, REPLICA_PORT)], "tiny",
        ca_pem=C.host_exec(HOST, "cat", C.EDGE_CA, check=True).stdout)
    record("route_probe", routes=len(security_probe.routes(spec)), requests=report["requests"],
           reachable_targets=report["reachable_targets"], violations=report["violations"],
           table=security_probe.route_table(report))
    assert report["reachable_targets"] == [C.edge_url(ip, port=EDGE_PORT)], \
        "the replica's own port must not be reachable from the network: %s" % report["reachable_targets"]
    assert report["violations"] == [], "answered 2xx without the key: %s" % report["violations"]
    assert report["requests"] > 20


def test_engine_exit_0_is_restarted(served):
    ip = served["ip"]
    before = int(unit("NRestarts") or 0)
    started = time.monotonic()
    # SIGTERM to vLLM (PID 1 of the container): a clean shutdown, exit code 0, that systemd did not ask for.
    C.host_exec(HOST, "docker", "kill", "--signal", "TERM", CONTAINER, check=True)
    C.host_exec(HOST, "docker", "wait", CONTAINER, timeout=120)
    code = C.host_exec(HOST, "docker", "inspect", "-f", "{{.State.ExitCode}}", CONTAINER).stdout.strip()
    recovered = wait_serving(ip, BOUND_S, started)
    restarts = int(unit("NRestarts") or 0) - before
    record("engine_exit_0", exit_code=code, recovery_s=recovered, bound_s=BOUND_S, restarts=restarts,
           survived=recovered is not None and restarts >= 1)
    assert recovered is not None, "not serving %ds after vLLM exited %s: %s" % (BOUND_S, code, unit("ActiveState"))
    assert restarts >= 1


def test_crashing_request_leaves_the_replica_serving(served):
    ip = served["ip"]
    before_started = container_started_at()
    before_restarts = int(unit("NRestarts") or 0)
    # Token ids inside the tiny model's vocabulary (2,048): vLLM scores them, which compiles a sampler kernel.
    body = json.dumps({"model": "tiny", "query": "Is this a question?", "items": ["yes", "no"],
                       "label_token_ids": [9, 10]})
    started = time.monotonic()
    answer = C.host_exec(HOST, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "120", "-X", "POST",
                         "-H", "Content-Type: application/json", "-d", body,
                         "http://127.0.0.1:%d/generative_scoring" % REPLICA_PORT, timeout=150).stdout.strip()
    time.sleep(5)
    recovered = wait_serving(ip, BOUND_S, started)
    crashed = container_started_at() != before_started or int(unit("NRestarts") or 0) > before_restarts
    diagnosis = ""
    if crashed:
        diagnosis = C.host_exec(HOST, "journalctl", "-u", UNIT, "-n", "400", "--no-pager", timeout=60).stdout
    record("crashing_request", http_status=answer, crashed=crashed, recovery_s=recovered, bound_s=BOUND_S,
           survived=recovered is not None)
    assert recovered is not None, "not serving %ds after the request (HTTP %s)" % (BOUND_S, answer)
    assert not crashed, "the request crashed the engine (HTTP %s); journal tail:\n%s" % (answer, diagnosis[-3000:])
    assert answer == "200", "the scoring request was not served (HTTP %s): it did not reach the engine" % answer


def test_container_is_confined(served):
    fmt = ("{{.HostConfig.ReadonlyRootfs}} {{.HostConfig.IpcMode}} {{json .HostConfig.CapDrop}} "
           "{{json .HostConfig.SecurityOpt}} {{json .HostConfig.PortBindings}}")
    out = C.host_exec(HOST, "docker", "inspect", "-f", fmt, CONTAINER, check=True).stdout
    record("container_confined", inspect=out.strip())
    assert out.startswith("true "), out
    assert " host " not in out, "the cpu profile must not share the host's IPC namespace: %s" % out
    assert '"ALL"' in out and "no-new-privileges" in out, out
    assert '"HostIp":"127.0.0.1"' in out, "the replica must publish on loopback only: %s" % out
