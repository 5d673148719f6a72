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
import ssl
import sys
import time
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


def _docker_probe(docker_args, files, probe_args, timeout_s, detach=False):
    """Run this probe with python3 in a container: docker_args before the image (the image last), files
    ({name: text}) beside the probe under /probe (0644; a directory removed afterwards). Returns the parsed report,
    or {id, workdir} when detach (capture_result removes both)."""
    import os
    import shutil
    import subprocess
    import tempfile
    workdir = tempfile.mkdtemp(prefix="llmfleet-probe-")
    try:
        shutil.copy(os.path.abspath(__file__), os.path.join(workdir, "security_probe.py"))
        for name, text in files.items():
            with open(os.path.join(workdir, name), "w") as fh:
                fh.write(text)
            os.chmod(os.path.join(workdir, name), 0o644)
        os.chmod(workdir, 0o755)
        cmd = (["docker", "run"] + (["-d"] if detach else ["--rm"]) + ["--volume", "%s:/probe:ro" % workdir,
               "--entrypoint", "python3"] + docker_args + ["/probe/security_probe.py"] + probe_args)
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
        if detach:
            # The capture reads its files at start; wait until it has.
            time.sleep(3)
            return {"id": run.stdout.strip(), "workdir": workdir}
        if run.returncode not in (0, 1):
            raise RuntimeError("the probe container failed (%d): %s" % (run.returncode, run.stderr[-2000:]))
        return json.loads(run.stdout)
    finally:
        if not detach:
            shutil.rmtree(workdir, ignore_errors=True)


def run_in_container(network, image, openapi, targets, model, timeout_s=900, ca_pem=None):
    """Run the route probe in a throw-away container of IMAGE on docker network NETWORK (the controller side).

    openapi: the server's OpenAPI document (a dict); ca_pem: the CA https:// targets are verified against.
    Returns the probe's report (a dict).
    """
    files = {"openapi.json": json.dumps(openapi)}
    args = ["--openapi", "/probe/openapi.json", "--model", model]
    if ca_pem:
        files["ca.crt"] = ca_pem
        args += ["--cafile", "/probe/ca.crt"]
    return _docker_probe(["--network", network, image], files, args + list(targets), timeout_s)


def transport_in_container(network, image, targets, ca_pem, key, model, timeout_s=300):
    """The transport probe (plain HTTP with the key, TLS 1.0/1.1, verification) of targets (HOST:PORT) from a
    throw-away container on NETWORK. The key reaches it in a file, never on a command line."""
    return _docker_probe(["--network", network, image], {"ca.crt": ca_pem, "key": key},
                         ["--transport", "--cafile", "/probe/ca.crt", "--key-file", "/probe/key", "--model", model]
                         + list(targets), timeout_s)


def chat_in_container(network, image, targets, ca_pem, key, model, timeout_s=300):
    """One chat with the key over TLS (verified against the CA) to each of targets (HOST:PORT), from a throw-away
    container on NETWORK; the key reaches it in a file."""
    return _docker_probe(["--network", network, image], {"ca.crt": ca_pem, "key": key},
                         ["--chat", "--cafile", "/probe/ca.crt", "--key-file", "/probe/key", "--model", model]
                         + list(targets), timeout_s)


def start_capture(container, image, key, seconds):
    """Start capturing every frame of CONTAINER's network interface (its network namespace, on the test network)
    for seconds, in a container of IMAGE with CAP_NET_RAW; returns what capture_result takes."""
    return _docker_probe(["--network", "container:%s" % container, "--cap-add", "NET_RAW", image], {"key": key},
                         ["--capture", str(seconds), "--key-file", "/probe/key"], 60, detach=True)


def capture_result(started, timeout_s=120):
    """Wait for a capture started by start_capture and return its report ({frames, bytes, found}); the container
    and its files (the key) are removed."""
    import shutil
    import subprocess
    try:
        subprocess.run(["docker", "wait", started["id"]], capture_output=True, timeout=timeout_s, check=True)
        out = subprocess.run(["docker", "logs", started["id"]], capture_output=True, text=True, check=True).stdout
        return json.loads(out)
    finally:
        subprocess.run(["docker", "rm", "-f", started["id"]], capture_output=True, check=False)
        shutil.rmtree(started["workdir"], ignore_errors=True)


# ---- transport: what an outsider on the network sees of a listener that should speak TLS only -------------------
OLD_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1}


def handshake(host, port, cafile, version=None, server_name=None, timeout=10):
    """A TLS handshake verified against cafile (hostname included), pinned to version when given. The client
    offers every cipher at OpenSSL security level 0, so that a refusal of TLS 1.0/1.1 is the server's, not this
    client's own policy. Returns {ok, version, error}."""
    ctx = ssl.create_default_context(cafile=cafile)
    if version is not None:
        ctx.set_ciphers("ALL:@SECLEVEL=0")
        ctx.minimum_version = ctx.maximum_version = version
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as raw:
            with ctx.wrap_socket(raw, server_hostname=server_name or host) as tls:
                return {"ok": True, "version": tls.version(), "error": ""}
    except (ssl.SSLError, ssl.CertificateError, OSError) as exc:
        return {"ok": False, "version": "", "error": "%s: %s" % (type(exc).__name__, exc)}


