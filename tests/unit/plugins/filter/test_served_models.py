"""The served_models filters: errors reach the play as filter errors that name the filter and the fix."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.filter.served_models import FilterModule

F = FilterModule().filters()
SERVING = {"served_model_name": "tiny", "model_path": "/m", "replicas": [{"name": "0", "port": 8000}],
           "base_urls": ["http://10.0.0.1:8000/v1"], "bind_address": "10.0.0.1"}


def test_served_model_view_names_the_served_models():
    assert F["served_model_view"](SERVING, "tiny")["model_path"] == "/m"
    with pytest.raises(AnsibleFilterError, match="served_model_view: .*named 'chat'; it serves: tiny"):
        F["served_model_view"](SERVING, "chat")
    with pytest.raises(AnsibleFilterError, match="must be a mapping"):
        F["served_model_view"]("text", "chat")


def test_model_backends_and_their_targets():
    backends = F["model_backends"]([{"host": "gpu1", "address": "10.0.0.1", "serving": SERVING}])
    assert F["prometheus_model_targets"](backends)[0]["targets"] == ["10.0.0.1:8000"]
    with pytest.raises(AnsibleFilterError, match="model_backends: no serving hosts"):
        F["model_backends"]([])


def test_served_replica_models_refuses_what_is_not_a_description():
    assert F["served_replica_models"](SERVING) == {}
    with pytest.raises(AnsibleFilterError, match="served_replica_models: serving.json must be a mapping"):
        F["served_replica_models"](["x"])
