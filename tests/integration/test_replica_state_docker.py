"""llmfleet.vllm.replica_state against the real Docker engine: what it reads of each replica's container, the
one-shot /health read of running replicas, the state files it returns.

Real containers of the test bed's host image (MOLECULE_HOST_IMAGE, Debian 12 with python3), named with a prefix of
this test run (the module's container_prefix), each publishing its port 8000 on a loopback port Docker picks:
  a  answers /health 200          b  answers /health 503 (an engine that is down)
  c  runs, nothing listens         d  created, never started (its desired port is held by this test's own server)
The containers log every request they get, so `docker logs` counts how often the module asked. Needs `make testbed`
(the host image); about 10 s.
"""
import os
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reliability_common import docker, load_env, local_image_id, module_result  # noqa: E402

IMAGE = os.environ.get("MOLECULE_HOST_IMAGE") or load_env().get("MOLECULE_HOST_IMAGE", "")


pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not local_image_id(IMAGE), reason="needs `make testbed` (the host image MOLECULE_HOST_IMAGE: %r)"
                       % IMAGE),
]

# A replica's /health: the status given as its argument; every request is logged to stderr (BaseHTTPRequestHandler).
HEALTH_SERVER = (
    "import sys\n"
    "from http.server import BaseHTTPRequestHandler, HTTPServer\n"
    "class Health(BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        self.send_response(int(sys.argv[1]) if self.path == '/health' else 404)\n"
    "        self.end_headers()\n"
    "HTTPServer(('0.0.0.0', 8000), Health).serve_forever()\n"
)


class Counting(BaseHTTPRequestHandler):
    """Another process's listener on a replica's desired port: answers 200 and counts what it is asked."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.server.asked += 1
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def health_requests(name):
    logs = docker("logs", name)
    return (logs.stdout + logs.stderr).count('"GET /health ')


def wait_listening(port, timeout=60):
    """Until the container's server answers (a path other than /health, so the count stays 0)."""
    end = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/ready" % port, timeout=2)
        except urllib.error.HTTPError:
            return
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.2)


@pytest.fixture(scope="module")
def replicas():
    prefix = "llmfleet-it-rs-%s-" % uuid.uuid4().hex[:10]
    started = time.time()
    other = HTTPServer(("127.0.0.1", 0), Counting)
    other.asked = 0
    threading.Thread(target=other.serve_forever, daemon=True).start()
    publish = ["-p", "127.0.0.1::8000"]
    try:
        for name, status in (("a", "200"), ("b", "503")):
            docker("run", "-d", "--name", prefix + name, *publish, IMAGE, "python3", "-u", "-c", HEALTH_SERVER, status)
        docker("run", "-d", "--name", prefix + "c", *publish, IMAGE, "sleep", "infinity")
        docker("create", "--name", prefix + "d", *publish, IMAGE, "python3", "-u", "-c", HEALTH_SERVER, "200")
        ports = dict((name, int(docker("port", prefix + name, "8000/tcp").stdout.split(":")[-1]))
                     for name in ("a", "b", "c"))
        ports["d"] = other.server_address[1]
        wait_listening(ports["a"])
        wait_listening(ports["b"])
        yield {"prefix": prefix, "ports": ports, "other": other, "started": started}
    finally:
        other.shutdown()
        ids = docker("ps", "--all", "--quiet", "--filter", "name=^" + prefix, check=False).stdout.split()
        if ids:
            docker("rm", "--force", "--volumes", *ids, check=False)


def state(replicas, tmp_path, names, **extra):
    args = dict(replicas=[dict(name=n, port=replicas["ports"][n]) for n in names],
                container_prefix=replicas["prefix"], config_dir=str(tmp_path), unit_file=str(tmp_path / "unit"))
    args.update(extra)
    result = module_result("llmfleet.vllm.replica_state", args, tmp_path)
    assert not result.get("failed"), result
    return dict((r["name"], r) for r in result["replicas"]), result


def test_running_replicas_are_asked_for_health_once_and_state_files_are_returned(replicas, tmp_path):
    prefix = replicas["prefix"]
    before = dict((n, health_requests(prefix + n)) for n in ("a", "b"))
    record = tmp_path / ".llmfleet-images"
    record.write_text("abc\ndef\n")
    found, result = state(replicas, tmp_path, ["a", "b", "c", "d"], health_base="http://127.0.0.1:",
                          health_timeout=2, read_files=[str(record), str(tmp_path / "missing")])

    # 200 and 503 are what the replicas answered; a running container where nothing listens gives null, and a
    # replica whose container is not running is not asked at all (whatever answers at its port).
    assert dict((n, r["health"]) for n, r in found.items()) == {"a": 200, "b": 503, "c": None, "d": None}
    assert dict((n, health_requests(prefix + n) - before[n]) for n in ("a", "b")) == {"a": 1, "b": 1}
    assert replicas["other"].asked == 0
    assert result["files"] == {str(record): "abc\ndef\n", str(tmp_path / "missing"): None}

    # What Docker says of each container, and so who holds each replica's port.
    for name in ("a", "b", "c"):
        container = found[name]["container"]
        assert container["exists"] and container["running"], (name, container)
        assert container["ports"] == [replicas["ports"][name]], (name, container)
        assert replicas["started"] - 5 <= container["created"] <= time.time(), (name, container)
        assert found[name]["port_holder"] == "self", found[name]
    assert found["d"]["container"]["exists"] and not found["d"]["container"]["running"]
    assert found["d"]["container"]["ports"] == []
    assert found["d"]["port_holder"] == "other"   # this test's server, not a container of ours
    # No unit llmfleet-vllm@<name>.service on this machine: none of them is up.
    assert [found[n]["up"] for n in ("a", "b", "c", "d")] == [False] * 4


def test_health_is_not_asked_without_a_base(replicas, tmp_path):
    name = replicas["prefix"] + "a"
    before = health_requests(name)
    found, result = state(replicas, tmp_path, ["a"])
    assert found["a"]["container"]["running"] and found["a"]["health"] is None
    assert health_requests(name) == before
    assert result["files"] == {}


def test_containers_of_another_prefix_are_not_this_replicas(replicas, tmp_path):
    found, result = state(replicas, tmp_path, ["a"], container_prefix=replicas["prefix"] + "x-")
    assert found["a"]["container"] == {"exists": False, "running": False, "created": None, "ports": []}
    # Its port is held by a container that is not one of this prefix's: another process, to this replica.
    assert found["a"]["port_holder"] == "other"
