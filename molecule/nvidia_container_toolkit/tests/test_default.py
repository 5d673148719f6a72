"""Both orders of docker_engine and nvidia_container_toolkit end with one daemon.json that holds both."""
import json
import os
import re
import subprocess

import pytest

VERSION = os.environ.get("LLMFLEET_NVIDIA_TOOLKIT_TEST_VERSION", "1.19.1-1")
PACKAGES = ["nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
            "libnvidia-container1"]
SCENARIO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def daemon_json(host):
    return json.loads(host.file("/etc/docker/daemon.json").content_string)


def test_daemon_json_holds_the_runtime_docker_engines_keys_and_the_operators(host):
    config = daemon_json(host)
    assert config["runtimes"]["nvidia"] == {"args": [], "path": "nvidia-container-runtime"}
    assert config["live-restore"] is True and config["log-driver"] == "json-file"
    assert config["log-opts"] == {"max-size": "100m", "max-file": "3"}
    assert config["cgroup-parent"] == "llmfleet-molecule-nested"
    assert config["max-concurrent-downloads"] == 5


def test_flags_landed_where_asked(host):
    config = daemon_json(host)
    if host.backend.hostname.endswith("toolkit-first"):
        assert config["default-runtime"] == "nvidia"
        assert "features" not in config
    else:
        assert config["features"] == {"cdi": True}
        assert "default-runtime" not in config
        assert host.file("/var/run/cdi/nvidia.yaml").exists


def test_the_real_dockerd_loaded_the_nvidia_runtime(host):
    runtimes = host.check_output("docker info --format '{{json .Runtimes}}'")
    assert "nvidia" in json.loads(runtimes)
    default = host.check_output("docker info --format '{{.DefaultRuntime}}'")
    assert default == ("nvidia" if host.backend.hostname.endswith("toolkit-first") else "runc")


@pytest.mark.parametrize("package", PACKAGES)
def test_package_pinned_and_held(host, package):
    assert host.check_output("dpkg-query -W -f '${Version}' %s" % package) == VERSION
    assert host.check_output("dpkg --get-selections %s" % package).split()[-1] == "hold"


def test_repository_trusted_only_through_its_key(host):
    source = host.file("/etc/apt/sources.list.d/nvidia-container-toolkit.list").content_string
    assert re.search(r"^deb \[signed-by=/etc/apt/keyrings/nvidia-container-toolkit\.asc\] http://\S+/stable/deb/\$\(ARCH\) /$",
                     source, re.M), source
    assert "BEGIN PGP PUBLIC KEY BLOCK" in host.file("/etc/apt/keyrings/nvidia-container-toolkit.asc").content_string


def test_container_gpu_check_refuses_a_host_without_gpus(host):
    name = host.backend.hostname
    result = subprocess.run(
        ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], "--limit", name,
         os.path.join(SCENARIO, "verify_gpu_check.yml")], capture_output=True, text=True, check=False)
    out = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0
    assert "a container does not see the GPUs" in out and "docker run --rm --gpus all" in out
    assert re.search(r"changed=0\s+unreachable=0\s+failed=1", result.stdout), result.stdout[-2000:]
