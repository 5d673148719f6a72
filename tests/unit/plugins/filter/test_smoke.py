"""The smoke_targets filter: what verify tests, from the deployment description, through Ansible's templating."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.filter.smoke import FilterModule

SMOKE_TARGETS = FilterModule().filters()["smoke_targets"]


def test_many_models_each_by_kind_and_the_one_model_inputs_as_before():
    serving = {"served_model_name": "chat", "base_urls": ["http://127.0.0.1:8000/v1"],
               "models": [{"name": "chat", "runner": "generate", "base_urls": ["http://127.0.0.1:8000/v1"]},
                          {"name": "emb", "runner": "pooling", "model_path": "/srv/emb",
                           "base_urls": ["http://127.0.0.1:8001/v1"]}]}
    got = [(t["model"], t["kind"]) for t in SMOKE_TARGETS(serving, [], "")]
    assert got == [("chat", "generate"), ("emb", "embed")]
    # a description written before many models: its top-level served name and URLs, as before
    old = {"served_model_name": "tiny", "model_path": "/srv/tiny", "base_urls": ["http://127.0.0.1:8000/v1"]}
    assert SMOKE_TARGETS(old, [], "") == [{"base_url": "http://127.0.0.1:8000/v1", "model": "tiny",
                                           "kind": "generate", "model_dir": "/srv/tiny"}]
    # verify_base_urls and verify_model given (a one-model inventory): those, as chat, without the description
    assert SMOKE_TARGETS({}, ["http://10.0.0.5:8000/v1"], "qwen") == [
        {"base_url": "http://10.0.0.5:8000/v1", "model": "qwen", "kind": "generate", "model_dir": None}]


def test_a_description_that_is_not_a_dict_is_refused():
    with pytest.raises(AnsibleFilterError, match="expects the deployment description"):
        SMOKE_TARGETS("[]", [], "")
