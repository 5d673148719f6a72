#!/usr/bin/env python
"""Probe every route a vLLM server lists in its own /openapi.json, without an API key, as an attacker on the
same network would, and report every 2xx answer that is not on the allow-list.

Used by the security tests of the default and fleet Molecule scenarios and of the full deployment
(tests/integration/test_security.py). It runs inside a throw-away container on the test hosts' network (the
hosts' image has Python), so it sees exactly what another machine on that network sees:

    docker run --rm --network NET -v DIR:/probe:ro IMAGE python3 /probe/security_probe.py \
        --openapi /probe/openapi.json --model tiny http://HOST:8000 http://HOST:18000 ...

Each POST route is tried with the bodies that make vLLM's generation routes run the model (a chat, a
completion, a scoring request), so a route that runs the model without the key answers 2xx here. Prints one
JSON document (every request's status, the violations) and exits 1 when there is a violation.
Standard library only.
"""
import argparse
import json
import re
import socket
import sys
import urllib.error
import urllib.request

# What may answer 2xx without a key: the liveness probe (balancers and systemd use it).
DEFAULT_ALLOW = ("GET /health",)
# Routes that change the server's state or stop it: probed with GET only if they accept it, never POSTed
# (a probe must not take down what it checks; whether they are reachable shows in their GET/405/404 answer).
NEVER_POST = re.compile(r"^/(pause|resume|sleep|wake_up|scale_elastic_ep|reset_prefix_cache|reset_mm_cache|"
                        r"collective_rpc|start_profile|stop_profile|abort_requests|update_weights|"
                        r"init_weight_transfer|is_paused|load_lora_adapter|unload_lora_adapter)")


# Routes vLLM serves but leaves out of its OpenAPI document (include_in_schema=False or FastAPI's own):
# probed as well, GET only (the state-changing ones are in NEVER_POST).
HIDDEN_ROUTES = [("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/redoc"), ("GET", "/server_info"),
                 ("GET", "/is_paused"), ("GET", "/is_sleeping"), ("GET", "/get_world_size"),
                 ("POST", "/pause"), ("POST", "/scale_elastic_ep"), ("POST", "/reset_prefix_cache")]


def routes(openapi):
    """[(METHOD, path)] of an OpenAPI document plus HIDDEN_ROUTES, path parameters filled with a harmless value."""
    found = [route for route in HIDDEN_ROUTES if route[1] not in (openapi or {}).get("paths", {})]
    for path, item in sorted((openapi or {}).get("paths", {}).items()):
        concrete = re.sub(r"\{[^}]+\}", "x", path)
        for method in sorted(item):
            if method.lower() in ("get", "post", "put", "delete", "patch"):
                found.append((method.upper(), concrete))
    return found


def bodies(model):
    """Request bodies that make vLLM's routes run the model (chat, completion, scoring, tokenize)."""
    chat = {"model": model, "messages": [{"role": "user", "content": "Say hello"}], "max_tokens": 2}
    completion = {"model": model, "prompt": "Hello", "max_tokens": 2}
    scoring = {"model": model, "query": "Hello", "items": ["world"], "label_token_ids": [1, 2],
               "text_1": "Hello", "text_2": "world", "input": "Hello", "documents": ["world"]}
    return [chat, completion, scoring, {}]


def request(base, method, path, body=None, timeout=20):
    """HTTP status of one request without credentials; 0 when nothing answers (refused, reset, timeout)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base.rstrip("/") + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            resp.read(65536)
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code
    except (urllib.error.URLError, socket.timeout, ConnectionError, OSError):
        return 0


def probe(targets, route_list, model, allow=DEFAULT_ALLOW, timeout=20, send=request):
    """Every (target, method, path[, body]) tried; returns {results, violations, reachable_targets}."""
    results = []
    for base in targets:
        if send(base, "GET", "/health", timeout=timeout) == 0 and send(base, "GET", "/", timeout=timeout) == 0:
            results.append({"target": base, "method": "GET", "path": "/health", "status": 0})
            continue  # nothing listens there: every route is unreachable
        for method, path in route_list:
            if method != "POST":
                results.append({"target": base, "method": method, "path": path,
                                "status": send(base, method, path, timeout=timeout)})
                continue
            if NEVER_POST.match(path):
                # Whether the route is reachable at all, without changing anything: the method is wrong.
                results.append({"target": base, "method": "GET", "path": path,
                                "status": send(base, "GET", path, timeout=timeout)})
                continue
            for index, body in enumerate(bodies(model)):
                status = send(base, method, path, body, timeout=timeout)
                results.append({"target": base, "method": method, "path": path, "body": index, "status": status})
                if 200 <= status < 300:
                    break
    allowed = set(allow)
    violations = [r for r in results if 200 <= r["status"] < 300 and "%s %s" % (r["method"], r["path"]) not in allowed]
    reachable = sorted({r["target"] for r in results if r["status"] != 0})
    return {"requests": len(results), "results": results, "violations": violations, "reachable_targets": reachable}


def run_in_container(network, image, openapi, targets, model, timeout_s=900):
    """Run this probe in a throw-away container of IMAGE on docker network NETWORK (the controller side).

    openapi: the server's OpenAPI document (a dict). Returns the probe's report (a dict).
    """
    import os
    import shutil
    import subprocess
    import tempfile
    workdir = tempfile.mkdtemp(prefix="llmfleet-probe-")
    try:
        shutil.copy(os.path.abspath(__file__), os.path.join(workdir, "security_probe.py"))
        with open(os.path.join(workdir, "openapi.json"), "w") as fh:
            json.dump(openapi, fh)
        os.chmod(workdir, 0o755)
        run = subprocess.run(
            ["docker", "run", "--rm", "--network", network, "--volume", "%s:/probe:ro" % workdir,
             "--entrypoint", "python3", image, "/probe/security_probe.py", "--openapi", "/probe/openapi.json",
             "--model", model] + list(targets),
            capture_output=True, text=True, timeout=timeout_s, check=False)
        if run.returncode not in (0, 1):
            raise RuntimeError("the probe container failed (%d): %s" % (run.returncode, run.stderr[-2000:]))
        return json.loads(run.stdout)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def route_table(report):
    """'METHOD /path -> status' lines (one per route, the first target's answers), for docs and notes."""
    lines = []
    seen = set()
    for result in report["results"]:
        key = (result["target"], result["method"], result["path"])
        if key in seen:
            continue
        seen.add(key)
        statuses = [r["status"] for r in report["results"] if (r["target"], r["method"], r["path"]) == key]
        lines.append("%s %s %s -> %s" % (result["target"], result["method"], result["path"],
                                         "/".join(str(s) for s in statuses)))
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--openapi", required=True, help="the server's /openapi.json, saved to a file")
    parser.add_argument("--model", default="tiny", help="served model name to put in request bodies")
    parser.add_argument("--allow", action="append", default=None, help='"METHOD /path" allowed to answer 2xx')
    parser.add_argument("--timeout", type=float, default=20)
    parser.add_argument("targets", nargs="+", help="base URLs, e.g. http://10.0.0.5:8000")
    args = parser.parse_args(argv)
    with open(args.openapi) as fh:
        route_list = routes(json.load(fh))
    report = probe(args.targets, route_list, args.model, tuple(args.allow or DEFAULT_ALLOW), args.timeout)
    report["routes"] = len(route_list)
    json.dump(report, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 1 if report["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
