"""One model over two hosts as its users meet it (#30): requests through the leader's edge with the API key, the
ranks where they should be, and a kill -9 of the headless rank after which the group serves again within a bound.

Runs in `molecule verify` (or `molecule test -s multinode`) after converge and idempotence. The measured recovery
time is printed and written to .cache/multinode-report.json.
"""
import json
import os
import subprocess
import time
import urllib.error
import urllib.request

import pytest

PROJECT = os.environ.get("MOLECULE_PROJECT_DIRECTORY") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", ".."))
API_KEY = "llmfleet-sentinel-api-key-4f1c"
MODEL = "tiny"
NAME = os.environ.get("LLMFLEET_MULTINODE_NAME", "llmfleet-multinode")
LEADER, RANK1 = NAME + "-a", NAME + "-b"
# The bound a killed rank's group must serve again within, on the test bed's 2 shared cores (a CPU engine's start
# there takes 1-8 minutes with the machine's load); production GPUs: the engine's start time + settle + RestartSec.
RECOVERY_BOUND = float(os.environ.get("LLMFLEET_MULTINODE_RECOVERY_BOUND", "900"))
REPORT = os.path.join(PROJECT, ".cache", "multinode-report.json")

pytestmark = pytest.mark.skipif(not os.environ.get("LLMFLEET_TEST_VLLM_IMAGE_FROM_HOSTS"),
                                reason="needs the test bed (make testbed)")


def on(host, command, check=True):
    return subprocess.run(["docker", "exec", host, "sh", "-c", command], capture_output=True, text=True, check=check)


def address(container):
    info = json.loads(subprocess.run(["docker", "inspect", container], capture_output=True, text=True,
                                     check=True).stdout)[0]
    return info["NetworkSettings"]["Networks"]["bridge"]["IPAddress"]


def chat(host, key=API_KEY, timeout=60):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    request = urllib.request.Request("http://%s:8000/v1/chat/completions" % address(host),
                                     data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    if key:
        request.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read().decode())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except (urllib.error.URLError, OSError) as exc:
        return None, str(exc)


def serving(host):
    return json.loads(on(host, "cat /etc/llmfleet/serving.json").stdout)


def test_the_leader_serves_through_its_edge_with_the_key_only():
    status, answer = chat(LEADER)
    assert status == 200, answer
    assert answer["choices"][0]["message"]["content"] is not None
    assert chat(LEADER, key=None)[0] == 401
    assert chat(LEADER, key="wrong")[0] == 401


def test_the_group_is_one_replica_split_across_the_hosts():
    lead, other = serving(LEADER), serving(RANK1)
    assert lead["multinode"]["node_rank"] == 0 and lead["multinode"]["is_leader"] is True
    assert other["multinode"]["node_rank"] == 1 and other["multinode"]["is_leader"] is False
    assert len(lead["replicas"]) == 1 and other["replicas"] == []
    run_lead = on(LEADER, "cat /etc/llmfleet/vllm-0.run").stdout
    run_other = on(RANK1, "cat /etc/llmfleet/vllm-0.run").stdout
    for text in (run_lead, run_other):
        assert "--nnodes 2" in text and "--pipeline-parallel-size 2" in text and "--network host" in text
    assert "--headless" in run_other and "--headless" not in run_lead
    assert "--node-rank 1" in run_other and "--node-rank 0" in run_lead
    # Only the leader has an edge and a hang watchdog; every host has the group watch.
    assert on(LEADER, "systemctl is-active llmfleet-edge.service", check=False).stdout.strip() == "active"
    assert on(RANK1, "systemctl is-active llmfleet-edge.service", check=False).stdout.strip() != "active"
    for host in (LEADER, RANK1):
        assert on(host, "systemctl is-active llmfleet-group-watch.service").stdout.strip() == "active"
    # Pipeline parallel: each rank loaded its own half of the layers (vLLM's worker names say which stage).
    assert "Worker_PP1" in on(RANK1, "docker logs llmfleet-vllm-0 2>&1").stdout


def test_kill_9_of_the_headless_rank_the_group_serves_again_within_the_bound():
    assert chat(LEADER)[0] == 200
    started = time.monotonic()
    # kill -9 of the rank's vLLM (its container's main process): the container dies, systemd restarts the unit;
    # the leader's group watch sees the rank's connections gone and restarts the leader.
    on(RANK1, "docker kill --signal KILL llmfleet-vllm-0")
    failed_seen = False
    while time.monotonic() - started < RECOVERY_BOUND:
        status, _answer = chat(LEADER, timeout=20)
        if status == 200 and failed_seen:
            break
        if status != 200:
            failed_seen = True
        time.sleep(2)
    else:
        pytest.fail("the group did not serve again within %d s of kill -9 on rank 1\n%s" % (
            RECOVERY_BOUND, on(LEADER, "journalctl -u llmfleet-group-watch --no-pager | tail -20").stdout))
    recovery = time.monotonic() - started
    journal = on(LEADER, "journalctl -u llmfleet-group-watch --no-pager").stdout
    assert "no connection with the rank on %s" % RANK1 in journal
    os.makedirs(os.path.dirname(REPORT), exist_ok=True)
    with open(REPORT, "w") as handle:
        json.dump({"recovery_s": round(recovery, 1), "bound_s": RECOVERY_BOUND,
                   "loadavg": open("/proc/loadavg").read().split()[:3]}, handle)
    print("recovery after kill -9 of rank 1: %.1f s (bound %d s)" % (recovery, RECOVERY_BOUND))
