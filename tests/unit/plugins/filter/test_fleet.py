"""Balancer backends and scrape targets from the hosts' serving.json; HAProxy `show stat` parsing."""
import pytest

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import fleet


def serving(base_urls, ports, name="tiny", bind=None):
    described = {
        "served_model_name": name,
        "replicas": [{"name": str(i), "port": p, "gpus": []} for i, p in enumerate(ports)],
        "base_urls": base_urls,
    }
    if bind is not None:
        described["bind_address"] = bind
    return described


def test_private_bind_address_is_what_the_balancer_dials():
    backends = fleet.fleet_backends([
        {"host": "gpu1", "address": "10.0.0.1",
         "serving": serving(["http://10.0.0.1:8000/v1", "http://10.0.0.1:8001/v1"], [8000, 8001], bind="10.0.0.1")},
        {"host": "gpu2", "address": "10.0.0.2", "serving": serving(["http://10.0.0.2:8000/v1"], [8000])},
    ])
    assert [(b["name"], b["address"], b["port"], b["exposed"]) for b in backends] == [
        ("gpu1-0", "10.0.0.1", 8000, False), ("gpu1-1", "10.0.0.1", 8001, False), ("gpu2-0", "10.0.0.2", 8000, False)]
    assert {b["served_model_name"] for b in backends} == {"tiny"}


def test_a_host_whose_edge_speaks_tls_is_dialled_with_tls():
    backends = fleet.fleet_backends([
        {"host": "gpu1", "address": "10.0.0.1", "serving": dict(serving(["https://10.0.0.1:8000/v1"], [8000]), edge=True)},
        {"host": "gpu2", "address": "10.0.0.2", "serving": serving(["http://10.0.0.2:8000/v1"], [8000], bind="10.0.0.2")},
    ])
    assert [(b["host"], b["tls"]) for b in backends] == [("gpu1", True), ("gpu2", False)]


def test_wildcard_bind_uses_the_host_address_and_is_flagged_exposed():
    backends = fleet.fleet_backends([
        {"host": "gpu1", "address": "192.168.1.5", "serving": serving(["http://127.0.0.1:8000/v1"], [8000], bind="0.0.0.0")},
        # serving.json from before bind_address was recorded: loopback URL means "every address" here.
        {"host": "gpu2", "address": "192.168.1.6", "serving": serving(["http://127.0.0.1:8000/v1"], [8000])},
    ])
    assert [(b["address"], b["exposed"]) for b in backends] == [("192.168.1.5", True), ("192.168.1.6", True)]


def test_loopback_bind_is_refused_with_the_fix():
    with pytest.raises(fleet.FleetError, match="loopback only.*vllm_server_bind_address"):
        fleet.fleet_backends([{"host": "gpu1", "address": "10.0.0.1",
                               "serving": serving(["http://127.0.0.1:8000/v1"], [8000], bind="127.0.0.1")}])


def test_unserved_host_is_refused():
    with pytest.raises(fleet.FleetError, match="gpu2: no replicas described.*serve.yml"):
        fleet.fleet_backends([
            {"host": "gpu1", "address": "10.0.0.1", "serving": serving(["http://10.0.0.1:8000/v1"], [8000])},
            {"host": "gpu2", "address": "10.0.0.2", "serving": {}}])
    with pytest.raises(fleet.FleetError, match="no serving hosts"):
        fleet.fleet_backends([])


def test_hosts_serving_different_models_are_refused():
    with pytest.raises(fleet.FleetError, match="different model names.*'a' on gpu1.*'b' on gpu2"):
        fleet.fleet_backends([
            {"host": "gpu1", "address": "10.0.0.1", "serving": serving(["http://10.0.0.1:8000/v1"], [8000], name="a")},
            {"host": "gpu2", "address": "10.0.0.2", "serving": serving(["http://10.0.0.2:8000/v1"], [8000], name="b")}])


def test_two_hosts_on_one_address_are_refused():
    with pytest.raises(fleet.FleetError, match="gpu1 and gpu2 both claim 10.0.0.1:8000"):
        fleet.fleet_backends([
            {"host": "gpu1", "address": "10.0.0.1", "serving": serving(["http://127.0.0.1:8000/v1"], [8000])},
            {"host": "gpu2", "address": "10.0.0.1", "serving": serving(["http://127.0.0.1:8000/v1"], [8000])}])


def test_wildcard_without_a_known_address_is_refused():
    with pytest.raises(fleet.FleetError, match="no address other hosts can reach"):
        fleet.fleet_backends([{"host": "gpu1", "address": "",
                               "serving": serving(["http://127.0.0.1:8000/v1"], [8000], bind="0.0.0.0")}])


