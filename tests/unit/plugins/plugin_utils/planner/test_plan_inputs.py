"""What vllm_plan and vllm_placement read before they plan: the hardware (gpu_facts, a gpu_facts file or described
hardware, annotated from the GPU catalogue, with the table's label) and the profiles."""
import json

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.gpu_catalogue import load_catalogue
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.topology import gpu_facts_from_spec
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import plan_inputs as PI
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.model_profiles import ProfileError

NONE_GIVEN = {"gpu_facts": None, "gpu_facts_file": None, "hardware": None, "hardware_label": None}


def described(text):
    return gpu_facts_from_spec(text, load_catalogue())


def test_described_hardware_is_annotated_and_labels_the_table_per_host():
    facts, label = PI.hardware(dict(NONE_GIVEN, hardware="2x H200 NVLink", hosts=2))
    assert label == "2 x (2x H200 NVLink)" and len(facts["gpus"]) == 2
    # The catalogue's annotation: what the GPU's name implies, on described hardware as on real gpu_facts.
    assert set(PI.hardware(dict(NONE_GIVEN, gpu_facts=described("1x H200")))[0]["gpus"][0]) >= set(
        described("1x H200")["gpus"][0])
    assert PI.hardware(dict(NONE_GIVEN, hardware="1x H200", hardware_label="lab"))[1] == "lab"
    assert PI.hardware(NONE_GIVEN) == (None, None)


def test_a_registered_gpu_facts_result_or_a_list_of_hosts_is_read_and_a_one_host_action_refuses_the_list():
    one = described("1x H200")
    assert PI.hardware(dict(NONE_GIVEN, gpu_facts={"gpu_facts": one}))[0]["gpus"][0]["name"] == one["gpus"][0]["name"]
    assert len(PI.hardware(dict(NONE_GIVEN, gpu_facts=[one, one]))[0]) == 2
    with pytest.raises(PlanError, match="ONE host"):
        PI.hardware(dict(NONE_GIVEN, gpu_facts=[one, one]), one_host="places the models of ONE host")
    with pytest.raises(PlanError, match=r"gpu_facts\[1\] is not gpu_facts"):
        PI.hardware(dict(NONE_GIVEN, gpu_facts=[one, {"nothing": 1}]))


def test_a_gpu_facts_file_is_json_or_yaml_and_must_hold_gpu_facts(tmp_path):
    good = tmp_path / "facts.json"
    good.write_text(json.dumps({"gpu_facts": described("1x H200")}))
    assert PI.hardware(dict(NONE_GIVEN, gpu_facts_file=str(good)))[0]["gpus"]
    bad = tmp_path / "facts.yml"
    bad.write_text("gpus_missing: true\n")
    with pytest.raises(AnsibleActionFail, match="does not hold gpu_facts"):
        PI.load_facts_file(str(bad))


def test_the_users_profiles_do_not_shadow_the_collections(tmp_path):
    builtin = PI.load_all_profiles([])
    assert builtin and PI.load_all_profiles([str(tmp_path)]) == builtin
    with pytest.raises(ProfileError, match="unknown model .nowhere."):
        PI.resolve_model({"model": "nowhere"}, builtin)
