"""Modules that know no role (#32): the variable names their messages give and the units they look at are
parameters the role passes; their defaults name only the module's own options.

vllm_flag_check's checks run here without a module (no image, no docker: the point is which
variable a refusal names); replica_state against the real Docker engine is tests/integration/test_replica_state_docker.py.
"""
import re

import pytest

from ansible_collections.llmfleet.vllm.plugins.modules import input_check, replica_state, vllm_flag_check


def flag_check(**params):
    p = dict((k, v.get("default")) for k, v in vllm_flag_check.ARGUMENT_SPEC.items())
    p.update(params)
    img = type("Img", (), {"name": "vllm/vllm-openai:v0.11.0", "id": "sha256:" + "0" * 64})()
    return vllm_flag_check._check_flags(p, img, {"--kv-transfer-config": {}}, "", "0.11.0")


@pytest.mark.parametrize("given, named", [({}, "args_extra"),
                                          ({"args_extra_var": "vllm_server_args_extra"}, "vllm_server_args_extra")])
def test_a_json_flag_that_does_not_parse_names_the_variable_the_caller_gave(given, named):
    with pytest.raises(vllm_flag_check.Refused) as failed:
        flag_check(args=["--kv-transfer-config", "{not json"], args_extra={"kv-transfer-config": "{not json"},
                   **given)
    assert "fix it in %s (" % named in str(failed.value)


def role_variables(module):
    """Option defaults of a module that name a role's variable or one of the roles' units."""
    return sorted("%s=%s" % (name, spec["default"]) for name, spec in module.items()
                  if isinstance(spec.get("default"), str)
                  and re.match(r"^(vllm_server|preflight|model_weights|loadbalancer)_|llmfleet-edge", spec["default"]))


@pytest.mark.parametrize("spec", [vllm_flag_check.ARGUMENT_SPEC, vllm_flag_check.MODEL_OPTIONS, replica_state.ARGUMENT_SPEC,
                                  input_check.ARGUMENT_SPEC],
                         ids=["vllm_flag_check", "vllm_flag_check models", "replica_state", "input_check"])
def test_no_default_names_a_role_variable_or_the_edge_unit(spec):
    assert role_variables(spec) == []


@pytest.mark.parametrize("ports, named", [
    ({}, ("ports.replicas", "ports.offset")),
    ({"replicas_var": "vllm_server_port_base", "offset_var": "vllm_server_edge_port_offset"},
     ("vllm_server_port_base", "vllm_server_edge_port_offset"))])
def test_input_check_port_messages_name_the_variables_the_caller_gave(ports, named):
    from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.input_checks import port_problems
    found = port_problems([{"name": "0", "port": 60000}], edge=True, offset=10000,
                          replicas_var=ports.get("replicas_var") or "ports.replicas",
                          offset_var=ports.get("offset_var") or "ports.offset")
    assert found == ["Replica 0 listens on port 60000 through the edge, and vLLM itself on port 60000 + %s 10000 = "
                     "70000, outside 1-65535: lower %s (e.g. 8000) or %s so that both stay at most 65535."
                     % (named[1], named[0], named[1])]


@pytest.mark.parametrize("var", ["model_source.local_path", "model_weights_local_path"])
def test_input_check_names_the_local_model_directory_variable_the_caller_gave(tmp_path, var):
    found = input_check._local_source_problems(str(tmp_path / "missing"), {}, var)
    assert found[0].startswith("%s %s is not a directory on the controller" % (var, tmp_path / "missing"))