def test_server_names_are_haproxy_safe():
    assert fleet.server_name("gpu-01.example.com", "0") == "gpu-01.example.com-0"
    assert fleet.server_name("gpu 01/a", 1) == "gpu_01_a-1"


def test_prometheus_targets_label_each_replica_and_bracket_ipv6():
    backends = fleet.fleet_backends([
        {"host": "gpu1", "address": "fd00::1", "serving": serving(["http://[fd00::1]:8000/v1"], [8000], bind="fd00::1")}])
    assert fleet.prometheus_vllm_targets(backends) == [{
        "targets": ["[fd00::1]:8000"],
        "labels": {"host": "gpu1", "replica": "0", "server": "gpu1-0"}}]


SHOW_STAT = ("# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,"
             "status,weight,act,bck,chkfail,chkdown,lastchg,downtime,qlimit,pid,iid,sid,throttle,lbtot,tracked,type,"
             "rate,rate_lim,rate_max,check_status,check_code,check_duration\n") + """\
llmfleet,FRONTEND,,,1,2,4096,10,100,200,0,0,0,,,,,OPEN,,,,,,,,,1,2,0,,,,0,0,0,1,,,
llmfleet_vllm,gpu1-0,0,0,1,1,,5,50,100,,0,,0,0,0,0,UP,1,1,0,0,0,30,0,,1,3,1,,5,,2,0,,1,L7OK,200,3
llmfleet_vllm,gpu2-0,0,0,0,1,,5,50,100,,0,,0,0,0,0,MAINT,1,1,0,0,0,30,0,,1,3,2,,5,,2,0,,1,"L4CON, refused",,0
llmfleet_vllm,BACKEND,0,0,1,2,410,10,100,200,0,0,,0,0,0,0,UP,2,2,0,,0,30,0,,1,3,0,,10,,1,0,,1,,,
"""


def test_haproxy_show_stat_gives_each_server_state():
    assert fleet.haproxy_servers(SHOW_STAT, "llmfleet_vllm") == {
        "gpu1-0": {"status": "UP", "scur": 1, "check_status": "L7OK", "backend": "llmfleet_vllm"},
        "gpu2-0": {"status": "MAINT", "scur": 0, "check_status": "L4CON, refused", "backend": "llmfleet_vllm"},
    }
    assert fleet.haproxy_servers(SHOW_STAT, "other") == {}


def test_a_balancer_routing_by_model_is_read_over_its_backends():
    """One backend per model: the servers of all of them, each with its backend (the runtime API needs it)."""
    text = SHOW_STAT + ("llmfleet_model_b,gpu1-b,0,0,0,1,,5,50,100,,0,,0,0,0,0,DOWN,1,1,0,0,0,30,0,,1,4,1,,5,,2,0,,1,"
                        "L7STS,500,3\n")
    servers = fleet.haproxy_servers(text, ["llmfleet_vllm", "llmfleet_model_b"])
    assert sorted(servers) == ["gpu1-0", "gpu1-b", "gpu2-0"]
    assert servers["gpu1-b"] == {"status": "DOWN", "scur": 0, "check_status": "L7STS", "backend": "llmfleet_model_b"}
    assert list(fleet.haproxy_servers(text, ["llmfleet_model_b"])) == ["gpu1-b"]
    # Every model's backend, without knowing the models (upgrade.yml's check before a roll).
    assert list(fleet.haproxy_servers(text, ["llmfleet_model_*"])) == ["gpu1-b"]


MANY = {"served_model_name": "chat", "bind_address": "0.0.0.0", "edge": True,
        "replicas": [{"name": "chat-0", "port": 18000}, {"name": "emb-0", "port": 18001}],
        "models": [{"name": "chat", "runner": "generate", "adapters": ["chat-lora"],
                    "replicas": [{"name": "chat-0", "port": 18000}], "base_urls": ["http://10.0.0.1:8000/v1"]},
                   {"name": "emb", "runner": "pooling", "replicas": [{"name": "emb-0", "port": 18001}],
                    "base_urls": ["http://10.0.0.1:8000/v1"]}]}


def test_with_many_models_each_replica_carries_its_model_and_the_hosts_edge_port():
    backends = fleet.fleet_backends([{"host": "gpu1", "address": "10.0.0.1", "serving": MANY},
                                     {"host": "gpu2", "address": "10.0.0.2", "serving": dict(
                                         MANY, served_model_name="emb", replicas=MANY["replicas"][1:],
                                         models=MANY["models"][1:])}], by_model=True)
    assert [(b["name"], b["model"], b["runner"], b["edge_port"]) for b in backends] == [
        ("gpu1-chat-0", "chat", "generate", 8000), ("gpu1-emb-0", "emb", "pooling", 8000),
        ("gpu2-emb-0", "emb", "pooling", 8000)]
    assert backends[0]["adapters"] == ["chat-lora"]
    # One model per balancer without routing by model: hosts serving different first models are refused as before.
    with pytest.raises(fleet.FleetError, match="different model names"):
        fleet.fleet_backends([{"host": "gpu1", "address": "10.0.0.1", "serving": MANY},
                              {"host": "gpu2", "address": "10.0.0.2", "serving": dict(MANY, served_model_name="emb")}])


