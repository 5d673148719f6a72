#!/usr/bin/env python
"""What TLS costs one request's time to first token: https through the host's edge against plain HTTP through a
twin of the same edge without TLS, in the same run, from another container on the test network (issue 41).

    .venv/bin/python tests/bench/tls_ttft.py [--host llmfleet-demo] [--requests 20] [--key-file .cache/demo/api_key]

Each twin is the edge's own configuration (/etc/llmfleet/edge.cfg) with its ports moved, run as another HAProxy on
the host for the measurement and stopped after it; the bench checks that nothing but TLS differs. Four variants:

    edge_https     the edge as deployed (TLS)
    twin_http      its twin without TLS: the acceptance's pair with edge_https (same configuration bar TLS)
    nodelay_https  a twin with TLS and `option http-no-delay`
    nodelay_http   a twin without TLS and with `option http-no-delay`: with nodelay_https, what TLS itself costs

Why four: over plain HTTP, HAProxy hands the kernel each piece of a response that is not finished with MSG_MORE
(it waits for full segments), so the response's headers and first SSE chunks are held until more data comes, up to
the kernel's 200 ms; its TLS layer writes each record at once. The edge's plain twin therefore delivers the first
token later than the edge with TLS (the earlier version of this bench measured https 14 ms, http 25 ms), which is
HAProxy's plain path, not TLS being free. `option http-no-delay` turns that off; the two no-delay twins, started
alike, differ in TLS only.

The client opens a new TCP connection for every request (a full TLS handshake each time, as the smoke test and most
SDK calls outside a pool do) with TCP_NODELAY, as curl sets it, and sends the request in one write; it streams one
chat completion and times, from before the connect: the TCP connect, the TLS handshake, the response's headers and
the first content chunk (TTFT). Every round takes one sample of each variant in rotated order, after warm-up rounds.
It prints the medians, the differences and the handshake alone (handshake done minus connected), with every sample
in --out (JSON). --with-split-writes also measures urllib's way (headers and body in two writes, no TCP_NODELAY).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

CA = "/etc/llmfleet/tls/ca.crt"
EDGE_CONFIG = "/etc/llmfleet/edge.cfg"

# The client, run with python3 in a container on the test network (standard library only). argv: host, model,
# samples, warm-up, split ("split": headers and body in two writes, no TCP_NODELAY, as urllib), then one
# name=scheme:port per variant measured. Every round takes one sample of each variant, the order rotated by one each
# round, so drift in the engine's speed falls on all alike.
CLIENT = r"""
import http.client, json, socket, ssl, sys, time
host, model, n, warm, split = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "split"
variants = dict((name, (where.split(":")[0], int(where.split(":")[1])))
                for name, where in (arg.split("=", 1) for arg in sys.argv[6:]))
key = open("/bench/key").read().strip()
context = ssl.create_default_context(cafile="/bench/ca.crt")
body = json.dumps({"model": model, "messages": [{"role": "user", "content": "Say hello"}], "max_tokens": 8,
                   "temperature": 0, "stream": True}).encode()
