"""Lists the serve role builds from its replicas (plugin_utils.fleet.replica_lists and its filters) and the conventions
they name things by (module_utils.conventions)."""
import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.filter.replica_lists import FilterModule
from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent import conventions as CV
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import replica_lists as SL

F = FilterModule().filters()
REPLICAS = [{"name": 0, "port": 8000, "gpus": [0]}, {"name": "b", "port": "8001", "gpus": [1]}]


@pytest.mark.parametrize("bind,address", [("0.0.0.0", "127.0.0.1"), ("::", "127.0.0.1"), ("127.0.0.1", "127.0.0.1"),
                                          ("10.0.0.7", "10.0.0.7")])
def test_the_edge_forwards_to_vllm_behind_the_offset_on_the_address_this_host_reaches(bind, address):
    assert F["edge_members"](REPLICAS, bind, "10000") == [
        {"name": 0, "port": 8000, "address": address, "backend_port": 18000},
        {"name": "b", "port": 8001, "address": address, "backend_port": 18001}]


def test_without_the_offset_the_edge_member_is_the_replica_port():
    assert [m["backend_port"] for m in SL.edge_members(REPLICAS, "127.0.0.1", 0)] == [8000, 8001]


def test_the_watchdog_probes_each_replica_by_its_unit_container_and_env_file():
    assert F["watchdog_targets"](REPLICAS, "http://127.0.0.1:", 10000, "/etc/llmfleet") == [
        {"name": 0, "url": "http://127.0.0.1:18000", "unit": "llmfleet-vllm@0.service", "container": "llmfleet-vllm-0",
         "env_file": "/etc/llmfleet/vllm-0.env"},
        {"name": "b", "url": "http://127.0.0.1:18001", "unit": "llmfleet-vllm@b.service", "container": "llmfleet-vllm-b",
         "env_file": "/etc/llmfleet/vllm-b.env"}]


def test_replica_files_go_replica_by_replica_with_their_own_content():
    kinds = [{"suffix": ".unit.conf", "contents": ["u0", "ub"]}, {"suffix": ".run", "mode": "0750", "contents": ["r0", "rb"]}]
    assert F["replica_files"](REPLICAS, "/etc/llmfleet", kinds) == [
        {"path": "/etc/llmfleet/vllm-0.unit.conf", "content": "u0"},
        {"path": "/etc/llmfleet/vllm-0.run", "content": "r0", "mode": "0750"},
        {"path": "/etc/llmfleet/vllm-b.unit.conf", "content": "ub"},
        {"path": "/etc/llmfleet/vllm-b.run", "content": "rb", "mode": "0750"}]


def test_replica_files_refuse_contents_that_do_not_match_the_replicas():
    with pytest.raises(AnsibleFilterError, match="1 contents for 2 replicas"):
        F["replica_files"](REPLICAS, "/etc/llmfleet", [{"suffix": ".env", "contents": ["only one"]}])


def test_the_filters_refuse_what_is_no_list_of_replicas():
    with pytest.raises(AnsibleFilterError):
        F["edge_members"]([{"name": "0"}], "127.0.0.1", 0)
    with pytest.raises(AnsibleFilterError):
        F["watchdog_targets"]("0", "http://127.0.0.1:", 0, "/etc/llmfleet")


@pytest.mark.parametrize("address,scope", [("0.0.0.0", "wildcard"), ("::", "wildcard"), ("[::]", "wildcard"),
                                           ("0:0:0:0:0:0:0:0", "wildcard"), ("", "wildcard"), ("*", "wildcard"),
                                           ("127.0.0.1", "loopback"), ("::1", "loopback"), ("[::1]", "loopback"),
                                           ("localhost", "loopback"), ("10.1.2.3", "private"),
                                           ("100.64.0.1", "private"), ("fd00::1", "private"), ("8.8.8.8", "public"),
                                           ("gpu-01.example", "name")])
def test_one_address_scope_rule(address, scope):
    assert CV.address_scope(address) == scope


@pytest.mark.parametrize("bind,reach", [("0.0.0.0", "127.0.0.1"), ("::", "127.0.0.1"), ("[::]", "127.0.0.1"),
                                        ("*", "127.0.0.1"), ("0:0:0:0:0:0:0:0", "127.0.0.1"),
                                        ("10.0.0.7", "10.0.0.7"), ("127.0.0.1", "127.0.0.1")])
def test_a_wildcard_bind_is_reached_over_loopback(bind, reach):
    assert CV.reach_address(bind) == reach


def test_unit_and_container_names():
    assert CV.replica_unit("0") == "llmfleet-vllm@0.service"
    assert CV.replica_container(1) == "llmfleet-vllm-1"


def test_the_accelerator_default_is_the_conventions_one_and_a_set_value_stays():
    from ansible_collections.llmfleet.vllm.plugins.filter.conventions import FilterModule as Conventions
    accelerator = Conventions().filters()["accelerator"]
    assert accelerator(None) == CV.DEFAULT_ACCELERATOR == "gpu"
    assert accelerator("cpu") == "cpu"
    # Not set is not the same as set to something preflight refuses: that stays as it is.
    assert accelerator("") == ""


def test_a_removed_instance_leaves_no_file_behind():
    from ansible_collections.llmfleet.vllm.plugins.filter.replica_lists import instance_paths
    paths = instance_paths(["chat-0"], "/etc/llmfleet")
    assert sorted(paths) == sorted(["/etc/llmfleet/vllm-chat-0.run", "/etc/llmfleet/vllm-chat-0.env",
                                    "/etc/llmfleet/vllm-chat-0.unit.conf", "/etc/llmfleet/known-good/vllm-chat-0.run",
                                    "/etc/llmfleet/known-good/vllm-chat-0.env",
                                    "/etc/llmfleet/known-good/vllm-chat-0.unit.conf"])
    assert instance_paths([], "/etc/llmfleet") == []


def test_the_settings_file_alone_tells_which_instances_the_host_has():
    from ansible_collections.llmfleet.vllm.plugins.filter.replica_lists import instance_paths
    assert instance_paths([0], "/etc/llmfleet", True) == ["/etc/llmfleet/vllm-0.unit.conf"]
