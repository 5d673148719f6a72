"""llmfleet-run --ee: the argument handling of a run inside an execution environment.

The pure helpers are tested in test_ee_setup.py; here main() is run with ansible_runner.run replaced by a recorder (a
stand-in: the real run in a container is tests/integration/test_ee.py, in `make test-full`), to check what
ansible-runner is asked to do and what the run directory holds while it runs.
"""

import json
import stat
from pathlib import Path

import pytest

from ansible_collections.llmfleet.vllm.plugins.cli import ee_setup, runner

ROOT = Path(__file__).resolve().parents[4]
IMAGE = "llmfleet-ee/llmfleet-vllm:test"


@pytest.mark.parametrize("flags", [["--ee-mount", "/tmp:/tmp"], ["--pass-env", "HF_TOKEN"],
                                   ["--container-runtime", "podman"], ["--ee-option=--network=host"]])
def test_container_options_without_ee_are_refused(flags, capsys):
    with pytest.raises(SystemExit) as exc:
        runner.main(["playbooks/plan.yml", "-i", "localhost,", *flags])
    assert exc.value.code == 2
    assert "only apply with --ee IMAGE" in capsys.readouterr().err


def test_a_bad_mount_stops_the_run_before_it_starts(capsys, monkeypatch):
    import ansible_runner

    monkeypatch.setattr(ansible_runner, "run", lambda **kw: pytest.fail("ran despite a bad --ee-mount"))
    with pytest.raises(SystemExit):
        runner.main(["playbooks/plan.yml", "-i", "localhost,", "--ee", IMAGE, "--ee-mount", "/no/such/dir:/x"])
    assert "/no/such/dir does not exist" in capsys.readouterr().err


class Recorder:
    """Stands in for ansible_runner.run: records its arguments and what the run directory holds."""

    status, rc = "successful", 0

    def __init__(self):
        self.kwargs = None
        self.secret_file = None

    def __call__(self, **kwargs):
        self.kwargs = kwargs
        pdd = Path(kwargs["private_data_dir"])
        secret = pdd / "env" / ee_setup.EE_SECRETS_FILE
        if secret.exists():
            self.secret_file = (json.loads(secret.read_text()), stat.S_IMODE(secret.stat().st_mode))
        self.files = sorted(str(p.relative_to(pdd)) for p in pdd.rglob("*") if p.is_file())
        return self


def test_ee_run_asks_runner_for_process_isolation_with_secrets_in_the_run_directory(tmp_path, monkeypatch, capsys):
    import ansible_runner

    record = Recorder()
    monkeypatch.setattr(ansible_runner, "run", record)
    monkeypatch.setenv("HF_TOKEN", "hf_not_passed_123")
    monkeypatch.setenv("LLMFLEET_TEST_REGISTRY", "127.0.0.1:5000")
    inventory = tmp_path / "inv"
    (inventory / "group_vars" / "all").mkdir(parents=True)
    (inventory / "hosts.yml").write_text("all: {hosts: {h1: {}}}\n")
    (inventory / "group_vars" / "all" / "main.yml").write_text("x: 1\n")
    rc = runner.main(["site.yml", "-i", str(inventory), "-e", "llmfleet_api_key=sk-secret-value-9",
                      "-e", "llmfleet_max_model_len=512", "--ee", IMAGE, "--ee-mount", f"{tmp_path}:/models:ro",
                      "--pass-env", "LLMFLEET_TEST_*", "--ee-option=--network=host", "-q",
                      "--artifacts-dir", str(tmp_path / "runs"), "--keep-artifacts"])
    assert rc == 0
    kw = record.kwargs
    assert kw["process_isolation"] is True and kw["process_isolation_executable"] == "docker"
    assert kw["container_image"] == IMAGE
    assert kw["container_volume_mounts"] == [f"{tmp_path}:/models:ro"]
    assert kw["container_options"] == ["--network=host"]
    assert kw["playbook"] == "llmfleet.vllm.site" and kw["project_dir"] is None
    # Only what --pass-env names reaches the container (and the project's ansible.cfg, copied in).
    assert kw["envvars"]["LLMFLEET_TEST_REGISTRY"] == "127.0.0.1:5000"
    assert "HF_TOKEN" not in kw["envvars"] and "PATH" not in kw["envvars"]
    assert kw["envvars"]["ANSIBLE_CONFIG"] == "/runner/project/ansible.cfg"
    # The inventory, with its group_vars, is copied where ansible-runner points a container (/runner/inventory).
    assert kw["inventory"] == []
    assert {"inventory/hosts.yml", "inventory/group_vars/all/main.yml"} <= set(record.files)
    # The secret: a 0600 file in env/ during the run, only its container path on the command line, gone after.
    assert record.secret_file == ({"llmfleet_api_key": "sk-secret-value-9"}, 0o600)
    assert kw["cmdline"] == f"-e @/runner/env/{ee_setup.EE_SECRETS_FILE}"
    assert kw["extravars"] == {"llmfleet_max_model_len": "512"}
    summary = json.loads(capsys.readouterr().out)
    kept = Path(summary["artifacts_dir"])
    assert not (kept / "env" / ee_setup.EE_SECRETS_FILE).exists()
    assert summary["playbook"] == "llmfleet.vllm.site"


def test_ee_run_copies_a_playbook_of_its_own_and_uses_podman_when_asked(tmp_path, monkeypatch, capsys):
    import ansible_runner

    record = Recorder()
    monkeypatch.setattr(ansible_runner, "run", record)
    play = tmp_path / "mine.yml"
    play.write_text("- hosts: localhost\n  tasks: []\n")
    assert runner.main([str(play), "-i", "localhost,", "--ee", IMAGE, "--container-runtime", "podman", "-q"]) == 0
    assert record.kwargs["playbook"] == "mine.yml"
    assert "project/mine.yml" in record.files
    assert record.kwargs["process_isolation_executable"] == "podman"
    assert record.kwargs["cmdline"] == "-i localhost,"
    assert set(record.kwargs["envvars"]) <= {"ANSIBLE_CONFIG", "ANSIBLE_NOCOLOR"}
    capsys.readouterr()
