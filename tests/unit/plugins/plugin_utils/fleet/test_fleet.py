"""Which model each replica of a host serves: fleet.replica_models, the one reading of serving.json's `models` that
the balancer's backends (fleet_backends) and diagnose (served_models.replica_models) both use.

The balancer's backends, scrape targets and HAProxy parsing of fleet.py are tested in
tests/unit/plugins/filter/test_fleet.py, beside the filters that expose them."""
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import fleet

CHAT = {"name": "chat", "model_path": "/srv/llmfleet/models/chat", "base_urls": ["http://10.0.0.1:8000/v1"],
        "replicas": [{"name": "chat-0", "port": 8001}, {"name": "chat-1", "port": 8002}]}
EMBED = {"name": "embed", "runner": "pooling", "model_path": "/srv/llmfleet/models/embed",
         "base_urls": ["http://10.0.0.1:8000/v1"], "replicas": [{"name": "embed-0", "port": 8003}]}


def test_each_replica_of_a_host_of_several_models_comes_with_its_model_in_serving_json_order():
    serving = {"served_model_name": "chat", "replicas": CHAT["replicas"], "models": [CHAT, EMBED]}
    assert [(replica["name"], model["name"]) for replica, model in fleet.replica_models(serving)] == [
        ("chat-0", "chat"), ("chat-1", "chat"), ("embed-0", "embed")]


def test_a_host_of_one_model_and_a_model_without_replicas_pair_nothing():
    assert fleet.replica_models({"served_model_name": "chat", "replicas": CHAT["replicas"]}) == []
    assert fleet.replica_models(None) == []
    assert fleet.replica_models({"models": [dict(EMBED, replicas=[])]}) == []


def test_the_balancer_and_diagnose_read_the_same_pairing():
    from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import served_models

    serving = {"served_model_name": "chat", "replicas": CHAT["replicas"], "models": [CHAT, EMBED]}
    backends = fleet.fleet_backends([{"host": "gpu1", "address": "10.0.0.1", "serving": dict(serving, edge=True)}])
    per_replica = served_models.replica_models(serving)
    # fleet_backends lists every model's replicas; each names the model diagnose reads for it.
    assert [(b["replica"], b["model"], b["edge_port"]) for b in backends] == [
        ("chat-0", "chat", 8000), ("chat-1", "chat", 8000), ("embed-0", "embed", 8000)]
    assert {b["replica"]: per_replica[b["replica"]]["name"] for b in backends} == {
        "chat-0": "chat", "chat-1": "chat", "embed-0": "embed"}
    assert per_replica["embed-0"] == {"name": "embed", "model_path": "/srv/llmfleet/models/embed"}
