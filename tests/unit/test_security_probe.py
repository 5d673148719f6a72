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
