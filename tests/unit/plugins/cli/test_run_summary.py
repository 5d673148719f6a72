"""llmfleet-run's JSON summary from ansible-runner events (plugins/cli/run_summary.py).

The event dicts below have the shape ansible-runner 2.4 writes to artifacts/<ident>/job_events/
(event, event_data.host/task/role/res/ignore_errors; playbook_on_stats with per-host counters).
"""

import json

from ansible_collections.llmfleet.vllm.plugins.cli import run_summary


CENSORED = "the output has been hidden due to the fact that 'no_log: true' was specified for this result"


def ev(event, **data):
    return {"event": event, "event_data": data}


def stats(**counters):
    base = {k: {} for k in ("ok", "changed", "failures", "dark", "skipped", "rescued", "ignored", "processed")}
    base.update(counters)
    return ev("playbook_on_stats", **base)


def summarize(events, rc=2, **kw):
    return run_summary.build_summary(events, status="failed" if rc else "successful", rc=rc, elapsed_s=12.3456,
                                     playbook="/c/playbooks/serve.yml", artifacts_dir=None, **kw)


def test_summary_counts_each_host_and_lists_the_failed_task_with_its_role_and_message():
    events = [
        ev("runner_on_ok", host="gpu1", task="Gather GPU facts", role="preflight", res={"changed": False}),
        ev("runner_on_failed", host="gpu2", task="Check the driver version", role="preflight",
           res={"failed": True, "msg": "driver 535 is older than 570; upgrade it"}, ignore_errors=None),
        stats(ok={"gpu1": 5, "gpu2": 3}, changed={"gpu1": 2}, failures={"gpu2": 1}, skipped={"gpu1": 1},
              processed={"gpu1": 1, "gpu2": 1}),
    ]
    s = summarize(events)
    assert s["rc"] == 2 and s["status"] == "failed" and s["elapsed_s"] == 12.346
    assert s["hosts"]["gpu1"] == {"ok": 5, "changed": 2, "failed": 0, "unreachable": 0, "skipped": 1,
                                  "rescued": 0, "ignored": 0}
    assert s["hosts"]["gpu2"]["failed"] == 1 and s["hosts"]["gpu2"]["ok"] == 3
    assert s["failed_tasks"] == [{"host": "gpu2", "task": "Check the driver version", "role": "preflight",
                                  "msg": "driver 535 is older than 570; upgrade it"}]
    assert "error" not in s
    json.dumps(s)  # the summary is JSON as it stands


def test_unreachable_host_is_reported_with_its_connection_error():
    events = [
        ev("runner_on_unreachable", host="gpu3", task="Gathering Facts", role=None,
           res={"unreachable": True, "msg": "Failed to connect to the host via ssh: Connection refused"}),
        stats(dark={"gpu3": 1}, processed={"gpu3": 1}),
    ]
    s = summarize(events, rc=4)
    assert s["hosts"]["gpu3"]["unreachable"] == 1
    assert s["failed_tasks"][0]["msg"] == "UNREACHABLE: Failed to connect to the host via ssh: Connection refused"


def test_no_log_failure_shows_only_the_censored_notice():
    res = {"censored": CENSORED, "changed": False, "_ansible_no_log": True}
    s = summarize([ev("runner_on_failed", host="h", task="Log in to the hub", role="model_weights", res=res),
                   stats(failures={"h": 1})])
    assert s["failed_tasks"][0]["msg"] == CENSORED


def test_ignored_and_rescued_failures_are_not_failed_tasks():
    events = [
        ev("runner_on_failed", host="a", task="Probe an optional file", res={"msg": "no such file"}, ignore_errors=True),
        ev("runner_on_failed", host="b", task="Try the fast path", res={"msg": "fast path failed"}),
        stats(ok={"a": 2, "b": 2}, ignored={"a": 1}, rescued={"b": 1}),
    ]
    s = summarize(events, rc=0)
    assert s["failed_tasks"] == []
    assert s["hosts"]["a"]["ignored"] == 1 and s["hosts"]["b"]["rescued"] == 1


def test_command_failure_message_carries_rc_and_stderr_tail():
    res = {"msg": "non-zero return code", "rc": 125, "stdout": "", "stderr": "x" * 2000 + "\nno such image"}
    msg = run_summary.failure_message(res)
    assert msg.startswith("non-zero return code; rc=125; stderr: ...")
    assert msg.endswith("no such image")
    assert len(msg) < 800


def test_loop_failure_names_the_failed_items():
    res = {"msg": "One or more items failed", "results": [
        {"item": "docker.io", "failed": False},
        {"item": "nvidia-container-toolkit", "failed": True, "msg": "No package matching"},
    ]}
    assert run_summary.failure_message(res) == 'One or more items failed; item "nvidia-container-toolkit": No package matching'


def test_run_that_stopped_before_the_play_explains_itself_from_output():
    s = summarize([], rc=4, stdout_tail="ERROR! the role 'vllm_sever' was not found")
    assert s["hosts"] == {} and s["failed_tasks"] == []
    assert "vllm_sever" in s["error"]


def test_secret_values_in_failure_messages_are_redacted():
    events = [ev("runner_on_failed", host="h", task="t", res={"msg": 'auth failed for "hf_SECRETVALUE"'}),
              stats(failures={"h": 1})]
    s = summarize(events, secrets=["hf_SECRETVALUE"])
    assert "hf_SECRETVALUE" not in json.dumps(s)
    assert s["failed_tasks"][0]["msg"] == 'auth failed for "********"'