def plain_http(host, port, path, key, body, timeout=10):
    """A request in clear (no TLS) to a port that should speak TLS, with a valid key: the status line's code and
    whether a completion came back (0, False when the server only closed or reset the connection)."""
    data = json.dumps(body).encode()
    head = ("POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\nConnection: close\r\n\r\n" % (path, host, key, len(data))).encode()
    answer = b""
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as sock:
            sock.sendall(head + data)
            while len(answer) < 65536:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                answer += chunk
    except OSError:
        pass
    match = re.match(rb"HTTP/1\.[01] (\d{3})", answer)
    return {"status": int(match.group(1)) if match else 0, "completion": b'"choices"' in answer}


def tls_chat(host, port, cafile, key, model, timeout=120):
    """A chat with the key over TLS, verified against cafile: {status, completion}."""
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "Say hello"}], "max_tokens": 4})
    req = urllib.request.Request("https://%s:%s/v1/chat/completions" % (host, port), data=body.encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
    context = ssl.create_default_context(cafile=cafile)
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
            return {"status": resp.status, "completion": bool(json.loads(resp.read()).get("choices"))}
    except urllib.error.HTTPError as err:
        return {"status": err.code, "completion": False}
    except (urllib.error.URLError, OSError) as exc:
        return {"status": 0, "completion": False, "error": str(exc)}


def transport(host, port, cafile, key, model, server_name=None):
    """The outsider's view of one TLS listener: plain HTTP with a valid key gets no completion, TLS 1.0 and 1.1
    are refused, TLS 1.2 and the default handshake verify against the CA. Returns the answers and the violations."""
    chat = {"model": model, "messages": [{"role": "user", "content": "Say hello"}], "max_tokens": 2}
    report = {"target": "%s:%s" % (host, port), "plain_http": plain_http(host, port, "/v1/chat/completions", key, chat),
              "default": handshake(host, port, cafile, None, server_name),
              "TLSv1.2": handshake(host, port, cafile, ssl.TLSVersion.TLSv1_2, server_name)}
    for name, version in OLD_VERSIONS.items():
        report[name] = handshake(host, port, cafile, version, server_name)
    violations = []
    if report["plain_http"]["completion"] or 200 <= report["plain_http"]["status"] < 300:
        violations.append("plain HTTP with a valid key answered %s" % report["plain_http"])
    violations += ["%s was accepted" % n for n in OLD_VERSIONS if report[n]["ok"]]
    violations += ["%s did not verify: %s" % (n, report[n]["error"]) for n in ("default", "TLSv1.2") if not report[n]["ok"]]
    report["violations"] = violations
    return report


def capture(seconds, needle, interface="eth0"):
    """Every frame on interface for seconds (an AF_PACKET socket: needs CAP_NET_RAW), searched for needle.
    Returns {frames, bytes, found}."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0003))
    sock.bind((interface, 0))
    sock.settimeout(0.5)
    frames, size, found = 0, 0, False
    tail = b""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            frame = sock.recv(65535)
        except socket.timeout:
            continue
        frames, size = frames + 1, size + len(frame)
        found = found or needle in tail + frame
        tail = frame[-len(needle):]
    sock.close()
    return {"frames": frames, "bytes": size, "found": found}


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
    parser.add_argument("--openapi", help="the server's /openapi.json, saved to a file (the route probe)")
    parser.add_argument("--model", default="tiny", help="served model name to put in request bodies")
    parser.add_argument("--allow", action="append", default=None, help='"METHOD /path" allowed to answer 2xx')
    parser.add_argument("--timeout", type=float, default=20)
    parser.add_argument("--transport", action="store_true", help="probe the targets' TLS (HOST:PORT each) instead")
    parser.add_argument("--chat", action="store_true", help="one chat with the key over TLS to each target (HOST:PORT)")
    parser.add_argument("--capture", type=float, default=0, help="capture frames for this many seconds instead")
    parser.add_argument("--cafile", help="the CA the TLS listeners are verified against")
    parser.add_argument("--key-file", help="a file holding the API key (never on the command line)")
    parser.add_argument("targets", nargs="*", help="base URLs, e.g. http://10.0.0.5:8000")
    args = parser.parse_args(argv)
    if args.transport or args.capture or args.chat:
        return _main_transport(args)
    if args.cafile:
        # https:// targets are verified against the fleet's CA (hostname included).
        context = ssl.create_default_context(cafile=args.cafile)
        urllib.request.install_opener(urllib.request.build_opener(urllib.request.HTTPSHandler(context=context)))
    with open(args.openapi) as fh:
        route_list = routes(json.load(fh))
    report = probe(args.targets, route_list, args.model, tuple(args.allow or DEFAULT_ALLOW), args.timeout)
    report["routes"] = len(route_list)
    json.dump(report, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 1 if report["violations"] else 0


def _main_transport(args):
    with open(args.key_file) as fh:
        key = fh.read().strip()
    if args.capture:
        report = capture(args.capture, key.encode())
    elif args.chat:
        chats = [tls_chat(t.rsplit(":", 1)[0], t.rsplit(":", 1)[1], args.cafile, key, args.model) for t in args.targets]
        report = {"chats": chats, "violations": ["no completion over TLS: %s" % c for c in chats if not c["completion"]]}
    else:
        reports = [transport(t.rsplit(":", 1)[0], t.rsplit(":", 1)[1], args.cafile, key, args.model) for t in args.targets]
        report = {"targets": reports, "violations": [v for r in reports for v in r["violations"]]}
    json.dump(report, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 1 if report.get("violations") else 0


if __name__ == "__main__":
    sys.exit(main())
