"""The openai_smoke module end to end (through ansible's open_url) against a small OpenAI-compatible double."""
import json
import os
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


class Handler(BaseHTTPRequestHandler):
    """TEST DOUBLE of vLLM's OpenAI server: /v1/models, /v1/chat/completions (plain and streamed), bearer key "k"."""

    def _authorized(self):
        if self.headers.get("Authorization") == "Bearer k":
            return True
        self.send_response(401)
        self.end_headers()
        self.wfile.write(b'{"error": "missing or invalid API key"}')
        return False

    def _json(self, data):
        body = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 (http.server's name)
        if self._authorized():
            self._json({"data": [{"id": "tiny"}]})

    def do_POST(self):  # noqa: N802
        if not self._authorized():
            return
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not request.get("stream"):
            self._json({"choices": [{"message": {"content": "Hello there"}}]})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for word in ("Hello", " there"):
            self.wfile.write(b"data: " + json.dumps({"choices": [{"delta": {"content": word}}]}).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d/v1" % server.server_address[1]
    server.shutdown()


def smoke(**args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="json")
    r = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-c", "local",
                        "-e", "ansible_python_interpreter=%s" % sys.executable,
                        "-m", "llmfleet.vllm.openai_smoke", "-a", json.dumps(args)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    return json.loads(r.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def test_a_serving_endpoint_passes_with_its_reply_and_time_to_first_token(endpoint):
    result = smoke(base_url=endpoint, model="tiny", api_key="k")
    assert not result.get("failed"), result
    assert result["models"] == ["tiny"] and result["chat_reply"] == "Hello there"
    assert result["stream_chunks"] == 2 and result["ttft_ms"] >= 0


def test_a_wrong_key_and_a_wrong_model_name_fail_with_the_reason(endpoint):
    result = smoke(base_url=endpoint, model="tiny", api_key="wrong")
    assert result["failed"] and "HTTP 401" in result["msg"] and "API key" in result["msg"]
    result = smoke(base_url=endpoint, model="other", api_key="k")
    assert result["failed"] and "tiny" in result["msg"]


def test_nothing_listening_says_so():
    result = smoke(base_url="http://127.0.0.1:9/v1", model="tiny")
    assert result["failed"] and "is the replica running and listening?" in result["msg"]


@pytest.fixture(scope="module")
def tls_endpoint(local_pki):
    """The same TEST DOUBLE behind TLS, with a certificate for 127.0.0.1 signed by a test CA."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(local_pki["cert"], local_pki["key"])
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "https://127.0.0.1:%d/v1" % server.server_address[1]
    server.shutdown()


def test_an_https_endpoint_is_verified_against_the_ca_given(tls_endpoint, local_pki):
    result = smoke(base_url=tls_endpoint, model="tiny", api_key="k", ca_path=local_pki["ca"])
    assert not result.get("failed"), result
    assert result["chat_reply"] == "Hello there"
    # Another CA (or none: the system's) does not vouch for it: the smoke test fails, it never skips the check.
    for ca in (local_pki["other_ca"], ""):
        result = smoke(base_url=tls_endpoint, model="tiny", api_key="k", ca_path=ca)
        assert result["failed"] and "CERTIFICATE_VERIFY_FAILED" in result["msg"], result
