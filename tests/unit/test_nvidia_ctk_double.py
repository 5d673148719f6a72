"""The test-double nvidia-ctk must behave as NVIDIA documents `nvidia-ctk runtime configure --runtime=docker`
(the Molecule scenarios rely on it standing in for the real tool)."""
import json
import os
import subprocess
import sys

DOUBLE = os.path.join(os.path.dirname(__file__), "..", "doubles", "nvidia-container-toolkit", "nvidia-ctk")


def ctk(*args):
    return subprocess.run([sys.executable, DOUBLE] + list(args), capture_output=True, text=True, check=False)


def test_adds_the_runtime_and_keeps_every_other_key(tmp_path):
    path = tmp_path / "daemon.json"
    path.write_text(json.dumps({"live-restore": True, "runtimes": {"crun": {"path": "/usr/bin/crun"}}}))
    result = ctk("runtime", "configure", "--runtime=docker", "--config=%s" % path)
    assert result.returncode == 0, result.stderr
    assert "Wrote updated config to %s" % path in result.stderr
    config = json.loads(path.read_text())
    assert config == {"live-restore": True, "runtimes": {"crun": {"path": "/usr/bin/crun"},
                                                         "nvidia": {"args": [], "path": "nvidia-container-runtime"}}}
    # NVIDIA's file: 4-space indentation, keys in order.
    assert path.read_text() == json.dumps(config, indent=4, sort_keys=True)
    assert "default-runtime" not in config and "features" not in config


def test_missing_file_set_as_default_and_cdi(tmp_path):
    path = tmp_path / "docker" / "daemon.json"
    result = ctk("runtime", "configure", "--runtime", "docker", "--config", str(path), "--set-as-default", "--cdi.enabled")
    assert result.returncode == 0, result.stderr
    assert json.loads(path.read_text()) == {
        "default-runtime": "nvidia", "features": {"cdi": True},
        "runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}}}


def test_aliases_dry_run_and_rerun(tmp_path):
    path = tmp_path / "daemon.json"
    path.write_text('{"features": {"buildkit": true}}')
    dry = ctk("runtime", "configure", "--runtime=docker", "--config=%s" % path, "--nvidia-set-as-default", "--enable-cdi", "--dry-run")
    assert dry.returncode == 0 and path.read_text() == '{"features": {"buildkit": true}}'
    assert json.loads(dry.stdout)["features"] == {"buildkit": True, "cdi": True}
    ctk("runtime", "configure", "--runtime=docker", "--config=%s" % path)
    first = path.read_text()
    ctk("runtime", "configure", "--runtime=docker", "--config=%s" % path)
    assert path.read_text() == first


def test_refuses_what_it_does_not_implement(tmp_path):
    assert ctk("runtime", "configure", "--runtime=containerd", "--config=%s" % (tmp_path / "c.toml")).returncode != 0
    assert ctk("runtime", "configure", "--no-such-flag").returncode != 0
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    assert ctk("runtime", "configure", "--runtime=docker", "--config=%s" % path).returncode != 0
    assert path.read_text() == "{not json"
