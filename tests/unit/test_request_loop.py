"""The bounded request loop counts what a client would see as failures, and stops at its bounds."""
import http.server
import json
import os
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fleet"))
from request_loop import RequestLoop  # noqa: E402


class Handler(http.server.BaseHTTPRequestHandler):
    # Per-server behaviour: a list of what each successive request gets ("ok", "500", "empty", "drop").
    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length))
        server = self.server
        with server.lock:
            server.seen.append((self.path, self.headers.get("Authorization"), body["model"]))
            server.bodies.append(body)
            action = server.script[(len(server.seen) - 1) % len(server.script)]
        if action == "drop":
            self.close_connection = True
            self.wfile.flush()
            self.connection.shutdown(2)
            return
        if action == "500":
            self.send_response(500)
            self.end_headers()
            return
        text = "" if action == "empty" else "hello"
        data = json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.lock = threading.Lock()
    httpd.seen = []
    httpd.bodies = []
    httpd.script = ["ok"]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()


def base(server):
    return "http://127.0.0.1:%d/v1" % server.server_address[1]


def test_all_good_requests_count_as_ok_and_carry_key_and_model(server):
    summary = RequestLoop(base(server), "tiny", api_key="k1", max_requests=12, max_seconds=30, workers=3).run()
    assert (summary["sent"], summary["ok"], summary["failed"]) == (12, 12, 0)
    assert set(server.seen) == {("/v1/chat/completions", "Bearer k1", "tiny")}
    # Deterministic replies of exactly max_tokens tokens: an empty one can only be a fault.
    assert all(b["temperature"] == 0 and b["ignore_eos"] is True and b["max_tokens"] == 8 for b in server.bodies)


def test_errors_empty_replies_and_dropped_connections_are_failures(server):
    server.script = ["ok", "500", "empty", "drop"]
    summary = RequestLoop(base(server), "tiny", max_requests=8, max_seconds=30, workers=1).run()
    assert (summary["sent"], summary["ok"], summary["failed"]) == (8, 2, 6)
    assert summary["errors"]["HTTP 500"] == 2
    assert summary["errors"]["ValueError"] == 2
    assert sum(summary["errors"].values()) == 6


def test_refused_connection_is_a_failure():
    summary = RequestLoop("http://127.0.0.1:9/v1", "tiny", max_requests=3, max_seconds=10, timeout=2).run()
    assert (summary["sent"], summary["failed"]) == (3, 3)


def test_time_bound_stops_the_loop(server):
    started = time.monotonic()
    summary = RequestLoop(base(server), "tiny", max_requests=10 ** 6, max_seconds=1.0, workers=2, pause=0.05).run()
    assert time.monotonic() - started < 3
    assert 0 < summary["sent"] < 10 ** 6 and summary["failed"] == 0


def test_stop_ends_a_running_loop(server):
    loop = RequestLoop(base(server), "tiny", max_requests=10 ** 6, max_seconds=600, pause=0.05).start()
    time.sleep(0.5)
    summary = loop.stop()
    assert summary["sent"] > 0 and summary["seconds"] < 5
