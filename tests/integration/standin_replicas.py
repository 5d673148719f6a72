"""TEST DOUBLE for vLLM replicas (and hosts' edges) behind HAProxy in tests/integration/test_model_routing*.py: one
python http.server per "name:port" argument, on loopback. GET answers its name and path; POST its name, the "model"
it read, the body's size and the Authorization it was sent. A stand-in named edge-* refuses a POST without a bearer
key (401), as a host's edge does.
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def handler(name):
    class Replica(BaseHTTPRequestHandler):
        def _send(self, code, doc):
            body = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._send(200, {"served_by": name, "path": self.path})

        def do_POST(self):
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            # A host's edge checks the key: the balancer's health check must carry one.
            if name.startswith("edge-") and not (self.headers.get("Authorization") or "").startswith("Bearer "):
                return self._send(401, {"error": "no key"})
            try:
                model = json.loads(raw).get("model")
            except ValueError:
                model = None
            return self._send(200, {"served_by": name, "model": model, "bytes": len(raw),
                                    "authorization": self.headers.get("Authorization")})

        def log_message(self, *args):
            pass
    return Replica


def main(specs):
    for spec in specs:
        name, port = spec.split(":")
        server = ThreadingHTTPServer(("127.0.0.1", int(port)), handler(name))
        threading.Thread(target=server.serve_forever, daemon=True).start()
    threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1:])
