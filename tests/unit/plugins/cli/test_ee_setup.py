"""The set-up of a run inside an execution environment (plugins/cli/ee_setup.py): which playbook runs, the mounts,
the environment passed in and the inventories copied into the run directory. main() with --ee: test_runner_ee.py."""

from pathlib import Path

import pytest

from ansible_collections.llmfleet.vllm.plugins.cli import ee_setup

ROOT = Path(__file__).resolve().parents[4]


@pytest.mark.parametrize("arg, expected", [
    ("site.yml", "llmfleet.vllm.site"),
    ("playbooks/plan.yml", "llmfleet.vllm.plan"),
    (str(ROOT / "playbooks" / "serve.yml"), "llmfleet.vllm.serve"),
    ("llmfleet.vllm.verify", "llmfleet.vllm.verify"),
])
def test_collection_playbooks_run_by_name_from_the_image(arg, expected):
    assert ee_setup.ee_playbook(arg, ROOT, "llmfleet.vllm") == (expected, None)


def test_another_playbook_file_is_copied(tmp_path):
    play = tmp_path / "mine.yml"
    play.write_text("- hosts: all\n")
    assert ee_setup.ee_playbook(str(play), ROOT, "llmfleet.vllm") == ("mine.yml", play)


def test_a_missing_playbook_is_named():
    with pytest.raises(ValueError, match="playbook 'nope.yml' not found"):
        ee_setup.ee_playbook("nope.yml", ROOT, "llmfleet.vllm")


def test_mounts_are_checked(tmp_path):
    assert ee_setup.ee_mount(f"{tmp_path}:/models:ro") == f"{tmp_path}:/models:ro"
    with pytest.raises(ValueError, match="expected SRC:DST"):
        ee_setup.ee_mount(str(tmp_path))
    with pytest.raises(ValueError, match="does not exist on this machine"):
        ee_setup.ee_mount(f"{tmp_path}/absent:/x")
    with pytest.raises(ValueError, match="must be absolute"):
        ee_setup.ee_mount(f"{tmp_path}:models")


def test_pass_env_takes_names_and_prefixes():
    environ = {"HF_TOKEN": "t0ken", "LLMFLEET_TEST_A": "1", "LLMFLEET_TEST_B": "2", "HOME": "/root"}
    assert ee_setup.passed_env(["HF_TOKEN", "LLMFLEET_TEST_*", "ABSENT"], environ) == {
        "HF_TOKEN": "t0ken", "LLMFLEET_TEST_A": "1", "LLMFLEET_TEST_B": "2"}


def test_several_inventories_and_a_file_with_its_group_vars_are_copied(tmp_path):
    one = tmp_path / "one"
    (one / "group_vars").mkdir(parents=True)
    (one / "hosts.yml").write_text("all: {}\n")
    (one / "group_vars" / "all.yml").write_text("a: 1\n")
    two = tmp_path / "two"
    two.mkdir()
    (two / "extra.ini").write_text("[g]\nh2\n")
    pdd = tmp_path / "pdd"
    pdd.mkdir()
    ee_setup.copy_inventories([str(one / "hosts.yml"), str(two)], pdd)
    files = sorted(str(p.relative_to(pdd)) for p in pdd.rglob("*") if p.is_file())
    assert files == ["inventory/0-hosts/group_vars/all.yml", "inventory/0-hosts/hosts.yml", "inventory/1-two/extra.ini"]
