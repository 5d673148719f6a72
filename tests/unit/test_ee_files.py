"""The execution-environment files agree with pyproject.toml and galaxy.yml (one place for each version).

requirements.txt is generated from pyproject.toml (ee/gen_requirements.py); execution-environment.yml
pins ansible-core and ansible-runner by hand, so their agreement is checked here; ee/pack_collection.py
turns the bundle's installed collections into installable artifacts.
"""

import hashlib
import importlib.metadata
import importlib.util
import json
import re
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def load_script(name):
    spec = importlib.util.spec_from_file_location(f"ee_{name}", ROOT / "ee" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = load_script("gen_requirements")
pack = load_script("pack_collection")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def pyproject_spec(name):
    for dep in PYPROJECT["project"]["dependencies"]:
        if gen.requirement_name(dep) == name:
            return re.sub(r"\s+", "", dep)
    raise AssertionError(f"{name} is not a dependency in pyproject.toml")


def test_requirements_txt_is_generated_from_pyproject():
    result = subprocess.run([sys.executable, str(ROOT / "ee" / "gen_requirements.py"), "--check"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_requirements_carry_pyprojects_ranges_and_leave_out_the_bundle():
    lines = [ln for ln in (ROOT / "requirements.txt").read_text().splitlines() if ln and not ln.startswith("#")]
    names = {gen.requirement_name(ln) for ln in lines}
    assert {"docker", "huggingface-hub", "modelscope", "pyyaml"} <= names
    assert not names & {"ansible", "ansible-runner", "nvidia-ml-py"}
    for line in lines:
        assert line == pyproject_spec(gen.requirement_name(line))


def test_render_refuses_a_left_out_name_pyproject_no_longer_has():
    with pytest.raises(ValueError, match="nvidia-ml-py"):
        gen.render({"project": {"dependencies": ["ansible>=12", "ansible-runner>=2.4", "docker>=7"]}})


def test_a_changed_pin_makes_the_check_fail():
    changed = {"project": {"dependencies": [d.replace("docker>=7.2,<8", "docker>=7.3,<8")
                                            for d in PYPROJECT["project"]["dependencies"]]}}
    assert gen.render(changed) != (ROOT / "requirements.txt").read_text()
    assert "docker>=7.3,<8" in gen.render(changed)


def test_meta_execution_environment_points_at_the_shipped_files():
    meta = yaml.safe_load((ROOT / "meta" / "execution-environment.yml").read_text())
    assert meta["version"] == 1
    for kind in ("python", "system"):
        assert (ROOT / meta["dependencies"][kind]).is_file()
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    for shipped in (meta["dependencies"]["python"], meta["dependencies"]["system"]):
        assert shipped not in galaxy["build_ignore"]


def test_ee_definition_pins_core_and_runner_like_pyproject():
    ee = yaml.safe_load((ROOT / "execution-environment.yml").read_text())
    assert ee["version"] == 3
    deps = ee["dependencies"]
    assert deps["ansible_runner"]["package_pip"] == pyproject_spec("ansible-runner")
    # ansible-core: what the `ansible` bundle pinned in pyproject.toml requires.
    bundle_core = [r.split(";")[0].replace(" ", "") for r in importlib.metadata.requires("ansible")
                   if gen.requirement_name(r) == "ansible-core"]
    assert deps["ansible_core"]["package_pip"] in bundle_core


def test_ee_collections_cover_galaxy_dependencies():
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    reqs = yaml.safe_load((ROOT / "ee" / "requirements.yml").read_text())["collections"]
    names = {Path(r["name"]).name.removesuffix(".tar.gz") for r in reqs}
    assert f"{galaxy['namespace']}.{galaxy['name']}" in names
    assert set(galaxy["dependencies"]) <= names


def _installed_collection(tmp_path):
    """A collection directory as the `ansible` bundle installs one: FILES.json lists a file that is not there."""
    src = tmp_path / "src"
    (src / "plugins" / "modules").mkdir(parents=True)
    (src / "plugins" / "modules" / "thing.py").write_text("# a module\n")
    listed = [
        {"name": ".", "ftype": "dir", "chksum_type": None, "chksum_sha256": None, "format": 1},
        {"name": "plugins", "ftype": "dir", "chksum_type": None, "chksum_sha256": None, "format": 1},
        {"name": "plugins/modules", "ftype": "dir", "chksum_type": None, "chksum_sha256": None, "format": 1},
        {"name": "plugins/modules/thing.py", "ftype": "file", "chksum_type": "sha256", "chksum_sha256": "0" * 64,
         "format": 1},
        {"name": "tests/unit/test_thing.py", "ftype": "file", "chksum_type": "sha256", "chksum_sha256": "1" * 64,
         "format": 1},
    ]
    (src / "FILES.json").write_text(json.dumps({"files": listed, "format": 1}))
    (src / "MANIFEST.json").write_text(json.dumps({
        "collection_info": {"namespace": "example", "name": "thing", "version": "1.0.0", "dependencies": {}},
        "file_manifest_file": {"name": "FILES.json", "ftype": "file", "chksum_type": "sha256",
                               "chksum_sha256": "2" * 64, "format": 1},
        "format": 1}))
    return src


def test_pack_lists_what_is_there_with_consistent_checksums(tmp_path):
    src = _installed_collection(tmp_path)
    out = tmp_path / "example.thing.tar.gz"
    pack.pack(src, out)
    with tarfile.open(out) as tar:
        files_bytes = tar.extractfile("FILES.json").read()
        manifest = json.loads(tar.extractfile("MANIFEST.json").read())
        names = tar.getnames()
        module = tar.extractfile("plugins/modules/thing.py").read()
    files = {f["name"]: f for f in json.loads(files_bytes)["files"]}
    assert "tests/unit/test_thing.py" not in files and "tests/unit/test_thing.py" not in names
    assert files["plugins/modules/thing.py"]["chksum_sha256"] == hashlib.sha256(module).hexdigest()
    assert manifest["file_manifest_file"]["chksum_sha256"] == hashlib.sha256(files_bytes).hexdigest()
    assert names[:2] == ["MANIFEST.json", "FILES.json"]


def test_pack_is_reproducible(tmp_path):
    src = _installed_collection(tmp_path)
    pack.pack(src, tmp_path / "a.tar.gz")
    (src / "plugins" / "modules" / "thing.py").touch()  # a newer mtime changes nothing
    pack.pack(src, tmp_path / "b.tar.gz")
    assert (tmp_path / "a.tar.gz").read_bytes() == (tmp_path / "b.tar.gz").read_bytes()


def test_packed_artifact_installs_with_ansible_galaxy(tmp_path):
    src = _installed_collection(tmp_path)
    out = tmp_path / "example.thing.tar.gz"
    pack.pack(src, out)
    dest = tmp_path / "installed"
    galaxy = Path(sys.executable).parent / "ansible-galaxy"
    result = subprocess.run([str(galaxy), "collection", "install", "--offline", "-p", str(dest), str(out)],
                            capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                                                 "ANSIBLE_COLLECTIONS_PATH": str(dest)},
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (dest / "ansible_collections" / "example" / "thing" / "plugins" / "modules" / "thing.py").read_text() \
        == "# a module\n"
