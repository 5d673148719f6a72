"""module_utils.serving.restart_verdicts.replica_actions (the llmfleet.vllm.replica_actions filter): what the serve role does with
each replica, from what replica_state read and the files written since."""
import pytest

from ansible_collections.llmfleet.vllm.plugins.filter.restart_verdicts import llmfleet_replica_actions
from ansible_collections.llmfleet.vllm.plugins.module_utils.serving.restart_verdicts import replica_actions

CONFIG = "/etc/llmfleet"
UNIT = "/etc/systemd/system/llmfleet-vllm@.service"
RUNNING = {"LoadState": "loaded", "ActiveState": "active", "SubState": "running", "UnitFileState": "enabled",
           "NeedDaemonReload": "no"}
NO_UNIT = {"LoadState": "not-found", "ActiveState": "inactive", "SubState": "dead", "UnitFileState": ""}
FAILED = dict(RUNNING, ActiveState="failed", SubState="failed")
AUTO_RESTART = dict(RUNNING, ActiveState="activating", SubState="auto-restart")


def state(name, unit, health=None, action="started"):
    up = unit.get("ActiveState") == "active" and unit.get("SubState") == "running" \
        and unit.get("UnitFileState") == "enabled"
    return {"name": name, "unit": unit, "up": up, "health": health, "action": action}


def test_a_converged_host_has_nothing_to_do():
    got = replica_actions([state("0", RUNNING, 200), state("1", RUNNING, 200)], ["0", "1"], [], CONFIG, UNIT)
    assert got == {"restart": [], "start": [], "background": [], "foreground": [], "daemon_reload": False,
                   "gate": False}


def test_a_new_host_starts_every_replica_in_the_background():
    got = replica_actions([state("0", NO_UNIT), state("1", NO_UNIT)], [0, 1],
                          [UNIT, CONFIG + "/vllm-0.env", CONFIG + "/vllm-1.run"], CONFIG, UNIT)
    assert got["background"] == ["0", "1"] and got["start"] == ["0", "1"]
    # The unit template was written: both count as restarts, but nothing runs, so none goes to the foreground.
    assert got["foreground"] == [] and got["daemon_reload"] is True and got["gate"] is True


def test_a_changed_file_restarts_only_its_replica_in_the_foreground():
    got = replica_actions([state("0", RUNNING, 200), state("1", RUNNING, 200)], ["0", "1"],
                          [CONFIG + "/vllm-1.unit.conf"], CONFIG, UNIT)
    assert got["restart"] == ["1"] and got["foreground"] == ["1"] and got["background"] == []
    assert got["daemon_reload"] is False and got["gate"] is True


def test_a_file_of_another_directory_or_replica_does_not_count():
    got = replica_actions([state("1", RUNNING, 200)], ["1"],
                          ["/elsewhere/vllm-1.env", CONFIG + "/vllm-10.env", CONFIG + "/serving.json"], CONFIG, UNIT)
    assert got["restart"] == [] and got["gate"] is False


def test_a_failed_unit_starts_in_the_background_and_one_in_auto_restart_in_the_foreground():
    got = replica_actions([state("0", FAILED, action="restarted"), state("1", AUTO_RESTART, action="restarted")],
                          ["0", "1"], [], CONFIG, UNIT)
    assert got["background"] == ["0"]
    # Between crashes there is a unit to restart, not a host with nothing on it.
    assert got["foreground"] == ["1"]
    assert got["restart"] == ["0", "1"]


def test_a_running_replica_that_did_not_answer_health_opens_the_gate():
    got = replica_actions([state("0", RUNNING, 200), state("1", RUNNING, 503)], ["0", "1"], [], CONFIG, UNIT)
    assert got["restart"] == [] and got["start"] == [] and got["gate"] is True


def test_a_unit_file_systemd_has_not_loaded_asks_for_a_daemon_reload():
    got = replica_actions([state("0", dict(RUNNING, NeedDaemonReload="yes"), 200, action="restarted")], ["0"], [],
                          CONFIG, UNIT)
    assert got["daemon_reload"] is True and got["foreground"] == ["0"]


def test_an_enabled_but_stopped_unit_or_a_running_disabled_one_is_started():
    disabled = dict(RUNNING, UnitFileState="disabled")
    stopped = dict(RUNNING, ActiveState="inactive", SubState="dead")
    got = replica_actions([state("a", disabled, 200), state("b", stopped)], ["a", "b"], [], CONFIG, UNIT)
    assert got["start"] == ["a", "b"]
    # "a" runs and serves (only its enablement is missing): it is started in the foreground, not left to a job.
    assert got["background"] == ["b"] and got["foreground"] == ["a"]


def test_the_filter_refuses_what_is_not_replica_state_output():
    with pytest.raises(Exception, match="replica_actions expects"):
        llmfleet_replica_actions({"replicas": []}, ["0"], [], CONFIG, UNIT)