def test_a_host_still_on_the_one_model_shorthand_is_a_generator_beside_a_host_of_many():
    # a fleet moving to llmfleet_models host by host: the balancer routes by model while a host still serves the
    # shorthand; its smoke test picks a generative model by each backend's runner, which every backend must carry
    backends = fleet.fleet_backends([{"host": "gpu1", "address": "10.0.0.1", "serving": MANY},
                                     {"host": "gpu2", "address": "10.0.0.2",
                                      "serving": serving(["http://10.0.0.2:8000/v1"], [8000], name="chat")}],
                                    by_model=True)
    assert [(b["name"], b["runner"]) for b in backends] == [
        ("gpu1-chat-0", "generate"), ("gpu1-emb-0", "pooling"), ("gpu2-0", "generate")]
    assert [b["name"] for b in backends if b["runner"] != "pooling"] == ["gpu1-chat-0", "gpu2-0"]


def test_every_models_replicas_are_backends_though_the_top_level_lists_the_first_models_only():
    # serving.json keeps the one-model keys (replicas, base_urls) for its first model; `models` lists them all
    first_only = dict(MANY, replicas=MANY["replicas"][:1])
    backends = fleet.fleet_backends([{"host": "gpu1", "address": "10.0.0.1", "serving": first_only}], by_model=True)
    assert [(b["name"], b["model"], b["port"]) for b in backends] == [
        ("gpu1-chat-0", "chat", 18000), ("gpu1-emb-0", "emb", 18001)]


def test_haproxy_show_stat_rejects_other_text():
    with pytest.raises(fleet.FleetError, match="show stat"):
        fleet.haproxy_servers("Unknown command", "llmfleet_vllm")


def test_parse_url():
    assert fleet.parse_url("http://10.0.0.1:8000/v1") == ("10.0.0.1", 8000, "/v1")
    assert fleet.parse_url("https://[::1]/") == ("[::1]", None, "/")
    with pytest.raises(fleet.FleetError):
        fleet.parse_url("10.0.0.1:8000")


def test_address_scope_tells_who_reaches_an_address():
    assert fleet.address_scope("127.0.0.1") == "loopback"
    assert fleet.address_scope("::1") == "loopback"
    assert fleet.address_scope("0.0.0.0") == "wildcard"
    assert fleet.address_scope("::") == "wildcard"
    assert fleet.address_scope("10.1.2.3") == "private"
    assert fleet.address_scope("172.17.0.2") == "private"
    assert fleet.address_scope("fd00::5") == "private"
    assert fleet.address_scope("8.8.8.8") == "public"
    assert fleet.address_scope("gpu1.example") == "name"


def test_replicas_behind_an_edge_are_not_exposed():
    members = [{"host": "gpu1", "address": "10.0.0.5",
                "serving": dict(serving(["http://127.0.0.1:8000/v1"], [8000], bind="0.0.0.0"), edge=True)}]
    backend = fleet.fleet_backends(members)[0]
    assert (backend["address"], backend["port"], backend["exposed"]) == ("10.0.0.5", 8000, False)
    members[0]["serving"]["edge"] = False
    assert fleet.fleet_backends(members)[0]["exposed"] is True


# ---- the serving hosts as the balancer / monitoring play reads them (fleet_members, fleet_addresses) -----------

def test_a_host_is_reached_by_its_fleet_address_then_its_default_ipv4_address():
    from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import fleet as FL
    facts = {"ansible_facts": {"default_ipv4": {"address": "10.0.0.3"}}}
    assert FL.host_address(dict(facts, llmfleet_fleet_address="10.9.9.9"), "h") == "10.9.9.9"
    assert FL.host_address(facts, "h") == "10.0.0.3"
    assert FL.host_address({"ansible_host": "10.0.0.2"}, "h") == ""
    # With fallback (monitoring's scrape targets): ansible_host, then the inventory name.
    assert FL.host_address({"ansible_host": "10.0.0.2"}, "h", fallback=True) == "10.0.0.2"
    assert FL.host_address({}, "gpu-07", fallback=True) == "gpu-07"


