#!/usr/bin/env python
"""What TLS costs one request's time to first token: https through the host's edge against plain HTTP through a
twin of the same edge without TLS, in the same run, from another container on the test network (issue 41).

    .venv/bin/python tests/bench/tls_ttft.py [--host llmfleet-demo] [--requests 20] [--key-file .cache/demo/api_key]

The twin is the edge's own configuration (/etc/llmfleet/edge.cfg) with the `ssl crt` options dropped and each port
moved by --plain-offset, run as a second HAProxy on the host for the measurement and stopped after it. The client
opens a new connection for every request (a TLS handshake each time, as the smoke test and most SDK calls outside
a pool do), streams one chat completion and takes the time to its first content chunk. https and http alternate,
after warm-up requests on both; the medians and their difference are printed, with every sample in --out (JSON).
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
PLAIN_CONFIG = "/run/llmfleet-ttft-plain.cfg"
PLAIN_PID = "/run/llmfleet-ttft-plain.pid"

# The client, run with python3 in a container on the test network (standard library only).
CLIENT = r'''
import json, ssl, statistics, sys, time, urllib.request
https, http, model, n, warm = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
key = open("/bench/key").read().strip()
context = ssl.create_default_context(cafile="/bench/ca.crt")
body = json.dumps({"model": model, "messages": [{"role": "user", "content": "Say hello"}], "max_tokens": 8,
                   "temperature": 0, "stream": True}).encode()

def ttft(base):
    req = urllib.request.Request(base + "/v1/chat/completions", data=body, method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
    started = time.perf_counter()
    with urllib.request.urlopen(req, timeout=120, context=context if base.startswith("https") else None) as resp:
        for raw in resp:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                delta = json.loads(line[6:])["choices"][0].get("delta", {})
                if delta.get("content"):
                    return (time.perf_counter() - started) * 1000
    raise RuntimeError("no content chunk from " + base)

for _ in range(warm):
    ttft(https), ttft(http)
samples = {"https": [], "http": []}
for i in range(n):
    order = ("https", "http") if i % 2 == 0 else ("http", "https")
    for scheme in order:
        samples[scheme].append(ttft(https if scheme == "https" else http))
print(json.dumps(samples))
'''


def sh(*argv, stdin=None, check=True):
    return subprocess.run(list(argv), input=stdin, capture_output=True, text=True, check=check)


def plain_twin(config, offset, pid_file):
    """The edge's configuration without TLS, every bind moved by offset, its own admin socket."""
    text = re.sub(r" ssl crt \S+", "", config)
    text = re.sub(r"^(\s*bind \S*:)(\d+)", lambda m: m.group(1) + str(int(m.group(2)) + offset), text, flags=re.M)
    text = re.sub(r"^(\s*stats socket )\S+", r"\g<1>%s.sock" % pid_file, text, flags=re.M)
    return text


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--host", default="llmfleet-demo", help="the serving host's container")
    parser.add_argument("--port", type=int, default=8000, help="the edge's port of the replica measured")
    parser.add_argument("--plain-offset", type=int, default=1000, help="the plain twin listens this far above")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--requests", type=int, default=20, help="samples per scheme (the median is of these)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--key-file", default=".cache/demo/api_key")
    parser.add_argument("--image", default=os.environ.get("MOLECULE_HOST_IMAGE", "llmfleet-testbed/debian12-python"))
    parser.add_argument("--out", default=".cache/bench/tls_ttft.json")
    args = parser.parse_args(argv)

    inspect = sh("docker", "inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{$v.IPAddress}}{{end}}",
                 args.host).stdout.split()
    network, ip = inspect[0], inspect[1]
    twin = plain_twin(sh("docker", "exec", args.host, "cat", EDGE_CONFIG).stdout, args.plain_offset, PLAIN_PID)
    sh("docker", "exec", "-i", args.host, "sh", "-c", "cat > %s" % PLAIN_CONFIG, stdin=twin)
    sh("docker", "exec", args.host, "haproxy", "-D", "-f", PLAIN_CONFIG, "-p", PLAIN_PID)
    workdir = tempfile.mkdtemp(prefix="llmfleet-tls-ttft-")
    try:
        with open(os.path.join(workdir, "client.py"), "w") as fh:
            fh.write(CLIENT)
        with open(os.path.join(workdir, "ca.crt"), "w") as fh:
            fh.write(sh("docker", "exec", args.host, "cat", CA).stdout)
        shutil.copy(args.key_file, os.path.join(workdir, "key"))
        for name in os.listdir(workdir):
            os.chmod(os.path.join(workdir, name), 0o644)
        os.chmod(workdir, 0o755)
        run = sh("docker", "run", "--rm", "--network", network, "-v", "%s:/bench:ro" % workdir, "--entrypoint",
                 "python3", args.image, "/bench/client.py", "https://%s:%d" % (ip, args.port),
                 "http://%s:%d" % (ip, args.port + args.plain_offset), args.model, str(args.requests), str(args.warmup))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        sh("docker", "exec", args.host, "sh", "-c", "kill $(cat %s); rm -f %s %s" % (PLAIN_PID, PLAIN_PID, PLAIN_CONFIG),
           check=False)
    samples = json.loads(run.stdout)
    medians = {scheme: round(statistics.median(values), 1) for scheme, values in samples.items()}
    report = {"host": args.host, "requests_per_scheme": args.requests, "median_ttft_ms": medians,
              "tls_overhead_ms": round(medians["https"] - medians["http"], 1), "samples_ms": samples}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(report, fh, indent=1)
    print("TTFT, median of %d, new connection each: https %.1f ms, http %.1f ms, TLS overhead %+.1f ms (%s)" % (
        args.requests, medians["https"], medians["http"], report["tls_overhead_ms"], args.host))
    return 0


if __name__ == "__main__":
    sys.exit(main())
