"""The serve_list filters (plugins/filter/serve_list.py): the CPU engine's placement of llmfleet_models."""
import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.filter.serve_list import FilterModule
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.model_list import model_list

F = FilterModule().filters()


def test_cpu_placement_names_each_entrys_instances_without_gpus():
    models = model_list([{"name": "chat", "model": "m", "replicas": 2}])["models"]
    assert [i["instance"] for i in F["cpu_placement"](models)["instances"]] == ["chat-0", "chat-1"]


def test_cpu_placement_refuses_what_is_not_the_checked_list():
    with pytest.raises(AnsibleFilterError, match="cpu_placement expects"):
        F["cpu_placement"]({"models": []})


def test_failed_models_takes_any_result():
    assert F["failed_models"]({"results": [{"failed": True, "item": {"model": "m"}}]}) == ["m"]
    assert F["failed_models"]("not a result") == []


def test_stale_instances_wants_the_port_record():
    assert F["stale_instances"]({"a-0": 1}, ["b-0"]) == ["a-0"]
    with pytest.raises(AnsibleFilterError, match="port record"):
        F["stale_instances"](["a-0"], [])


def test_flag_check_models_wants_replica_specs_models():
    assert F["flag_check_models"]([{"name": "chat", "check_argv": ["/m"]}])[0]["args"] == ["/m"]
    with pytest.raises(AnsibleFilterError, match="flag_check_models expects replica_spec's models"):
        F["flag_check_models"]({"models": []})
    with pytest.raises(AnsibleFilterError, match="one_model must be a dict"):
        F["flag_check_models"]([{"name": "chat"}], "chat")
