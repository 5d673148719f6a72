"""tests/release/check_fragments.py on real git repositories: a change to plugins/ or roles/ needs a fragment.

Each test builds a small repository with git (and a clone of it, for the upstream rule) and runs the script as
`make changelog-lint` does, reading its exit code and message.
"""
import importlib.util
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "release", "check_fragments.py")
spec = importlib.util.spec_from_file_location("check_fragments", SCRIPT)
check_fragments = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_fragments)


def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True)


def write(repo, path, text="x\n"):
    full = os.path.join(str(repo), path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as fh:
        fh.write(text)


def commit(repo, message, *paths):
    git(repo, "add", "-A", *paths)
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", message)


def run(repo, *args):
    result = subprocess.run([sys.executable, SCRIPT, "--repo", str(repo), *args], capture_output=True, text=True,
                            env={k: v for k, v in os.environ.items() if k != "CHANGELOG_BASE"}, check=False)
    return result.returncode, result.stdout + result.stderr


@pytest.fixture()
def released(tmp_path):
    """A repository whose last commit is a release (changelogs/changelog.yaml written, no fragment left)."""
    repo = tmp_path / "collection"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write(repo, "plugins/modules/thing.py")
    write(repo, "roles/server/tasks/main.yml")
    write(repo, "changelogs/fragments/1.0.0.yml", "release_summary: first\n")
    commit(repo, "work")
    os.remove(os.path.join(str(repo), "changelogs/fragments/1.0.0.yml"))
    write(repo, "changelogs/changelog.yaml", "releases: {1.0.0: {}}\n")
    commit(repo, "release 1.0.0")
    return repo


def test_no_release_yet_has_nothing_to_compare_with(tmp_path):
    repo = tmp_path / "new"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write(repo, "plugins/modules/thing.py")
    commit(repo, "first")
    code, out = run(repo)
    assert code == 0 and "nothing to compare" in out


def test_a_clean_checkout_of_a_release_passes(released):
    code, out = run(released)
    assert code == 0, out
    assert "the last release" in out


def test_a_plugin_change_since_the_release_without_a_fragment_fails(released):
    write(released, "plugins/modules/thing.py", "changed\n")
    commit(released, "change the module")
    code, out = run(released)
    assert code == 1
    assert "plugins/modules/thing.py" in out and "trivial" in out


def test_a_fragment_added_with_the_change_passes(released):
    write(released, "roles/server/tasks/main.yml", "changed\n")
    write(released, "changelogs/fragments/server-restart.yml", "trivial:\n  - server - reword a task name.\n")
    commit(released, "change the role, with a trivial fragment")
    code, out = run(released)
    assert code == 0, out
    assert "1 watched file(s) changed, 1 fragment(s)" in out


def test_uncommitted_and_untracked_files_count(released):
    write(released, "roles/server/tasks/new.yml")  # untracked
    code, out = run(released)
    assert code == 1 and "roles/server/tasks/new.yml" in out
    write(released, "changelogs/fragments/new-task.yml", "minor_changes:\n  - server - a new task.\n")
    code, out = run(released)
    assert code == 0, out


def test_changes_elsewhere_need_no_fragment(released):
    write(released, "docs/GUIDE.md", "more\n")
    write(released, "tests/unit/test_x.py")
    commit(released, "docs and tests")
    assert run(released)[0] == 0


def test_a_removed_fragment_is_no_fragment(released):
    write(released, "changelogs/fragments/old.yml", "trivial:\n  - x.\n")
    commit(released, "a fragment")
    git(released, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "--allow-empty",
        "-m", "nothing")
    base = subprocess.run(["git", "-C", str(released), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    os.remove(os.path.join(str(released), "changelogs/fragments/old.yml"))
    write(released, "plugins/modules/thing.py", "changed\n")
    code, out = run(released, "--base", base)
    assert code == 1, out


def test_a_branch_is_checked_from_where_it_left_its_upstream(released, tmp_path):
    # A fragment on the upstream since the release does not cover the branch's own plugin change.
    write(released, "changelogs/fragments/upstream-change.yml", "minor_changes:\n  - other - something.\n")
    write(released, "roles/server/tasks/main.yml", "upstream\n")
    commit(released, "upstream work with its fragment")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(released), str(clone)], check=True)
    assert run(clone)[0] == 0  # the clone as it came: HEAD is its upstream, so the last release is the base
    write(clone, "plugins/modules/thing.py", "branch\n")
    commit(clone, "branch change without a fragment")
    code, out = run(clone)
    assert code == 1 and "upstream origin/main" in out and "plugins/modules/thing.py" in out
    assert "roles/server/tasks/main.yml" not in out


def test_a_release_made_on_the_branch_is_the_base(released, tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(released), str(clone)], check=True)
    write(clone, "plugins/modules/thing.py", "branch\n")
    write(clone, "changelogs/fragments/1.1.0.yml", "minor_changes:\n  - thing - more.\n")
    commit(clone, "branch change with its fragment")
    os.remove(os.path.join(str(clone), "changelogs/fragments/1.1.0.yml"))
    write(clone, "changelogs/changelog.yaml", "releases: {1.0.0: {}, 1.1.0: {}}\n")
    commit(clone, "release 1.1.0 (the fragment folded in)")
    code, out = run(clone)
    assert code == 0, out
    assert "the last release" in out


def test_a_release_not_yet_committed_passes(released):
    write(released, "plugins/modules/thing.py", "changed\n")
    write(released, "changelogs/fragments/thing.yml", "bugfixes:\n  - thing - fixed.\n")
    commit(released, "a fix with its fragment")
    os.remove(os.path.join(str(released), "changelogs/fragments/thing.yml"))  # what antsibull-changelog release does
    write(released, "changelogs/changelog.yaml", "releases: {1.0.0: {}, 1.0.1: {}}\n")
    code, out = run(released)
    assert code == 0 and "a release being made" in out


def test_an_explicit_base_wins_and_a_wrong_one_is_an_error(released):
    write(released, "plugins/modules/thing.py", "changed\n")
    commit(released, "change")
    assert run(released, "--base", "HEAD")[0] == 0
    code, out = run(released, "--base", "no-such-ref")
    assert code == 2 and "no-such-ref" in out
