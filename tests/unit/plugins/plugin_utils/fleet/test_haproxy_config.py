"""The edge's and the balancer's HAProxy configuration as data (plugin_utils/fleet/haproxy_config.py)."""
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.haproxy_config import (
    api_key_file, balancer_config, edge_config, running_requests, servers_all_up)

EDGE = {"bind_address": "0.0.0.0", "path_prefixes": ["/v1/", "/metrics"], "public_paths": ["/health"],
        "keys_file": "/etc/llmfleet/edge-api-keys.lst", "api_keys": ["k"]}


def test_the_edge_listens_on_each_replica_port_and_forwards_to_vllm_behind_it():
    cfg = edge_config([{"name": "0", "port": 8000, "address": "127.0.0.1", "backend_port": 18000},
                       {"name": "1", "port": 8001, "address": "127.0.0.1", "backend_port": 18001}], EDGE)
    assert cfg["listens"][1] == {"frontend": "llmfleet_edge_1", "bind": "0.0.0.0:8001", "backend": "llmfleet_replica_1",
                                 "server": "replica_1", "address": "127.0.0.1:18001"}
    assert cfg["replica_addresses"] == ["127.0.0.1"]
    assert cfg["gate"] == {"prefixes": ["/v1/", "/metrics"], "public_paths": ["/health"],
                           "keys_file": "/etc/llmfleet/edge-api-keys.lst"}


def test_ipv6_addresses_are_bracketed():
    cfg = edge_config([{"name": "a", "port": 8000, "address": "::1", "backend_port": 8000}], dict(EDGE, bind_address="::"))
    assert (cfg["listens"][0]["bind"], cfg["listens"][0]["address"]) == ("[::]:8000", "[::1]:8000")


def test_without_keys_the_gate_checks_none():
    assert edge_config([], dict(EDGE, api_keys=[]))["gate"]["keys_file"] == ""
    lb = balancer_config([], {"path_prefixes": ["/v1/"], "keys_file": "/k.lst", "api_keys": [], "check_completion": True})
    assert lb["gate"]["keys_file"] == "" and lb["check"]["authorization"] == ""


def test_the_balancer_has_one_server_per_backend_and_checks_with_the_first_key():
    lb = balancer_config([{"name": "h1-0", "address": "10.0.0.1", "port": 8000},
                          {"name": "h2-0", "address": "fd00::2", "port": 8001}],
                         {"path_prefixes": ["/v1/"], "keys_file": "/k.lst", "api_keys": ["first", "second"],
                          "check_completion": True, "check_model": "tiny"})
    assert lb["servers"] == [{"name": "h1-0", "address": "10.0.0.1:8000"}, {"name": "h2-0", "address": "[fd00::2]:8001"}]
    assert lb["check"] == {"completion": True, "model": "tiny", "authorization": "Bearer first"}
    assert lb["gate"] == {"prefixes": ["/v1/"], "public_paths": [], "keys_file": "/k.lst"}


def test_the_key_file_has_one_bearer_line_per_key_after_who_manages_it():
    assert api_key_file(["a", "b"], "the edge") == (
        "# Managed by Ansible (the edge): changes here are overwritten.\nBearer a\nBearer b\n")
    assert api_key_file([], "x") == "# Managed by Ansible (x): changes here are overwritten.\n"


def test_the_balancer_is_ready_only_with_every_expected_server_up():
    up = {"status": "UP"}
    assert servers_all_up({"a": up, "b": up}, 2) is True
    assert servers_all_up({"a": up, "b": {"status": "DOWN"}}, 2) is False
    assert servers_all_up({"a": up}, 2) is False  # a server the configuration has not loaded yet
    assert servers_all_up({"a": {"status": "MAINT"}}, 1) is False


def test_the_requests_in_flight_are_vllms_running_count_summed_over_its_samples():
    text = ("# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
            'vllm:num_requests_running{engine="0",model_name="tiny"} 2.0\n'
            'vllm:num_requests_running{engine="1",model_name="tiny"} 1.0\n'
            'vllm:num_requests_waiting{engine="0",model_name="tiny"} 7.0\n')
    assert running_requests(text) == 3.0
    assert running_requests("") == 0 and running_requests("vllm:num_requests_running 0.0\n") == 0
