"""The roles' declarative input rules (module_utils.input_checks.rule_problems, the input_rule_problems filter) and
the held-port sentences the serve role refuses with (held_port_problems)."""
import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.filter.input_rules import FilterModule
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks import input_checks as I

RULE_IMAGE = {"group": "image", "fail": True, "var": "vllm_server_image", "msg": "vllm_server_image is empty.",
              "fix": "Set it."}
RULE_PRESENT = {"group": "image", "fail": True, "var": "vllm_server_image", "msg": "img is not present on h:",
                "fix": "run the vllm_image role first."}


def test_a_failed_rule_is_its_message_and_fix_in_one_sentence():
    assert I.rule_problems([RULE_IMAGE]) == ["vllm_server_image is empty. Set it."]


@pytest.mark.parametrize("fail", [False, "False", "false", "", "0", "no"])
def test_a_passing_rule_says_nothing(fail):
    assert I.rule_problems([dict(RULE_IMAGE, fail=fail)]) == []


@pytest.mark.parametrize("fail", [True, "True", "true", "yes", "1"])
def test_a_condition_as_ansible_templates_it_counts(fail):
    assert len(I.rule_problems([dict(RULE_IMAGE, fail=fail)])) == 1


def test_only_the_first_failing_rule_of_a_group_is_reported():
    assert I.rule_problems([RULE_IMAGE, RULE_PRESENT]) == ["vllm_server_image is empty. Set it."]
    assert I.rule_problems([dict(RULE_IMAGE, fail=False), RULE_PRESENT]) == [
        "img is not present on h: run the vllm_image role first."]


def test_rules_keep_their_order_and_other_checks_sentences_come_in_place():
    rules = [dict(RULE_IMAGE, group=None), {"problems": ["Replica 0 would listen on port 70000."]},
             {"fail": True, "var": "vllm_server_env", "msg": "Pass the key as vllm_server_api_key."}]
    assert I.rule_problems(rules) == ["vllm_server_image is empty. Set it.", "Replica 0 would listen on port 70000.",
                                      "Pass the key as vllm_server_api_key."]


def test_a_rule_without_condition_or_a_failed_rule_without_message_is_an_error():
    with pytest.raises(ValueError):
        I.rule_problems([{"var": "x", "msg": "m"}])
    with pytest.raises(ValueError):
        I.rule_problems([{"fail": True, "var": "x", "msg": "  "}])
    # A passing rule's message may be empty (it is built from what failed, e.g. a model directory's problems).
    assert I.rule_problems([{"fail": False, "var": "x", "msg": ""}]) == []


def test_the_filter_refuses_what_is_no_list_of_rules():
    flt = FilterModule().filters()["input_rule_problems"]
    with pytest.raises(AnsibleFilterError):
        flt({"fail": True})
    with pytest.raises(AnsibleFilterError):
        flt(["not a rule"])


STATE = [
    {"name": "0", "port": 8000, "container_port": 18000,
     "ports": [{"port": 18000, "role": "container", "holder": "other"}, {"port": 8000, "role": "edge", "holder": None}]},
    {"name": "1", "port": 8001, "container_port": 18001,
     "ports": [{"port": 18001, "role": "container", "holder": "self"}, {"port": 8001, "role": "edge", "holder": "other"}]},
    {"name": "2", "port": 8002, "container_port": 8002,
     "ports": [{"port": 8002, "role": "container", "holder": "other"}]},
]


def test_each_port_another_process_holds_is_one_sentence_naming_the_fix():
    problems = FilterModule().filters()["held_port_problems"](STATE, "gpu-01")
    assert len(problems) == 3
    first, edge, plain = problems
    assert first.startswith("Port 18000 on gpu-01 is in use by another process, so replica 0 could not listen there")
    assert "ss -ltnp 'sport = :18000'" in first
    # vLLM's own port behind the edge: the offset is named too.
    assert "vllm_server_port_base (or vllm_server_replicas) (or vllm_server_edge_port_offset" in first
    assert "so the edge in front of replica 1 could not" in edge and "edge_port_offset" not in edge
    assert "edge_port_offset" not in plain
    assert all(p.endswith("to free ports. Nothing was changed.") for p in problems)


def test_no_held_port_says_nothing():
    assert I.held_port_problems([dict(STATE[0], ports=[{"port": 1, "role": "container", "holder": "self"}])], "h") == []


# ---- the rules each role's validate.yml hands to preflight (input_check_options) -------------------------------

def test_each_roles_checks_and_secrets_follow_in_the_roles_order_and_other_options_pass_through():
    flt = FilterModule().filters()["input_check_options"]
    merged = flt({"vllm_server": {"checks": [{"var": "vllm_server_port_base"}], "env": {"A": "1"},
                                  "secrets": [{"var": "vllm_server_api_key"}]},
                  "model_weights": {"checks": [{"var": "model_weights_dir"}], "model_source": {"source": "hf"}},
                  "verify": {"secrets": [{"var": "verify_api_key"}]}})
    assert [c["var"] for c in merged["checks"]] == ["vllm_server_port_base", "model_weights_dir"]
    assert [s["var"] for s in merged["secrets"]] == ["vllm_server_api_key", "verify_api_key"]
    assert merged["env"] == {"A": "1"} and merged["model_source"] == {"source": "hf"}
    assert flt({}) == {"checks": [], "secrets": []}


def test_an_option_two_roles_give_is_an_error_not_a_silent_choice():
    flt = FilterModule().filters()["input_check_options"]
    with pytest.raises(AnsibleFilterError, match="both vllm_server and vllm_image give the option image"):
        flt({"vllm_server": {"image": {"ref": "a"}}, "vllm_image": {"image": {"ref": "b"}}})
    with pytest.raises(AnsibleFilterError):
        flt([{"checks": []}])
