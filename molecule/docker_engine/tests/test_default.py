"""Verify docker_engine on the Molecule host: engine running, foreign daemon.json keys kept."""
import json


def daemon_config(host):
    return json.loads(host.file("/etc/docker/daemon.json").content_string)


def test_dockerd_is_enabled_and_answers(host):
    service = host.service("docker")
    assert service.is_enabled
    assert service.is_running
    server = host.check_output("docker version --format '{{.Server.Version}}'")
    assert server.strip()


def test_foreign_runtime_key_survives(host):
    config = daemon_config(host)
    assert config["runtimes"]["nvidia"] == {"args": [], "path": "nvidia-container-runtime"}
    assert config["default-ulimits"]["memlock"]["Hard"] == -1


def test_collection_keys_are_merged_and_live(host):
    config = daemon_config(host)
    assert config["live-restore"] is True
    assert config["log-opts"]["max-size"] == "100m"
    # dockerd really loaded the merged file (not just wrote it).
    info = json.loads(host.check_output("docker info --format '{{json .}}'"))
    assert info["LiveRestoreEnabled"] is True
    assert "nvidia" in info["Runtimes"]
