"""The route probe the security tests run against every deployment (tests/security_probe.py)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import security_probe as P  # noqa: E402

OPENAPI = {"paths": {
    "/health": {"get": {}},
    "/v1/models": {"get": {}},
    "/v1/chat/completions": {"post": {}},
    "/invocations": {"post": {}},
    "/pause": {"post": {}},
    "/v1/models/{model_id}": {"get": {}, "delete": {}},
}}


def server(open_routes):
    """A fake server: 2xx on open_routes (METHOD /path, POST only with a chat body), 401 on /v1, else 404."""
    calls = []

    def send(base, method, path, body=None, timeout=20):
        calls.append((base, method, path, body))
        if base.endswith(":1"):
            return 0
        if "%s %s" % (method, path) in open_routes and (method != "POST" or (body or {}).get("messages")):
            return 200
        return 401 if path.startswith("/v1") else 404
    return send, calls


def test_routes_fill_path_parameters_and_keep_every_method():
    assert ("GET", "/v1/models/x") in P.routes(OPENAPI)
    assert ("DELETE", "/v1/models/x") in P.routes(OPENAPI)
    # /pause is in the document: the hidden list does not add it twice.
    assert len(P.routes(OPENAPI)) == 7 + len(P.HIDDEN_ROUTES) - 1
    assert ("GET", "/openapi.json") in P.routes(OPENAPI)


def test_a_route_that_runs_the_model_without_the_key_is_a_violation():
    send, _unused = server({"GET /health", "POST /invocations"})
    report = P.probe(["http://h:8000"], P.routes(OPENAPI), "tiny", send=send)
    assert [(v["method"], v["path"]) for v in report["violations"]] == [("POST", "/invocations")]


def test_health_alone_is_allowed_and_state_changing_routes_are_never_posted():
    send, calls = server({"GET /health"})
    report = P.probe(["http://h:8000"], P.routes(OPENAPI), "tiny", send=send)
    assert report["violations"] == []
    assert not [c for c in calls if c[2] == "/pause" and c[1] == "POST"]


def test_a_target_nothing_listens_on_is_unreachable_not_a_pass_of_every_route():
    send, calls = server({"GET /health", "POST /invocations"})
    report = P.probe(["http://h:1", "http://h:8000"], P.routes(OPENAPI), "tiny", send=send)
    assert report["reachable_targets"] == ["http://h:8000"]
    assert len(report["violations"]) == 1
    assert len([c for c in calls if c[0] == "http://h:1"]) == 2


# ---- the transport probe, against real TLS servers on loopback ---------------------------------------------------
import socket  # noqa: E402
import ssl  # noqa: E402
import threading  # noqa: E402

import pytest  # noqa: E402


def _serve(context, answer=b"HTTP/1.1 200 OK\r\nContent-Length: 14\r\n\r\n{\"choices\":[]}"):
    """A server on loopback that answers every connection (TLS when context is given) with answer; its port."""
    listener = socket.create_server(("127.0.0.1", 0))

    def loop():
        while True:
            conn, _addr = listener.accept()
            try:
                if context is not None:
                    conn = context.wrap_socket(conn, server_side=True)
                conn.recv(65536)
                conn.sendall(answer)
            except (ssl.SSLError, OSError):
                pass
            finally:
                conn.close()
    threading.Thread(target=loop, daemon=True).start()
    return listener.getsockname()[1]


def _server_context(pki, minimum):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki["cert"], pki["key"])
    if minimum is not ssl.TLSVersion.TLSv1_2:
        context.set_ciphers("ALL:@SECLEVEL=0")
    context.minimum_version = minimum
    return context


def test_a_listener_with_tls_1_2_at_least_and_a_certificate_of_the_ca_passes(local_pki):
    port = _serve(_server_context(local_pki, ssl.TLSVersion.TLSv1_2))
    report = P.transport("127.0.0.1", port, local_pki["ca"], "k", "tiny")
    assert report["violations"] == [], report
    assert report["TLSv1.2"]["version"] == "TLSv1.2" and not report["TLSv1"]["ok"] and not report["TLSv1.1"]["ok"]
    assert report["plain_http"] == {"status": 0, "completion": False}


def test_old_tls_a_foreign_certificate_and_plain_http_are_violations(local_pki):
    port = _serve(_server_context(local_pki, ssl.TLSVersion.TLSv1))
    old = P.transport("127.0.0.1", port, local_pki["ca"], "k", "tiny")["violations"]
    if not P.handshake("127.0.0.1", port, local_pki["ca"], ssl.TLSVersion.TLSv1)["ok"]:
        pytest.skip("this machine's OpenSSL cannot speak TLS 1.0 at all")
    assert "TLSv1 was accepted" in old and "TLSv1.1 was accepted" in old
    foreign = P.transport("127.0.0.1", port, local_pki["other_ca"], "k", "tiny")["violations"]
    assert any(v.startswith("default did not verify") for v in foreign), foreign
    plain = P.transport("127.0.0.1", _serve(None), local_pki["ca"], "k", "tiny")
    assert plain["plain_http"] == {"status": 200, "completion": True}
    assert plain["violations"][0].startswith("plain HTTP with a valid key answered")
