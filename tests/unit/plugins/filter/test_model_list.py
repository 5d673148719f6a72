"""The model_list filter: the one-model variables as the shorthand, the host's GPU count as a number or a string."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.filter.model_list import FilterModule, model_list


def test_the_filter_is_registered():
    assert FilterModule().filters()["model_list"] is model_list


def test_unset_models_use_the_shorthand_and_keep_todays_instance_names():
    r = model_list(None, {"llmfleet_model": "org/m", "llmfleet_served_model_name": "m"}, "8")
    assert r["problems"] == [] and r["models"][0]["shorthand"] is True and r["models"][0]["name"] == "m"


def test_the_gpu_count_as_a_string_checks_gpus():
    r = model_list([{"name": "a", "model": "x/1", "gpus": [4]}], None, "4")
    assert "gpus 4 are not on this host, which has 4 GPUs" in r["problems"][0]


@pytest.mark.parametrize("shorthand, count", [("llmfleet_model", None), (None, "eight")])
def test_bad_arguments_are_refused(shorthand, count):
    with pytest.raises(AnsibleFilterError):
        model_list(None, shorthand, count)
