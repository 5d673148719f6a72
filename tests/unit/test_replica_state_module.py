"""replica_state through ansible itself: the one-shot /health read of running replicas, the state files it returns,
and the per-unit "up" flag (module_utils.converge.unit_up, also the llmfleet.vllm.unit_up filter)."""
import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from ansible_collections.llmfleet.vllm.plugins.filter.converge import llmfleet_unit_up
from ansible_collections.llmfleet.vllm.plugins.module_utils.converge import unit_up

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSIBLE_BIN = os.path.dirname(sys.executable)


def run(args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="json")
    r = subprocess.run([os.path.join(ANSIBLE_BIN, "ansible"), "localhost", "-c", "local",
                        "-e", "ansible_python_interpreter=%s" % sys.executable,
                        "-m", "llmfleet.vllm.replica_state", "-a", json.dumps(args)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    return json.loads(r.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Health(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(self.server.status if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def health_servers():
    servers = []

    def start(status):
        server = HTTPServer(("127.0.0.1", 0), _Health)
        server.status = status
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server.server_address[1]
    yield start
    for server in servers:
        server.shutdown()


def _fake_docker(tmp_path, containers):
    """A docker CLI double: `ps` lists the containers, `inspect` prints the module's format line for each."""
    lines = []
    for name, (running, port) in containers.items():
        ports = {"8000/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(port)}]} if running else {}
        lines.append("\t".join(json.dumps(v) for v in ["/" + name, "2026-12-01T10:00:00.0Z", running, ports]))
    script = tmp_path / "docker"
    script.write_text("#!/bin/sh\ncase \"$1\" in\n  ps) printf '%s\\n' " + " ".join(containers) + " ;;\n"
                      "  inspect) cat <<'END'\n" + "\n".join(lines) + "\nEND\n ;;\nesac\n")
    script.chmod(0o755)
    return str(script)


def test_running_replicas_are_asked_for_health_once_and_state_files_are_returned(tmp_path, health_servers):
    healthy, starting = health_servers(200), health_servers(503)
    silent = _free_port()
    docker = _fake_docker(tmp_path, {"llmfleet-vllm-a": (True, healthy), "llmfleet-vllm-b": (True, starting),
                                     "llmfleet-vllm-c": (True, silent), "llmfleet-vllm-d": (False, 1)})
    record = tmp_path / ".llmfleet-images"
    record.write_text("abc\ndef\n")
    result = run(dict(replicas=[dict(name="a", port=healthy), dict(name="b", port=starting),
                                dict(name="c", port=silent), dict(name="d", port=_free_port())],
                      docker_bin=docker, config_dir=str(tmp_path), unit_file=str(tmp_path / "unit"),
                      health_base="http://127.0.0.1:", health_timeout=2,
                      read_files=[str(record), str(tmp_path / "missing")]))
    assert not result.get("failed"), result
    health = dict((r["name"], r["health"]) for r in result["replicas"])
    # 200 and 503 are what the replicas answered; nothing listening, and a container that is not running, give null.
    assert health == {"a": 200, "b": 503, "c": None, "d": None}
    assert result["files"] == {str(record): "abc\ndef\n", str(tmp_path / "missing"): None}
    # No systemd unit here: none of them is up.
    assert [r["up"] for r in result["replicas"]] == [False] * 4


def test_health_is_not_asked_without_a_base(tmp_path, health_servers):
    port = health_servers(200)
    docker = _fake_docker(tmp_path, {"llmfleet-vllm-a": (True, port)})
    result = run(dict(replicas=[dict(name="a", port=port)], docker_bin=docker, config_dir=str(tmp_path)))
    assert result["replicas"][0]["health"] is None and result["files"] == {}


@pytest.mark.parametrize("unit, running, up", [
    ({"ActiveState": "active", "SubState": "running", "UnitFileState": "enabled"}, True, True),
    ({"ActiveState": "active", "SubState": "waiting", "UnitFileState": "enabled"}, False, True),   # a timer
    ({"ActiveState": "active", "SubState": "waiting", "UnitFileState": "enabled"}, True, False),
    ({"ActiveState": "activating", "SubState": "start-post", "UnitFileState": "enabled"}, True, False),
    ({"ActiveState": "activating", "SubState": "auto-restart", "UnitFileState": "enabled"}, False, False),
    ({"ActiveState": "active", "SubState": "running", "UnitFileState": "disabled"}, True, False),
    ({"ActiveState": "failed", "SubState": "failed", "UnitFileState": "enabled"}, False, False),
    ({}, False, False),
])
def test_unit_up(unit, running, up):
    assert unit_up(unit, running=running) is up
    assert llmfleet_unit_up(unit, running=running) is up


def test_unit_up_filter_takes_no_unit_and_refuses_other_input():
    from ansible.errors import AnsibleFilterError
    assert llmfleet_unit_up(None) is False
    with pytest.raises(AnsibleFilterError):
        llmfleet_unit_up("active")
