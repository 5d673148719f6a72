"""The per-unit "up" flag that replica_state returns for each replica (module_utils.serving.restart_verdicts.unit_up), also the
llmfleet.vllm.unit_up filter. replica_state itself runs against the real Docker engine in
tests/integration/test_replica_state_docker.py."""
import pytest

from ansible_collections.llmfleet.vllm.plugins.filter.restart_verdicts import llmfleet_unit_up
from ansible_collections.llmfleet.vllm.plugins.module_utils.serving.restart_verdicts import unit_up


@pytest.mark.parametrize("unit, running, up", [
    ({"ActiveState": "active", "SubState": "running", "UnitFileState": "enabled"}, True, True),
    ({"ActiveState": "active", "SubState": "waiting", "UnitFileState": "enabled"}, False, True),   # a timer
    ({"ActiveState": "active", "SubState": "waiting", "UnitFileState": "enabled"}, True, False),
    ({"ActiveState": "activating", "SubState": "start-post", "UnitFileState": "enabled"}, True, False),
    ({"ActiveState": "activating", "SubState": "auto-restart", "UnitFileState": "enabled"}, False, False),
    ({"ActiveState": "active", "SubState": "running", "UnitFileState": "disabled"}, True, False),
    ({"ActiveState": "failed", "SubState": "failed", "UnitFileState": "enabled"}, False, False),
    ({}, False, False),
])
def test_unit_up(unit, running, up):
    assert unit_up(unit, running=running) is up
    assert llmfleet_unit_up(unit, running=running) is up


def test_unit_up_filter_takes_no_unit_and_refuses_other_input():
    from ansible.errors import AnsibleFilterError
    assert llmfleet_unit_up(None) is False
    with pytest.raises(AnsibleFilterError):
        llmfleet_unit_up("active")
