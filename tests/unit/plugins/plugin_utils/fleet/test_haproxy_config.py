"""The edge's and the balancer's HAProxy configuration as data (plugin_utils/fleet/haproxy_config.py)."""
import pytest

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.haproxy_config import (
    api_key_file, balancer_config, balancer_route_files, edge_config, edge_models, edge_route_files, fleet_models,
    running_requests, servers_all_up)
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.model_routing import RoutingError

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


FILES = {"key_ids": "/k.map", "routes": "/r.map", "listings": "/l.map", "names": "/n.map", "upstream": "/u.map"}
BY_MODEL = dict(EDGE, api_keys=["replica-key"], route_by_model=True, client_port=8000, max_body_bytes=1048576,
                model_keys=[{"key": "emb-only", "models": ["emb"]}], files=FILES)
MEMBERS = [{"name": "chat-0", "model": "chat", "adapters": ["chat-lora"], "port": 8000, "address": "127.0.0.1",
            "backend_port": 18000},
           {"name": "emb-0", "model": "emb", "port": 8001, "address": "127.0.0.1", "backend_port": 18001},
           {"name": "chat-1", "model": "chat", "adapters": ["chat-lora"], "port": 8002, "address": "127.0.0.1",
            "backend_port": 18002}]


def test_routing_by_model_gives_the_edge_one_frontend_and_a_backend_per_model():
    cfg = edge_config(MEMBERS, BY_MODEL)
    assert cfg["frontend"] == {"name": "llmfleet_edge", "bind": "0.0.0.0:8000"}
    assert [(b["name"], [s["address"] for s in b["servers"]]) for b in cfg["routing"]["backends"]] == [
        ("llmfleet_model_chat", ["127.0.0.1:18000", "127.0.0.1:18002"]), ("llmfleet_model_emb", ["127.0.0.1:18001"])]
    assert cfg["routing"]["names"] == ["chat", "chat-lora", "emb"]
    # The key is checked through the routing's map of key hashes; no public path is forwarded to one replica.
    assert cfg["gate"] == {"prefixes": ["/v1/", "/metrics"], "public_paths": [], "keys_file": ""}
    assert cfg["upstream_auth"] is True and "listens" not in cfg
    # Each replica's own port answers its /metrics (with a full key) and /health, never the API.
    assert cfg["replica_listens"][0] == {"frontend": "llmfleet_edge_emb-0", "backend": "llmfleet_replica_emb-0",
                                         "bind": "0.0.0.0:8001"}  # chat-0's port 8000 is the client port
    assert len(cfg["replica_listens"]) == 2
    assert cfg["replica_gate"] == {"prefixes": ["/metrics"], "public_paths": ["/health"],
                                   "keys_file": "/etc/llmfleet/edge-api-keys.lst"}
    # Each replica's /metrics stays reachable on the one port, by its instance name (Prometheus).
    assert cfg["routing"]["metrics_replicas"][1] == {"replica": "emb-0", "backend": "llmfleet_replica_emb-0",
                                                     "server": "replica_emb-0", "address": "127.0.0.1:18001"}
    assert edge_models(MEMBERS) == [{"name": "chat", "names": ["chat", "chat-lora"]}, {"name": "emb", "names": ["emb"]}]


def test_without_routing_by_model_the_route_files_are_none():
    assert edge_route_files(MEMBERS, EDGE) == []
    assert balancer_route_files([], {"route_by_model": False}) == []


def test_the_edge_forwards_with_the_first_key_and_routes_the_limited_ones():
    files = dict((f["path"], f["content"]) for f in edge_route_files(MEMBERS, BY_MODEL))
    assert files["/u.map"].endswith("replica Bearer replica-key\n")
    assert "k1/emb emb\n" in files["/r.map"] and "k1/chat" not in files["/r.map"]


def test_a_replica_without_its_model_cannot_be_routed():
    with pytest.raises(RoutingError, match="replica 0 names no model"):
        edge_config([{"name": "0", "port": 8000, "address": "127.0.0.1", "backend_port": 18000}], BY_MODEL)


FLEET = [{"name": "h1-chat-0", "host": "h1", "address": "10.0.0.1", "port": 18000, "edge_port": 8000, "model": "chat",
          "runner": "generate", "adapters": ["chat-lora"]},
         {"name": "h1-chat-1", "host": "h1", "address": "10.0.0.1", "port": 18002, "edge_port": 8000, "model": "chat",
          "runner": "generate"},
         {"name": "h1-emb-0", "host": "h1", "address": "10.0.0.1", "port": 18001, "edge_port": 8000, "model": "emb",
          "runner": "pooling"},
         {"name": "h2-chat-0", "host": "h2", "address": "fd00::2", "port": 18000, "edge_port": 8000, "model": "chat",
          "runner": "generate"}]
LB = {"path_prefixes": ["/v1/"], "keys_file": "/k.lst", "api_keys": ["first"], "check_completion": True,
      "check_model": "chat", "route_by_model": True, "max_body_bytes": 1048576, "model_keys": [], "files": FILES}


def test_the_balancer_has_a_backend_per_model_over_the_edges_of_the_hosts_serving_it():
    lb = balancer_config(FLEET, LB)
    chat, emb = lb["routing"]["backends"]
    assert chat["servers"] == [{"name": "h1-chat", "address": "10.0.0.1:8000"},
                               {"name": "h2-chat", "address": "[fd00::2]:8000"}]
    assert emb["servers"] == [{"name": "h1-emb", "address": "10.0.0.1:8000"}]  # emb only where it is served
    # Each model's check asks that model; a pooling model, which has no completion, is checked on /health.
    assert (chat["check"]["completion"], chat["check"]["model"]) == (True, "chat")
    assert (emb["check"]["completion"], emb["check"]["model"]) == (False, "emb")
    assert [s["name"] for s in lb["servers"]] == ["h1-chat", "h2-chat", "h1-emb"]
    # The checks' key is read from the upstream map, never printed in the configuration.
    assert lb["routing"]["check_auth"] is True and "first" not in repr(lb)
    assert balancer_route_files(FLEET, LB)[-1]["content"].endswith("replica Bearer first\n")
    assert fleet_models(FLEET)[0] == {"name": "chat", "names": ["chat", "chat-lora"]}


def test_the_balancer_refuses_a_key_for_a_model_no_host_serves():
    with pytest.raises(RoutingError, match="no served model or adapter is named 'chta'"):
        balancer_route_files(FLEET, dict(LB, model_keys=[{"key": "x", "models": ["chta"]}]))
