"""One model of a host's serving.json at a time (diagnose_model, bench_model) and every model's replicas as
scrape targets, from serving.json as vllm_server writes it (the `models` contract of issue #39)."""
import pytest

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import fleet
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import served_models as SM

ONE_MODEL = {
    "served_model_name": "tiny", "model_path": "/srv/llmfleet/tiny", "image": "vllm@sha256:1", "edge": True,
    "bind_address": "10.0.0.1", "replicas": [{"name": "0", "port": 8000, "gpus": []}],
    "base_urls": ["http://10.0.0.1:8000/v1"],
}


def many(address="10.0.0.1", names=("chat", "embed"), edge=True):
    """serving.json of a host of several models as vllm_server writes it: behind an edge every model's URL is the
    edge's one client port (8000); without one, each replica's own."""
    models = [{"name": name, "runner": "pooling" if name == "embed" else "generate",
               "model_path": "/srv/llmfleet/models/%s" % name,
               "replicas": [{"name": "%s-0" % name, "port": 8001 + i, "gpus": [i]}],
               "base_urls": ["http://%s:%d/v1" % (address, 8000 if edge else 8001 + i)], "adapters": []}
              for i, name in enumerate(names)]
    first = models[0]
    return {"served_model_name": first["name"], "model_path": first["model_path"], "image": "vllm@sha256:1",
            "edge": edge, "bind_address": address, "replicas": first["replicas"], "base_urls": first["base_urls"],
            "models": models}


def test_a_host_of_one_model_serves_it_from_its_top_level_keys():
    assert SM.served_models(ONE_MODEL) == [{
        "name": "tiny", "runner": "generate", "model_path": "/srv/llmfleet/tiny",
        "replicas": [{"name": "0", "port": 8000, "gpus": []}], "base_urls": ["http://10.0.0.1:8000/v1"],
        "adapters": []}]
    assert SM.served_models({}) == [] and SM.served_models(None) == []


def test_the_view_of_one_model_puts_its_replicas_and_path_at_the_top():
    view = SM.model_view(many(), "embed")
    assert view["served_model_name"] == "embed"
    assert view["model_path"] == "/srv/llmfleet/models/embed"
    assert [r["name"] for r in view["replicas"]] == ["embed-0"]
    assert view["base_urls"] == ["http://10.0.0.1:8000/v1"]
    assert view["runner"] == "pooling"
    # The rest of the host's description stays (the image the bench client runs, the edge).
    assert view["image"] == "vllm@sha256:1" and view["edge"] is True


def test_no_name_keeps_the_description_and_a_one_model_host_answers_to_its_name():
    assert SM.model_view(many(), "") == many()
    assert SM.model_view(ONE_MODEL, "tiny")["replicas"] == ONE_MODEL["replicas"]


def test_an_unknown_name_is_refused_with_the_names_served():
    with pytest.raises(SM.ServedModelError, match=r"does not serve a model named 'llama'; it serves: chat, embed"):
        SM.model_view(many(), "llama")
    with pytest.raises(SM.ServedModelError, match="it serves: tiny"):
        SM.model_view(ONE_MODEL, "chat")
    with pytest.raises(SM.ServedModelError, match="none .*serve.yml"):
        SM.model_view({}, "chat")


def test_without_models_the_backends_are_fleet_backends_unchanged():
    members = [{"host": "gpu1", "address": "10.0.0.1", "serving": ONE_MODEL}]
    assert SM.model_backends(members) == fleet.fleet_backends(members)
    assert "model" not in SM.prometheus_model_targets(SM.model_backends(members))[0]["labels"]


def test_every_model_of_every_host_is_a_backend_labelled_with_its_model():
    members = [{"host": "gpu1", "address": "10.0.0.1", "serving": many("10.0.0.1")},
               # A model on only one host: its replicas there only.
               {"host": "gpu2", "address": "10.0.0.2", "serving": many("10.0.0.2", names=("chat",))}]
    backends = SM.model_backends(members)
    assert [(b["model"], b["name"], b["address"], b["port"]) for b in backends] == [
        ("chat", "gpu1-chat-0", "10.0.0.1", 8001), ("chat", "gpu2-chat-0", "10.0.0.2", 8001),
        ("embed", "gpu1-embed-0", "10.0.0.1", 8002)]
    targets = SM.prometheus_model_targets(backends)
    # Behind the edge of several models: its one port, the replica named in the query (?replica=embed-0).
    assert targets[2] == {"targets": ["10.0.0.1:8000"],
                          "labels": {"host": "gpu1", "replica": "embed-0", "server": "gpu1-embed-0", "model": "embed",
                                     "instance": "gpu1-embed-0", "__param_replica": "embed-0"}}


def test_without_an_edge_each_replica_is_scraped_on_its_own_port():
    targets = SM.prometheus_model_targets(SM.model_backends([{"host": "gpu1", "address": "10.0.0.1",
                                                              "serving": many(edge=False)}]))
    assert [(t["targets"], t["labels"]["model"]) for t in targets] == [
        (["10.0.0.1:8001"], "chat"), (["10.0.0.1:8002"], "embed")]
    assert not any("__param_replica" in t["labels"] or "instance" in t["labels"] for t in targets)


def test_a_host_of_one_model_beside_hosts_of_several_keeps_its_model():
    members = [{"host": "gpu1", "address": "10.0.0.1", "serving": many("10.0.0.1")},
               {"host": "gpu2", "address": "10.0.0.2", "serving": dict(ONE_MODEL, bind_address="10.0.0.2")}]
    assert [(b["host"], b["model"]) for b in SM.model_backends(members)] == [
        ("gpu1", "chat"), ("gpu1", "embed"), ("gpu2", "tiny")]


def test_a_host_not_served_yet_and_two_models_on_one_port_are_refused():
    with pytest.raises(fleet.FleetError, match="gpu2: no replicas described"):
        SM.model_backends([{"host": "gpu1", "address": "10.0.0.1", "serving": many()},
                           {"host": "gpu2", "address": "10.0.0.2", "serving": {}}])
    clash = many()
    clash["models"][1]["replicas"][0]["port"] = 8001
    with pytest.raises(fleet.FleetError, match="gpu1-chat-0 and gpu1-embed-0 both claim 10.0.0.1:8001"):
        SM.model_backends([{"host": "gpu1", "address": "10.0.0.1", "serving": clash}])


def test_each_replica_of_a_host_of_several_models_knows_its_model():
    assert SM.replica_models(many()) == {
        "chat-0": {"name": "chat", "model_path": "/srv/llmfleet/models/chat"},
        "embed-0": {"name": "embed", "model_path": "/srv/llmfleet/models/embed"}}
    # One model: its replicas serve the top-level model, as before.
    assert SM.replica_models(ONE_MODEL) == {} and SM.replica_models(None) == {}
