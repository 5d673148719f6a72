"""llmfleet-run end to end: real ansible-runner, real ansible-playbook, against the controller itself
(connection local). Playbooks live in tests/integration/runner_cli/."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = ROOT / "tests" / "integration" / "runner_cli"
INVENTORY = PLAYBOOKS / "hosts.yml"
CENSORED = "the output has been hidden due to the fact that 'no_log: true' was specified for this result"


def llmfleet_run(*args, tmp_path, env=None, check=None):
    """Run this checkout's llmfleet-run (not the installed copy) and return (rc, summary, stderr)."""
    run_env = dict(os.environ)
    run_env["PYTHONPATH"] = str(ROOT / "collections")
    run_env["TMPDIR"] = str(tmp_path / "tmp")  # where the private secrets file goes; checked below
    (tmp_path / "tmp").mkdir(exist_ok=True)
    run_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "ansible_collections.llmfleet.vllm.plugins.cli.runner", *map(str, args)],
        cwd=ROOT, env=run_env, capture_output=True, text=True, timeout=300, check=False
    )
    summary = json.loads(proc.stdout) if proc.stdout.strip() else None
    return proc.returncode, summary, proc.stderr


def files_under(path):
    return [p for p in Path(path).rglob("*") if p.is_file()]


def test_passing_playbook_exits_0_with_counts_and_leaves_nothing_behind(tmp_path):
    runs = tmp_path / "runs"
    out = tmp_path / "summary.json"
    rc, s, err = llmfleet_run(PLAYBOOKS / "passing.yml", "-i", INVENTORY, "--artifacts-dir", runs,
                              "--json-out", out, tmp_path=tmp_path)
    assert rc == 0, err
    assert s["status"] == "successful" and s["rc"] == 0
    assert s["hosts"] == {"localhost": {"ok": 2, "changed": 1, "failed": 0, "unreachable": 0, "skipped": 0,
                                        "rescued": 0, "ignored": 0}}
    assert s["failed_tasks"] == []
    assert s["playbook"] == str(PLAYBOOKS / "passing.yml")
    assert 0 < s["elapsed_s"] < 300
    assert s["artifacts_dir"] is None and list(runs.iterdir()) == []  # removed by default
    assert json.loads(out.read_text()) == s
    assert "PLAY RECAP" in err  # Ansible's output went to stderr, stdout is only the JSON


def test_failing_playbook_exits_with_ansible_rc_and_names_the_task(tmp_path):
    rc, s, err = llmfleet_run("tests/integration/runner_cli/failing.yml", "-i", INVENTORY, "-e", "reason='disk full'",
                              tmp_path=tmp_path)
    assert rc == 2, err
    assert s["status"] == "failed" and s["rc"] == 2
    assert s["hosts"]["localhost"]["failed"] == 1 and s["hosts"]["localhost"]["ok"] == 1
    assert s["failed_tasks"] == [{"host": "localhost", "task": "Fail with a message a pipeline should show",
                                  "role": None, "msg": "the disk check failed: disk full"}]


def test_secret_extra_var_never_reaches_kept_artifacts(tmp_path):
    sentinel = "SENTINEL-hub-token-7f3a9c"
    env_sentinel = "SENTINEL-env-token-51be0d"
    dest = tmp_path / "delivered-secret"
    runs = tmp_path / "runs"
    rc, s, err = llmfleet_run(PLAYBOOKS / "secret.yml", "-i", INVENTORY, "-e", f"hub_token={sentinel}",
                              "-e", f"secret_dest={dest}", "--artifacts-dir", runs, "--keep-artifacts",
                              tmp_path=tmp_path, env={"HF_TOKEN": env_sentinel})
    assert rc == 2, err
    assert dest.read_text() == sentinel  # the secret did reach the play
    assert s["failed_tasks"][0]["task"] == "Fail while holding the secret"
    assert s["failed_tasks"][0]["msg"] == CENSORED  # no_log respected
    kept = Path(s["artifacts_dir"])
    assert kept.parent == runs.resolve()
    kept_files = files_under(kept)
    assert any(p.name == "stdout" for p in kept_files) and any(p.parent.name == "job_events" for p in kept_files)
    for path in kept_files:
        data = path.read_bytes()
        assert sentinel.encode() not in data, f"secret extra var found in {path}"
        assert env_sentinel.encode() not in data, f"secret environment variable found in {path}"
    assert "warnings" not in s  # nothing had to be scrubbed: the play used no_log
    # The private vars file is gone after the run.
    assert not any(p.name.startswith("llmfleet-run-secrets-") for p in (tmp_path / "tmp").iterdir())
    assert sentinel not in err and sentinel not in json.dumps(s)


def test_secret_printed_by_a_careless_task_is_scrubbed_and_reported(tmp_path):
    sentinel = "SENTINEL-api-token-c0ffee"
    rc, s, err = llmfleet_run(PLAYBOOKS / "leaky.yml", "-i", INVENTORY, "-e", f"api_token={sentinel}",
                              "--artifacts-dir", tmp_path / "runs", "--keep-artifacts", tmp_path=tmp_path)
    assert rc == 0, err
    assert sentinel not in err and "token is ********" in err
    assert any("stdout" in w for w in s["warnings"])
    for path in files_under(s["artifacts_dir"]):
        assert sentinel.encode() not in path.read_bytes(), path


def test_every_run_gets_a_fresh_private_data_dir(tmp_path):
    runs = tmp_path / "runs"
    common = [PLAYBOOKS / "passing.yml", "-i", INVENTORY, "--artifacts-dir", runs, "--keep-artifacts"]
    _unused, first, _unused = llmfleet_run(*common, "-e", "greeting=hello", tmp_path=tmp_path)
    _unused, second, _unused = llmfleet_run(*common, tmp_path=tmp_path)
    assert first["artifacts_dir"] != second["artifacts_dir"]

    def stdout_of(summary):
        return "".join(p.read_text() for p in files_under(summary["artifacts_dir"]) if p.name == "stdout")
    assert "greeting is hello" in stdout_of(first)
    assert "greeting is unset" in stdout_of(second)  # the first run's extra vars were not reused


def test_check_mode_and_host_list_inventory(tmp_path):
    rc, s, err = llmfleet_run(PLAYBOOKS / "passing.yml", "-i", "localhost,", "-e",
                              '{"ansible_connection": "local", "ansible_python_interpreter": "%s"}' % sys.executable,
                              "--check", tmp_path=tmp_path)
    assert rc == 0, err
    assert s["check_mode"] is True
    # ansible.builtin.command does not run in check mode: it is skipped
    assert s["hosts"]["localhost"]["skipped"] == 1 and s["hosts"]["localhost"]["changed"] == 0


def test_missing_playbook_is_a_usage_error(tmp_path):
    rc, s, err = llmfleet_run("playbooks/nope.yml", "-i", INVENTORY, "--artifacts-dir", tmp_path / "runs",
                              tmp_path=tmp_path)
    assert rc == 2 and s is None
    assert "playbook 'playbooks/nope.yml' not found" in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("bad", ["justaword", "@/nonexistent/vars.yml"])
def test_bad_extra_vars_are_rejected_before_anything_runs(tmp_path, bad):
    rc, s, err = llmfleet_run(PLAYBOOKS / "passing.yml", "-i", INVENTORY, "-e", bad, tmp_path=tmp_path)
    assert rc == 2 and s is None and "-e" in err
