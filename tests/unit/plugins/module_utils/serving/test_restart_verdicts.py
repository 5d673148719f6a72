"""The restart verdicts (module_utils.serving.restart_verdicts): listening ports, address conflicts, who holds a
port, and what happens to each replica."""
import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.serving import restart_verdicts as C


def test_listening_ports_from_proc():
    text = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1
   1: 0100007F:1FBB 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 2 1
   0: 00000000000000000000000000000000:1FBB 00000000000000000000000000000000:0000 0A 0 0 0 0 0 3 1"""
    assert C.listening_ports(text) == {8000, 8123}


def test_listening_sockets_and_address_conflicts():
    text = """   0: 0100007F:1F40 00000000:0000 0A 0 0 0 0 0 1 1
   1: 0300A8C0:1F41 00000000:0000 0A 0 0 0 0 0 1 1
   0: 00000000000000000000000001000000:1F42 00000000000000000000000000000000:0000 0A 0 0 0 0 0 3 1
   1: 0000000000000000FFFF00000100007F:1F43 00000000000000000000000000000000:0000 0A 0 0 0 0 0 3 1"""
    assert C.listening_sockets(text) == {("127.0.0.1", 8000), ("192.168.0.3", 8001), ("::1", 8002),
                                         ("127.0.0.1", 8003)}
    sockets = C.listening_sockets(text)
    assert C.port_holder(8000, "0", sockets, {}, bind_address="0.0.0.0") == "other"
    assert C.port_holder(8000, "0", sockets, {}, bind_address="192.168.0.3") is None  # loopback only: no conflict
    assert C.port_holder(8001, "0", sockets, {}, bind_address="192.168.0.3") == "other"
    assert C.conflicts("10.0.0.1", "0.0.0.0") and C.conflicts("::", "10.0.0.1") and not C.conflicts("a", "b")


def test_listeners_of_our_units_are_ours():
    cgroup = "0::/system.slice/llmfleet-edge.service\n"
    assert C.unit_of_cgroup(cgroup) == "llmfleet-edge.service"
    assert C.unit_of_cgroup("12:pids:/system.slice/system-llmfleet\\x2dvllm.slice/llmfleet-vllm@0.service") \
        == "llmfleet-vllm@0.service"
    assert C.unit_of_cgroup("0::/system.slice/nginx.service") is None
    listening = {("0.0.0.0", 8000, "111"), ("127.0.0.1", 18000, "222"), ("0.0.0.0", 8123, "333")}
    owners = {"111": "llmfleet-edge.service"}
    ours = {"llmfleet-vllm-0": {18000}}
    assert C.port_holder(8000, "0", listening, ours, owners=owners) == "llmfleet-edge.service"
    assert C.port_holder(18000, "0", listening, ours, bind_address="127.0.0.1", owners=owners) == "self"
    assert C.port_holder(8123, "0", listening, ours, owners=owners) == "other"


def test_docker_time():
    assert C.docker_time("1970-01-01T00:00:01.5Z") == 1.5
    assert C.docker_time("1970-01-01T01:00:00+01:00") == 0
    assert C.docker_time("0001-01-01T00:00:00Z") is None
    assert C.docker_time("") is None


def test_port_holder():
    ours = {"llmfleet-vllm-0": {8000}, "llmfleet-vllm-1": {8001}}
    listening = {8000, 8001, 8123}
    assert C.port_holder(8000, "0", listening, ours) == "self"
    assert C.port_holder(8001, "0", listening, ours) == "llmfleet-vllm-1"
    assert C.port_holder(8123, "0", listening, ours) == "other"
    assert C.port_holder(9000, "0", listening, ours) is None


RUNNING = {"ActiveState": "active", "SubState": "running", "NeedDaemonReload": "no"}
UP = {"exists": True, "running": True, "created": 200.0}


@pytest.mark.parametrize("unit,container,mtime,changed,action", [
    (RUNNING, UP, 100.0, False, "started"),                       # serving its configuration: left alone
    (RUNNING, UP, 300.0, False, "restarted"),                     # files newer than the container (stale)
    (RUNNING, UP, 100.0, True, "restarted"),                      # files changed now
    ({"ActiveState": "activating", "SubState": "auto-restart"}, {"exists": True, "running": False, "created": 200.0},
     100.0, False, "restarted"),                                  # crash loop
    ({"ActiveState": "failed", "SubState": "failed"}, {"exists": False}, 100.0, False, "restarted"),
    ({"ActiveState": "activating", "SubState": "start-post"}, UP, 100.0, False, "started"),  # loading: wait
    ({"ActiveState": "activating", "SubState": "start-post"}, UP, 300.0, False, "restarted"),
    ({"ActiveState": "inactive", "SubState": "dead"}, {"exists": False}, None, False, "started"),  # first start
    ({"ActiveState": "inactive", "SubState": "dead"}, {"exists": False}, 100.0, True, "restarted"),
    ({}, {"exists": False}, None, False, "started"),
])
def test_replica_verdict(unit, container, mtime, changed, action):
    verdict = C.replica_verdict(unit, container, mtime, changed)
    assert verdict["action"] == action, verdict
    assert bool(verdict["reasons"]) == (action == "restarted")


def test_the_edge_configuration_names_the_ports_it_binds():
    from ansible_collections.llmfleet.vllm.plugins.module_utils.serving.restart_verdicts import config_bind_ports
    cfg = "frontend llmfleet_edge_0\n    bind 0.0.0.0:8000\nfrontend llmfleet_edge_1\n    bind [fd00::1]:8001\n" \
          "backend x\n    server replica_0 127.0.0.1:18000\n"
    assert config_bind_ports(cfg) == {8000, 8001}
    assert config_bind_ports("") == set()
