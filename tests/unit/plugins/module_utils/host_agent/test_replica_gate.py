# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""roles/vllm_server/files/wait-healthy (llmfleet_host.replica_gate, installed as the role does): the start gate
waits for /health, then sends the warm-up completion.

The replica is a local HTTP server that answers /health and /v1/completions and records what it got; docker is a
TEST DOUBLE (`docker inspect` answers "true": the container runs). The real behaviour (the CPU engine that dies on a
short first forward pass) is exercised by tests/integration/test_watchdog.py against a real engine.
"""
import http.server
import json
import os
import subprocess
import sys
import threading


class Replica(http.server.BaseHTTPRequestHandler):
    seen = []
    completion_status = 200

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.seen.append(("GET", self.path, None, None))
        self.send_response(200)
        self.end_headers()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append(("POST", self.path, self.headers.get("Authorization"), body))
        self.send_response(self.completion_status)
        self.end_headers()
        self.wfile.write(b'{"choices": [{"text": "x"}]}')


def run(tmp_path, host_install, tokens, status=200, env_text="VLLM_API_KEY='s3cr3t key'\n"):
    Replica.seen = []
    Replica.completion_status = status
    server = http.server.HTTPServer(("127.0.0.1", 0), Replica)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    docker = bindir / "docker"
    docker.write_text("#!/bin/sh\n# TEST DOUBLE of docker: the container runs.\necho true\n")
    docker.chmod(0o755)
    env_file = tmp_path / "vllm-0.env"
    env_file.write_text(env_text)
    env = dict(os.environ, PATH="%s:%s" % (bindir, os.environ["PATH"]), LLMFLEET_WARMUP_TOKENS=str(tokens),
               LLMFLEET_SERVED_MODEL="tiny")
    try:
        gate = str(host_install(tmp_path / "libexec") / "wait-healthy")
        r = subprocess.run([sys.executable, gate, "http://127.0.0.1:%d/health" % server.server_port,
                            "llmfleet-vllm-0", str(env_file)], capture_output=True, text=True, env=env,
                           timeout=60, check=False)
    finally:
        server.shutdown()
    return r, Replica.seen


def test_warm_up_completion_after_health_with_the_api_key(tmp_path, host_install):
    r, seen = run(tmp_path, host_install, 128)
    assert r.returncode == 0, r.stderr
    assert [s[:2] for s in seen] == [("GET", "/health"), ("POST", "/v1/completions")]
    _method, _path, auth, body = seen[1]
    assert auth == "Bearer s3cr3t key"
    assert body["model"] == "tiny" and body["max_tokens"] == 1 and len(body["prompt"].split()) == 128
    assert "warm-up completion (128 prompt tokens) answered 200" in r.stdout


def test_no_warm_up_when_zero(tmp_path, host_install):
    r, seen = run(tmp_path, host_install, 0)
    assert r.returncode == 0, r.stderr
    assert [s[:2] for s in seen] == [("GET", "/health")]


def test_an_http_refusal_of_the_warm_up_does_not_fail_a_running_replica(tmp_path, host_install):
    r, seen = run(tmp_path, host_install, 128, status=400, env_text="")
    assert r.returncode == 0
    assert seen[1][2] is None  # no key in the env file: no Authorization header
    assert "answered HTTP 400" in r.stderr