head = ("POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
        "Authorization: Bearer %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (host, key, len(body))).encode()

def sample(scheme, port):
    # ms from before the connect to: TCP connected, TLS done, the response's headers, its first content chunk.
    started = time.perf_counter()
    ms = lambda: (time.perf_counter() - started) * 1000
    sock = socket.create_connection((host, port), timeout=120)
    if not split:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    connect = ms()
    if scheme == "https":
        sock = context.wrap_socket(sock, server_hostname=host)
    handshake = ms()
    try:
        if split:
            sock.sendall(head)
            sock.sendall(body)
        else:
            sock.sendall(head + body)
        resp = http.client.HTTPResponse(sock, method="POST")
        resp.begin()
        headers = ms()
        if resp.status != 200:
            raise RuntimeError("%s:%d: HTTP %d %s" % (scheme, port, resp.status, resp.read(300)))
        for raw in resp:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                if json.loads(line[6:])["choices"][0].get("delta", {}).get("content"):
                    return {"connect": connect, "handshake": handshake, "headers": headers, "ttft": ms()}
        raise RuntimeError("no content chunk from %s:%d" % (scheme, port))
    finally:
        sock.close()

names = list(variants)
for _ in range(warm):
    for name in names:
        sample(*variants[name])
samples = dict((name, []) for name in names)
for i in range(n):
    for name in names[i % len(names):] + names[:i % len(names)]:
        samples[name].append(sample(*variants[name]))
print(json.dumps(samples))
"""


def sh(*argv, stdin=None, check=True):
    return subprocess.run(list(argv), input=stdin, capture_output=True, text=True, check=check)


def edge_twin(config, offset, pid_file, tls=False, no_delay=False):
    """The edge's configuration as a second HAProxy: each bind's port moved by offset and its own admin socket.
    tls False drops the TLS options of each bind (from `ssl` to the end of the line: the certificate and, with
    mutual TLS, the client verification) and the lines that need a client certificate. no_delay adds `option
    http-no-delay` to the defaults: HAProxy then sends what it has at once (MSG_MORE off)."""
    text = config
    if not tls:
        text = re.sub(r"^(\s*bind .*?) ssl( .*)?$", r"\g<1>", text, flags=re.M)
        text = re.sub(r"^.*\bssl_c_used\b.*\n", "", text, flags=re.M)
    if no_delay:
        text = re.sub(r"^defaults\n", "defaults\n    option http-no-delay\n", text, count=1, flags=re.M)
    text = re.sub(r"^(\s*bind \S*:)(\d+)", lambda m: m.group(1) + str(int(m.group(2)) + offset), text, flags=re.M)
    text = re.sub(r"^(\s*stats socket )\S+", r"\g<1>%s.sock" % pid_file, text, flags=re.M)
    return text


def twin_differences(config, twin):
    """The lines where two configurations differ other than by TLS, the ports and the admin socket: empty for a
    fair comparison (each line, its TLS options and port normalised, against the other's)."""
    def normal(text):
        lines = []
        for line in text.splitlines():
            if re.search(r"\bssl_c_used\b", line):
                continue
            line = re.sub(r"^(\s*bind .*?) ssl( .*)?$", r"\1", line)
            line = re.sub(r"^(\s*bind \S*:)\d+", r"\1<port>", line)
            lines.append(re.sub(r"^(\s*stats socket )\S+", r"\1<socket>", line))
        return lines
    mine, theirs = normal(config), normal(twin)
    return [(a, b) for a, b in zip(mine, theirs) if a != b] + (
        [("<%d lines>" % len(mine), "<%d lines>" % len(theirs))] if len(mine) != len(theirs) else [])


def summarize(samples):
    """Per variant ({name: [{connect, handshake, headers, ttft}]}, ms): the median of each phase, the quartiles of
    TTFT, and the TLS handshake alone (handshake done minus TCP connected; 0 over plain HTTP)."""
    out = {}
    for name, runs in samples.items():
        med = {phase: round(statistics.median(run[phase] for run in runs), 2) for phase in runs[0]}
        med["tls_handshake"] = round(statistics.median(run["handshake"] - run["connect"] for run in runs), 2)
        quartiles = statistics.quantiles(sorted(run["ttft"] for run in runs), n=4) if len(runs) > 1 else [med["ttft"]] * 3
        out[name] = dict(med, ttft_q1=round(quartiles[0], 2), ttft_q3=round(quartiles[2], 2))
    return out


def overhead(medians, samples, tls_name, plain_name):
    """What TLS adds, tls_name's against plain_name's (ms): to the median TTFT, as the median of the differences
    within each round (the two samples of a round are taken back to back, so the engine's drift and the machine's
    load cancel more than between medians), and to the median handshake."""
    paired = [a["ttft"] - b["ttft"] for a, b in zip(samples[tls_name], samples[plain_name])]
    return {"https": tls_name, "http": plain_name,
            "ttft_ms": round(medians[tls_name]["ttft"] - medians[plain_name]["ttft"], 2),
            "ttft_paired_ms": round(statistics.median(paired), 2),
            "handshake_ms": round(medians[tls_name]["tls_handshake"] - medians[plain_name]["tls_handshake"], 2)}


# What is measured: name -> (scheme, port offset from the edge's, twin: None for the edge itself, else (tls,
# no_delay)). The edge and its plain twin are the acceptance's pair (the edge as deployed, https against http); the
# two no-delay twins, spawned alike and differing in TLS only, show what TLS itself costs once HAProxy's plain-path
# coalescing of the stream (MSG_MORE) is out of the picture.
VARIANTS = {"edge_https": ("https", 0, None), "twin_http": ("http", 1, (False, False)),
            "nodelay_https": ("https", 2, (True, True)), "nodelay_http": ("http", 3, (False, True))}


def start_twins(host, edge, offset):
    """Start the twins of VARIANTS on the host (each checked to differ from the edge, or its TLS sibling, in TLS
    only, no-delay aside); returns {name: pid file}."""
    started = {}
    for name, (_scheme, step, twin) in VARIANTS.items():
        if twin is None:
            continue
        pid_file = "/run/llmfleet-ttft-%s.pid" % name
        config = edge_twin(edge, offset * step, pid_file, tls=twin[0], no_delay=twin[1])
        reference = edge_twin(edge, 0, pid_file, tls=True, no_delay=twin[1])
        differences = twin_differences(reference, config)
        if differences or (not twin[0] and " ssl" in "".join(re.findall(r"^\s*bind .*$", config, flags=re.M))):
            raise SystemExit("the twin %s differs from the edge beyond TLS: %s" % (name, differences))
        sh("docker", "exec", "-i", host, "sh", "-c", "cat > %s.cfg" % pid_file, stdin=config)
        sh("docker", "exec", host, "haproxy", "-D", "-f", pid_file + ".cfg", "-p", pid_file)
        started[name] = pid_file
    return started


def stop_twins(host, started):
    for pid_file in started.values():
        sh("docker", "exec", host, "sh", "-c", "kill $(cat {0}); rm -f {0} {0}.cfg".format(pid_file), check=False)


def measure(args, network, ip, workdir, split):
    where = ["%s=%s:%d" % (name, scheme, args.port + args.plain_offset * step)
             for name, (scheme, step, _twin) in VARIANTS.items()]
    run = sh("docker", "run", "--rm", "--network", network, "-v", "%s:/bench:ro" % workdir, "--entrypoint",
             "python3", args.image, "/bench/client.py", ip, args.model, str(args.requests), str(args.warmup),
             "split" if split else "one", *where)
    return json.loads(run.stdout)


def report_for(samples):
    medians = summarize(samples)
    return {"median_ms": medians, "tls_overhead": overhead(medians, samples, "edge_https", "twin_http"),
            "tls_overhead_no_delay": overhead(medians, samples, "nodelay_https", "nodelay_http"), "samples_ms": samples}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--host", default="llmfleet-demo", help="the serving host's container")
    parser.add_argument("--port", type=int, default=8000, help="the edge's port of the replica measured")
    parser.add_argument("--plain-offset", type=int, default=1000, help="each twin listens this much further up")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--requests", type=int, default=20, help="samples per variant (the median is of these)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--key-file", default=".cache/demo/api_key")
    parser.add_argument("--image", default=os.environ.get("MOLECULE_HOST_IMAGE", "llmfleet-testbed/debian12-python"))
    parser.add_argument("--with-split-writes", action="store_true",
                        help="also measure urllib's way (headers and body in two writes, no TCP_NODELAY)")
    parser.add_argument("--out", default=".cache/bench/tls_ttft.json")
    args = parser.parse_args(argv)

    inspect = sh("docker", "inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{$v.IPAddress}}{{end}}",
                 args.host).stdout.split()
    network, ip = inspect[0], inspect[1]
    edge = sh("docker", "exec", args.host, "cat", EDGE_CONFIG).stdout
    started = {}
    workdir = tempfile.mkdtemp(prefix="llmfleet-tls-ttft-")
    try:
        started = start_twins(args.host, edge, args.plain_offset)
        with open(os.path.join(workdir, "client.py"), "w") as fh:
            fh.write(CLIENT)
        with open(os.path.join(workdir, "ca.crt"), "w") as fh:
            fh.write(sh("docker", "exec", args.host, "cat", CA).stdout)
        shutil.copy(args.key_file, os.path.join(workdir, "key"))
        for name in os.listdir(workdir):
            os.chmod(os.path.join(workdir, name), 0o644)
        os.chmod(workdir, 0o755)
        samples = measure(args, network, ip, workdir, split=False)
        split_samples = measure(args, network, ip, workdir, split=True) if args.with_split_writes else None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        stop_twins(args.host, started)
    with open("/proc/loadavg") as fh:
        load = " ".join(fh.read().split()[:3])
    report = dict(report_for(samples), host=args.host, requests=args.requests, warmup=args.warmup, load=load)
    if split_samples:
        report["split_writes"] = report_for(split_samples)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(report, fh, indent=1)
    print("TTFT, median of %d each, new connection each, one round of all four at a time (%s, load %s):"
          % (args.requests, args.host, load))
    for title, part in [("", report)] + ([("urllib's way (two writes, no TCP_NODELAY): ", report["split_writes"])]
                                         if split_samples else []):
        med = part["median_ms"]
        for key, label in (("tls_overhead", "the edge as deployed against its plain twin"),
                           ("tls_overhead_no_delay", "both twins with option http-no-delay")):
            pair = part[key]
            print("  %s%s: https %.1f ms (headers %.1f), http %.1f ms (headers %.1f), TLS %+.1f ms (paired %+.1f); "
                  "TCP connect %.2f ms, TLS handshake alone %.2f ms" % (
                      title, label, med[pair["https"]]["ttft"], med[pair["https"]]["headers"], med[pair["http"]]["ttft"],
                      med[pair["http"]]["headers"], pair["ttft_ms"], pair["ttft_paired_ms"],
                      med[pair["https"]]["connect"], pair["handshake_ms"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
