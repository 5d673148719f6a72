"""tests/release/check_release.py on a small collection tree and a tarball built by ansible-galaxy."""
import importlib.util
import os
import shutil
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "release", "check_release.py")
spec = importlib.util.spec_from_file_location("check_release", SCRIPT)
check_release = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_release)
GALAXY = os.path.join(os.path.dirname(sys.executable), "ansible-galaxy")

GALAXY_YML = """namespace: demo
name: thing
version: 2.1.0
readme: README.md
authors: [someone]
repository: %s
documentation: https://docs.example.org/thing
homepage: https://example.org/thing
issues: https://example.org/thing/issues
"""


def tree(tmp_path, repository="https://example.org/thing", released=("2.0.0", "2.1.0"), fragments=(),
         pyproject="2.1.0"):
    root = tmp_path / "thing"
    (root / "changelogs" / "fragments").mkdir(parents=True)
    (root / "galaxy.yml").write_text(GALAXY_YML % repository)
    (root / "README.md").write_text("thing\n")
    (root / "pyproject.toml").write_text('[project]\nname = "thing"\nversion = "%s"\n' % pyproject)
    (root / "changelogs" / "changelog.yaml").write_text(
        "releases:\n" + "".join("  %s: {}\n" % v for v in released))
    for name in fragments:
        (root / "changelogs" / "fragments" / name).write_text("trivial:\n  - x.\n")
    return root


def build(root, out):
    subprocess.run([GALAXY, "collection", "build", "--force", "--output-path", str(out), str(root)],
                   check=True, capture_output=True)
    return str(out / "demo-thing-2.1.0.tar.gz")


def test_a_ready_release_passes(tmp_path):
    root = tree(tmp_path)
    tarball = build(root, tmp_path)
    assert check_release.release_problems(str(root), tarball) == []


def test_every_problem_is_named(tmp_path):
    root = tree(tmp_path, repository="https://example.invalid/FILL-ME/thing", released=("2.0.0",),
                fragments=("fix.yml",), pyproject="2.0.0")
    tarball = build(root, tmp_path)
    shutil.copy(tarball, str(tmp_path / "kept.tar.gz"))
    problems = "\n".join(check_release.release_problems(str(root), str(tmp_path / "kept.tar.gz")))
    assert "no release 2.1.0" in problems
    assert "fix.yml" in problems
    assert "pyproject.toml's version is 2.0.0" in problems
    assert "repository is still a placeholder" in problems
    assert "documentation" not in problems


def test_a_tarball_of_another_version_is_refused(tmp_path):
    root = tree(tmp_path)
    tarball = build(root, tmp_path)
    (root / "galaxy.yml").write_text((GALAXY_YML % "https://example.org/thing").replace("2.1.0", "2.0.0"))
    (root / "pyproject.toml").write_text('[project]\nversion = "2.0.0"\n')
    problems = check_release.release_problems(str(root), tarball)
    assert problems == ["the tarball is version 2.1.0, galaxy.yml says 2.0.0"]
