"""Routing by model with keys limited to models, as data (plugin_utils/fleet/model_routing.py)."""
import hashlib

import pytest

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import model_routing as MR

MODELS = [{"name": "chat", "names": ["chat-lora"]}, {"name": "emb"}]
NAMES = ["chat", "chat-lora", "emb"]
FILES = {"key_ids": "/k.map", "routes": "/r.map", "listings": "/l.map", "names": "/n.map", "upstream": "/u.map"}
SETTINGS = {"files": FILES, "max_body_bytes": 1048576, "body_timeout": 30, "upstream_key": "replica-key"}


def grants(model_keys, api_keys=("full",), strict=False):
    return MR.key_grants(list(api_keys), model_keys, NAMES, strict)


def test_keys_for_every_model_come_first_then_the_limited_ones_with_the_names_they_may_use():
    out = grants([{"key": "e", "models": ["emb"]}, {"key": "all2", "models": ["*"]}, {"key": "all3"}])
    assert [(g["id"], g["key"], g["models"]) for g in out] == [
        ("k0", "full", NAMES), ("k1", "e", ["emb"]), ("k2", "all2", NAMES), ("k3", "all3", NAMES)]


def test_a_key_listed_twice_gets_the_union_of_its_models():
    out = grants([{"key": "e", "models": ["emb"]}, {"key": "e", "models": ["chat-lora"]}], api_keys=())
    assert [(g["id"], g["models"]) for g in out] == [("k0", ["chat-lora", "emb"])]


@pytest.mark.parametrize("entry, message", [
    ({"models": ["emb"]}, r"llmfleet_api_keys\[0\]: each entry needs a key"),
    ({"key": "a b"}, "cannot hold spaces or commas"),
    ({"key": "a", "model": ["emb"]}, "unknown keys model"),
    ({"key": "a", "models": "emb"}, "models must be a list"),
    ("just-a-key", "each entry needs a key"),
])
def test_bad_key_entries_are_refused_naming_the_entry(entry, message):
    with pytest.raises(MR.RoutingError, match=message):
        grants([entry])


def test_a_name_no_model_serves_is_an_error_for_the_balancer_and_skipped_on_an_edge():
    with pytest.raises(MR.RoutingError, match=r"no served model or adapter is named 'chta'; the fleet serves chat"):
        grants([{"key": "x", "models": ["chta"]}], strict=True)
    # An edge knows its own host's models only: the name may be served by another host.
    assert grants([{"key": "x", "models": ["chta", "emb"]}])[1]["models"] == ["emb"]


def test_routes_are_keyed_by_key_id_and_name_and_name_the_model_only():
    files = {f["path"]: f["content"] for f in MR.route_files(MODELS, grants([{"key": "l", "models": ["chat-lora"]}]),
                                                             SETTINGS)}
    routes = files["/r.map"].splitlines()[1:]
    assert routes == ["k0/chat chat", "k0/chat-lora chat", "k0/emb emb", "k1/chat-lora chat"]
    # The key ids map holds what HAProxy computes from the header (sha2(256),hex), never the key.
    key_ids = files["/k.map"]
    assert "%s k1\n" % hashlib.sha256(b"Bearer l").hexdigest().upper() in key_ids
    assert "Bearer l" not in key_ids and " l\n" not in key_ids
    assert files["/u.map"].endswith("replica Bearer replica-key\n")
    assert files["/n.map"].splitlines()[1:] == ["k0 chat, chat-lora, emb", "k1 chat-lora"]
    assert files["/l.map"].splitlines()[2] == (
        'k1 [{"id":"chat-lora","object":"model","created":0,"owned_by":"llmfleet"}]')


def test_without_keys_every_name_is_routed_for_anyone():
    files = {f["path"]: f["content"] for f in MR.route_files(MODELS, [], dict(SETTINGS, upstream_key=""))}
    assert files["/r.map"].splitlines()[1:] == ["all/chat chat", "all/chat-lora chat", "all/emb emb"]
    assert files["/k.map"].splitlines()[1:] == [] and files["/u.map"].splitlines()[1:] == []
    assert MR.model_routes(MODELS, [], SETTINGS)["anonymous"] is True


def test_a_key_limited_to_part_of_a_backends_names_is_guarded_against_a_second_model_field():
    routes = MR.model_routes(MODELS, grants([{"key": "l", "models": ["chat-lora", "emb"]}]), SETTINGS)
    assert routes["guarded"] == ["k1/chat-lora"]
    assert routes["backends"] == [{"name": "llmfleet_model_chat", "model": "chat"},
                                  {"name": "llmfleet_model_emb", "model": "emb"}]
    assert routes["names"] == NAMES and routes["anonymous"] is False
    assert (routes["max_body_bytes"], routes["bufsize"]) == (1048576, 1048576 + 65536)


def test_names_that_clash_or_cannot_be_map_keys_and_too_small_a_body_limit_are_refused():
    with pytest.raises(MR.RoutingError, match="'emb' reaches two models"):
        MR.model_routes([{"name": "chat", "names": ["emb"]}, {"name": "emb"}], [], SETTINGS)
    with pytest.raises(MR.RoutingError, match="cannot be a HAProxy map key"):
        MR.model_routes([{"name": "a b"}], [], SETTINGS)
    with pytest.raises(MR.RoutingError, match="loadbalancer_max_body_bytes must be at least 65536"):
        MR.model_routes(MODELS, [], dict(SETTINGS, max_body_bytes=16384))


def test_key_problems_name_the_entry_and_never_the_key():
    assert MR.key_problems(None) == [] and MR.key_problems([{"key": "k", "models": ["a"]}]) == []
    problems = MR.key_problems([{"key": "ok"}, {"key": "sec ret", "models": ["a"]}])
    assert problems == ["llmfleet_api_keys[1]: an API key cannot hold spaces or commas (HAProxy matches the whole "
                        "header)."]
    assert "sec ret" not in problems[0]
    assert MR.key_problems({"key": "k"}) == ["llmfleet_api_keys must be a list of {key, models}, got a dict."]