def test_serving_members_decode_each_hosts_serving_json_and_an_unread_one_serves_nothing():
    import base64
    import json
    from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import fleet as FL
    doc = {"edge": True, "replicas": [{"name": "0", "port": 8000}]}
    results = [{"item": "h1", "content": base64.b64encode(json.dumps(doc).encode()).decode()},
               {"item": "h2", "failed": True}]
    assert FL.serving_members(results, {"h1": "10.0.0.1"}) == [
        {"host": "h1", "address": "10.0.0.1", "serving": doc}, {"host": "h2", "address": "", "serving": {}}]


def test_serving_members_read_host_state_results_as_the_roles_register_them():
    import json
    from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import fleet as FL
    doc = {"edge": True, "replicas": [{"name": "0", "port": 8000}]}
    results = [{"item": "h1", "files": {"/etc/llmfleet/serving.json": json.dumps(doc)}},
               {"item": "h2", "files": {"/etc/llmfleet/serving.json": None}},
               {"item": "h3", "failed": True, "msg": "unreachable"}]
    assert FL.serving_members(results, {"h1": "10.0.0.1"}) == [
        {"host": "h1", "address": "10.0.0.1", "serving": doc}, {"host": "h2", "address": "", "serving": {}},
        {"host": "h3", "address": "", "serving": {}}]


def test_the_fleet_filters_read_hostvars():
    from ansible_collections.llmfleet.vllm.plugins.filter.fleet import FilterModule
    filters = FilterModule().filters()
    hostvars = {"h1": {"llmfleet_fleet_address": "10.0.0.1", "other": "x"}, "h2": {"ansible_host": "10.0.0.2"}}
    assert filters["fleet_addresses"](["h1", "h2", "h3"], hostvars) == {"h1": "10.0.0.1", "h2": "10.0.0.2", "h3": "h3"}
    assert filters["fleet_members"]([{"item": "h2"}], hostvars) == [{"host": "h2", "address": "", "serving": {}}]


def test_a_group_over_two_hosts_is_one_member_the_leader():
    leader = serving(["http://10.0.0.1:8000/v1"], [8000], bind="10.0.0.1")
    leader["multinode"] = {"group": "m1", "node_rank": 0, "nnodes": 2, "is_leader": True}
    headless = serving([], [], bind="10.0.0.2")
    headless["multinode"] = {"group": "m1", "node_rank": 1, "nnodes": 2, "is_leader": False}
    backends = fleet.fleet_backends([
        {"host": "gpu1", "address": "10.0.0.1", "serving": leader},
        {"host": "gpu2", "address": "10.0.0.2", "serving": headless},
        {"host": "gpu3", "address": "10.0.0.3", "serving": serving(["http://10.0.0.3:8000/v1"], [8000], bind="10.0.0.3")},
    ])
    assert [b["name"] for b in backends] == ["gpu1-0", "gpu3-0"]


def test_a_drain_takes_each_replica_out_of_the_one_backend_or_the_hosts_edge_out_of_each_models_backend():
    assert fleet.drain_targets(MANY, "gpu1", "llmfleet_vllm") == [
        {"backend": "llmfleet_vllm", "server": "gpu1-chat-0"}, {"backend": "llmfleet_vllm", "server": "gpu1-emb-0"}]
    assert fleet.drain_targets(MANY, "gpu1", "llmfleet_vllm", by_model=True) == [
        {"backend": "llmfleet_model_chat", "server": "gpu1-chat"}, {"backend": "llmfleet_model_emb", "server": "gpu1-emb"}]
    # A host still described as one model, behind a balancer that routes by model: its model's backend.
    one = {"served_model_name": "tiny", "replicas": [{"name": "0", "port": 8000}]}
    assert fleet.drain_targets(one, "gpu2", "llmfleet_vllm", by_model=True) == [
        {"backend": "llmfleet_model_tiny", "server": "gpu2-tiny"}]


def test_a_drain_waits_for_every_models_replicas_once():
    serving = dict(MANY, replicas=MANY["replicas"][:1])
    assert [r["name"] for r in fleet.drain_replicas(serving)] == ["chat-0", "emb-0"]
    assert fleet.drain_replicas({"replicas": [{"name": "0"}]}) == [{"name": "0"}]


def test_a_roll_of_some_models_drains_only_theirs():
    assert fleet.drain_targets(MANY, "gpu1", "llmfleet_vllm", by_model=True, models=["emb"]) == [
        {"backend": "llmfleet_model_emb", "server": "gpu1-emb"}]
    assert [r["name"] for r in fleet.drain_replicas(MANY, ["emb"])] == ["emb-0"]
    # One model: the one backend holds every replica, all drained.
    assert len(fleet.drain_targets(MANY, "gpu1", "llmfleet_vllm", models=["emb"])) == 2
