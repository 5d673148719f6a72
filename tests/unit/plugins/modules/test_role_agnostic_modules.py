"""Modules that know no role (#32): the variable names their messages give and the units they look at are
parameters the role passes; their defaults name only the module's own options.

vllm_flag_check's checks run here on a recorded module object (no image, no docker: the point is which
variable a refusal names); replica_state against the real Docker engine is tests/integration/test_replica_state_docker.py.
"""
import re

import pytest

from ansible_collections.llmfleet.vllm.plugins.modules import replica_state, vllm_flag_check


class Failed(Exception):
    pass


class Module:
    check_mode = True

    def fail_json(self, msg, **result):
        raise Failed(msg)


def flag_check(**params):
    p = dict((k, v.get("default")) for k, v in vllm_flag_check.ARGUMENT_SPEC.items())
    p.update(params)
    img = type("Img", (), {"name": "vllm/vllm-openai:v0.11.0", "id": "sha256:" + "0" * 64})()
    return vllm_flag_check._check_flags(Module(), p, img, {"--kv-transfer-config": {}}, "", "0.11.0", {})


@pytest.mark.parametrize("given, named", [({}, "args_extra"),
                                          ({"args_extra_var": "vllm_server_args_extra"}, "vllm_server_args_extra")])
def test_a_json_flag_that_does_not_parse_names_the_variable_the_caller_gave(given, named):
    with pytest.raises(Failed) as failed:
        flag_check(args=["--kv-transfer-config", "{not json"], args_extra={"kv-transfer-config": "{not json"},
                   **given)
    assert "fix it in %s (" % named in str(failed.value)


def role_variables(module):
    """Option defaults of a module that name a role's variable or one of the roles' units."""
    return sorted("%s=%s" % (name, spec["default"]) for name, spec in module.items()
                  if isinstance(spec.get("default"), str)
                  and re.match(r"^(vllm_server|preflight|model_weights|loadbalancer)_|llmfleet-edge", spec["default"]))


@pytest.mark.parametrize("spec", [vllm_flag_check.ARGUMENT_SPEC, replica_state.ARGUMENT_SPEC],
                         ids=["vllm_flag_check", "replica_state"])
def test_no_default_names_a_role_variable_or_the_edge_unit(spec):
    assert role_variables(spec) == []
