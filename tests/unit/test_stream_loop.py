"""tests/fleet/stream_loop.py against a TEST DOUBLE of a streaming OpenAI endpoint: what counts as ok, cut, failed."""
import http.server
import json
import os
import sys
import threading

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fleet"))
from stream_loop import StreamLoop  # noqa: E402


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    mode = "ok"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.server.mode == "refuse":
            self.send_response(503)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        n = body["max_tokens"] if self.server.mode != "short" else body["max_tokens"] - 1
        for i in range(n):
            if self.server.mode == "cut" and i == 3:
                return  # the connection closes mid-stream
            last = i == n - 1
            chunk = {"choices": [{"delta": {"content": "x"}, "finish_reason": "length" if last else None}]}
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        usage = {"choices": [], "usage": {"completion_tokens": n}}
        self.wfile.write(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")


@pytest.fixture
def server():
    s = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    yield s
    s.shutdown()


@pytest.mark.parametrize("mode,outcome", [("ok", "ok"), ("cut", "cut"), ("short", "cut"), ("refuse", "failed")])
def test_each_stream_is_judged_by_how_it_ends(server, mode, outcome):
    server.mode = mode
    loop = StreamLoop("http://127.0.0.1:%d/v1" % server.server_address[1], "tiny", "k", max_tokens=12, timeout=5)
    assert loop.one()[0] == outcome


def test_stop_lets_streams_finish_and_sums_up(server):
    loop = StreamLoop("http://127.0.0.1:%d/v1" % server.server_address[1], "tiny", workers=2, max_tokens=20,
                      max_seconds=0.3, timeout=5).start()
    summary = loop.stop()
    assert summary["streams"] >= 2 and summary["ok"] == summary["streams"] and summary["cut"] == 0
