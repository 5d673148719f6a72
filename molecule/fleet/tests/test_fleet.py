"""The fleet as its users meet it: one endpoint behind HAProxy, rolling upgrades without failed requests,
a broken image that stops the roll at the first host, the rollback, and Prometheus watching all of it.

Runs in `molecule verify` (or `molecule test -s fleet`) after converge. The tests run in file order and build on
each other (v1 -> v2 roll, broken roll, rollback to v2). Every request is sent to the balancer only, on the
scenario's docker network. The numbers (requests sent / failed, seconds per host, targets up) are printed and
written to .cache/fleet-report.json.
"""
import datetime
import hashlib
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import pytest

PROJECT = os.environ.get("MOLECULE_PROJECT_DIRECTORY") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(PROJECT, "tests", "fleet"))
from request_loop import RequestLoop  # noqa: E402
from stream_loop import StreamLoop  # noqa: E402

API_KEY = "llmfleet-sentinel-api-key-4f1c"
MODEL = "tiny"
NETWORK = "bridge"  # the scenario's hosts sit on the default bridge (see molecule.yml)
# Instance names: molecule.yml prefixes them with LLMFLEET_FLEET_NAME (two checkouts can run the scenario side by side).
NAME = os.environ.get("LLMFLEET_FLEET_NAME", "llmfleet-fleet")
EDGE = NAME + "-edge"
GPUS = [NAME + "-gpu1", NAME + "-gpu2"]
BACKEND = "llmfleet_vllm"
V1 = os.environ.get("LLMFLEET_TEST_VLLM_IMAGE_FROM_HOSTS", "")
V2 = os.environ.get("LLMFLEET_TEST_VLLM_IMAGE_V2_FROM_HOSTS", "")
BROKEN = os.environ.get("LLMFLEET_TEST_VLLM_IMAGE_BROKEN_FROM_HOSTS", "")
# Bounds of the request loop that runs during each roll: at most this many requests, for at most this long.
LOOP_REQUESTS = int(os.environ.get("LLMFLEET_FLEET_LOOP_REQUESTS", "3000"))
LOOP_SECONDS = float(os.environ.get("LLMFLEET_FLEET_LOOP_SECONDS", "900"))
# Long streams in flight during each roll: tokens per stream (hundreds), and parallel streams.
STREAM_TOKENS = int(os.environ.get("LLMFLEET_FLEET_STREAM_TOKENS", "300"))
STREAM_WORKERS = int(os.environ.get("LLMFLEET_FLEET_STREAM_WORKERS", "2"))
REPORT = os.path.join(PROJECT, ".cache", "fleet-report.json")
RESULTS = {}
# The inventory directory of many models, once the fleet serves them (test_the_fleet_serves_...): passed to every later
# playbook run as a second inventory source.
_MANY = []

pytestmark = pytest.mark.skipif(not (V1 and V2 and BROKEN), reason="needs the test bed (make testbed)")


def run(*argv, check=True):
    return subprocess.run(list(argv), capture_output=True, text=True, check=check)


def on(host, command, check=True):
    """Run a shell command on a scenario host (a container on this machine)."""
    return run("docker", "exec", host, "sh", "-c", command, check=check)


def address(container):
    info = json.loads(run("docker", "inspect", container).stdout)[0]
    return info["NetworkSettings"]["Networks"][NETWORK]["IPAddress"]


# The fleet's CA as the hosts keep it: every https request of these tests (urllib's, the request and stream loops')
# verifies the balancer and the edges against it.
CA = "/etc/llmfleet/tls/ca.crt"
CURL = "curl --cacert %s" % CA
_TRUSTED = []


def trust_fleet_ca(again=False):
    """Install an opener that verifies https:// against the fleet's CA (read from the balancer host), once; again:
    read it anew and trust it beside every CA trusted before (a client given a CA rotation's bundle). Loops in flight
    pick the new opener up on their next request."""
    if not _TRUSTED or again:
        bundle = "".join(open(path).read() for path in _TRUSTED[:1]) + on(EDGE, "cat %s" % CA).stdout
        with tempfile.NamedTemporaryFile("w", suffix=".crt", delete=False) as fh:
            fh.write(bundle)
        context = ssl.create_default_context(cafile=fh.name)
        urllib.request.install_opener(urllib.request.build_opener(urllib.request.HTTPSHandler(context=context)))
        _TRUSTED[:] = [fh.name]
    return _TRUSTED[0]


def balancer_url():
    trust_fleet_ca()
    return "https://%s:8080" % address(EDGE)


def http(url, body=None, key=None, timeout=30):
    """(status, text) of one request; HTTP errors are answers too."""
    request = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json"})
    if key is not None:
        request.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def server_rows():
    """Every server row of the balancer's stats (HAProxy's stats CSV): [{pxname, svname, status, scur, stot, ...}]."""
    csv = on(EDGE, "curl -fsS 'http://127.0.0.1:8404/stats;csv'").stdout
    header = csv.splitlines()[0][2:].split(",")
    rows = [dict(zip(header, line.split(","))) for line in csv.splitlines()[1:]]
    return [row for row in rows if row.get("svname") not in (None, "FRONTEND", "BACKEND")]


def servers():
    """{server: {status, scur, check_status}} of the one-model backend as the balancer sees them."""
    return {row["svname"]: row for row in server_rows() if row.get("pxname") == BACKEND}


def wait_all_up(timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = {name: row["status"] for name, row in servers().items()}
        if state and set(state.values()) == {"UP"}:
            return state
        time.sleep(2)
    raise AssertionError("not every replica UP behind the balancer: %s" % state)


def container(host):
    """(image reference, start time) of the host's replica 0."""
    out = on(host, "docker inspect --format '{{.Config.Image}} {{.State.StartedAt}} {{.State.Running}}' llmfleet-vllm-0",
             check=False).stdout.split()
    return (out[0], out[1], out[2] == "true") if len(out) == 3 else (None, None, False)


def digest(ref):
    return ref.rsplit("@", 1)[1]


def playbook(name, *extra):
    """Run one of the collection's playbooks against the scenario's inventory, the way a user would (with the
    inventory of many models beside it, once the fleet serves them)."""
    inventory = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
    if _MANY:
        extra = ("-i", _MANY[0]) + extra
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(PROJECT, "collections"),
               ANSIBLE_ROLES_PATH=os.path.join(PROJECT, "roles"), ANSIBLE_CONFIG=os.path.join(PROJECT, "ansible.cfg"),
               ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3", ANSIBLE_CALLBACK_RESULT_FORMAT="json",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", inventory,
            os.path.join(PROJECT, "playbooks", name)] + list(extra)
    started = time.monotonic()
    result = subprocess.run(argv, cwd=PROJECT, env=env, capture_output=True, text=True, check=False)
    result.seconds = round(time.monotonic() - started, 1)
    return result


class Traffic:
    """Request loops and long streams in flight at once to several endpoints: {label: (base URL incl. /v1, model)},
    or (base URL, model, tokens per stream) for a model whose context is shorter than STREAM_TOKENS.
    stop() -> {label: request summary with its streams' under "streams"}, and the totals under "all"."""

    def __init__(self, targets, workers=1, streams=1):
        self.loops = {label: (RequestLoop(target[0], target[1], API_KEY, max_requests=LOOP_REQUESTS,
                                          max_seconds=LOOP_SECONDS, workers=workers, pause=0.2, timeout=60,
                                          vary_prompt=True),
                              StreamLoop(target[0], target[1], API_KEY, workers=streams,
                                         max_tokens=(list(target[2:]) or [STREAM_TOKENS])[0],
                                         max_seconds=LOOP_SECONDS, timeout=300))
                      for label, target in targets.items()}

    def start(self):
        for requests, streams in self.loops.values():
            requests.start()
            streams.start()
        return self

    def stop(self):
        out = {}
        for label, (requests, streams) in self.loops.items():
            out[label] = requests.stop()
            out[label]["streams"] = streams.stop()
        out["all"] = {key: sum(s[key] for s in out.values()) for key in ("sent", "ok", "failed")}
        out["all"].update({"streams": sum(s["streams"]["streams"] for s in list(out.values())[:-1]),
                           "cut": sum(s["streams"]["cut"] + s["streams"]["failed"] for s in list(out.values())[:-1])})
        return out


def edge_url(host):
    trust_fleet_ca()
    return "https://%s:8000" % address(host)


def balancer_and_edges(model=MODEL):
    """Traffic targets: the balancer and each serving host's edge, directly."""
    return dict([("balancer", (balancer_url() + "/v1", model))] + [(h, (edge_url(h) + "/v1", model)) for h in GPUS])


def roll_under_load(*extra):
    """Run upgrade.yml while a bounded request loop and long streams go through the balancer;
    (playbook result, loop summary). The streams' summary is the loop summary's "streams" entry."""
    loop = RequestLoop(balancer_url() + "/v1", MODEL, API_KEY, max_requests=LOOP_REQUESTS, max_seconds=LOOP_SECONDS,
                       workers=2, pause=0.2, timeout=60, vary_prompt=True).start()
    streams = StreamLoop(balancer_url() + "/v1", MODEL, API_KEY, workers=STREAM_WORKERS, max_tokens=STREAM_TOKENS,
                         max_seconds=LOOP_SECONDS, timeout=300).start()
    try:
        result = playbook("upgrade.yml", *extra)
    finally:
        summary = loop.stop()
        summary["streams"] = streams.stop()
    return result, summary


def host_times(stdout):
    """{host: (seconds for the host, seconds out of the balancers)} from upgrade.yml's report lines."""
    return {m.group(1): (float(m.group(2)), float(m.group(3))) for m in re.finditer(
        r"llmfleet upgrade: (\S+) now serves \S+; done in ([0-9.]+) s, out of the balancers for ([0-9.]+) s", stdout)}


def record(key, value):
    RESULTS[key] = value
    os.makedirs(os.path.dirname(REPORT), exist_ok=True)
    with open(REPORT, "w") as handle:
        json.dump(RESULTS, handle, indent=2)
    print("%s: %s" % (key, json.dumps(value)))


HUB_REPO = os.environ.get("LLMFLEET_TEST_HUB_REPO", "")
HUB_COMMIT = os.environ.get("LLMFLEET_TEST_HUB_COMMIT", "")
HUB_MODEL_DIR = os.environ.get("LLMFLEET_TEST_HUB_MODEL_DIR", "")
WEIGHTS_DIR = "/srv/llmfleet/models/tiny-qwen3-moe"  # model_weights_dir in molecule.yml


def hub_log_files():
    """The test bed's Hugging Face mirror's (olah's) access logs: LLMFLEET_TEST_HF_MIRROR_LOG_DIR, else the
    logs/ directory beside the test bed's wheelhouse (tests/testbed/up.d/50-hub-mirrors.sh starts olah there)."""
    logs = os.environ.get("LLMFLEET_TEST_HF_MIRROR_LOG_DIR") or os.path.join(
        os.path.dirname(os.environ.get("LLMFLEET_TEST_WHEELHOUSE", "")), "hub-mirrors", "logs")
    return sorted(os.path.join(logs, n) for n in os.listdir(logs) if n.startswith("olah")) if os.path.isdir(logs) else []


def started_at(container_name):
    """The container's start, in seconds since the epoch."""
    out = run("docker", "inspect", "--format", "{{.State.StartedAt}}", container_name).stdout.strip()
    return datetime.datetime.strptime(out[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc).timestamp()


def hub_downloads(since):
    """[(client address, path)] of every file the mirror sent (GET .../resolve/<commit>/<path>) since `since`
    (olah logs in the machine's local time)."""
    line = re.compile(r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) .*INFO: +([0-9.]+):\d+ - "GET /%s/resolve/%s/(\S+) HTTP'
                      % (re.escape(HUB_REPO), re.escape(HUB_COMMIT)))
    found = []
    for path in hub_log_files():
        with open(path, errors="replace") as handle:
            for text in handle:
                m = line.match(text)
                if m and time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) >= since - 1:
                    found.append((m.group(2), m.group(3)))
    return found


def published_sha256():
    """{path: sha256} of the model as the test bed published it on the mirror (the hub's own files)."""
    out = {}
    for name in sorted(os.listdir(HUB_MODEL_DIR)):
        full = os.path.join(HUB_MODEL_DIR, name)
        if os.path.isfile(full) and not name.startswith("."):  # the test bed's stamp is not published
            with open(full, "rb") as handle:
                out[name] = hashlib.sha256(handle.read()).hexdigest()
    return out


@pytest.mark.skipif(not (HUB_REPO and HUB_COMMIT and HUB_MODEL_DIR), reason="needs the test bed's hub mirror")
def test_the_fleet_took_the_weights_from_the_hub_once_and_every_host_verified_them():
    """Peer transfer (docs/WEIGHTS_FLEET.md): one host downloaded each model file from the mirror, the other
    pulled it over the LAN from that host; both hold exactly the published bytes, placed by the role."""
    expected = published_sha256()
    since = min(started_at(h) for h in GPUS)
    addresses = {address(h): h for h in GPUS}
    downloads = [(addresses[a], p) for a, p in hub_downloads(since) if a in addresses]
    per_file = {p: sorted(h for h, q in downloads if q == p) for p in expected}
    seeds = sorted(set(h for h, _p in downloads))
    record("weights_from_hub", {"downloads": len(downloads), "hosts_downloading": seeds, "files": len(expected)})
    assert hub_log_files(), "the mirror's access log was not found (LLMFLEET_TEST_HF_MIRROR_LOG_DIR)"
    # Every file exactly once for the whole fleet, all by one host (the seed).
    assert all(len(hosts) == 1 for hosts in per_file.values()), per_file
    assert len(seeds) == 1, per_file
    puller = [h for h in GPUS if h not in seeds][0]
    # The seed's rsync daemon served the puller (its journal: one connection from the puller's address).
    journal = on(seeds[0], "journalctl -u llmfleet-weights-rsyncd.service --no-pager -o cat", check=False).stdout
    assert re.search(r"rsync (on|to) \S+ from .*\(%s\)" % re.escape(address(puller)), journal), journal[-2000:]
    # ... and stopped once the transfers were done: nothing listens for peers now.
    for host in GPUS:
        assert on(host, "systemctl is-active llmfleet-weights-rsyncd.service", check=False).stdout.strip() != "active"
    for host in GPUS:
        sums = on(host, "cd %s && sha256sum %s" % (WEIGHTS_DIR, " ".join(sorted(expected)))).stdout
        got = dict((line.split()[1], line.split()[0]) for line in sums.splitlines())
        assert got == expected, (host, got)
        marker = json.loads(on(host, "cat %s/.llmfleet-weights.json" % WEIGHTS_DIR).stdout)
        assert marker["identity"]["commit"] == HUB_COMMIT, (host, marker["identity"])
        assert sorted(m["path"] for m in marker["files"]) == sorted(expected), (host, marker["files"])


@pytest.mark.skipif(not (HUB_REPO and HUB_COMMIT), reason="needs the test bed's hub mirror")
def test_a_rerun_of_the_weights_changes_nothing_and_downloads_nothing():
    since = time.time()
    result = playbook("model.yml", "--tags", "model_weights")
    record("weights_rerun", {"rc": result.returncode, "seconds": result.seconds})
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    for host in GPUS:
        assert re.search(r"^%s\s*:\s*ok=\d+\s+changed=0\s" % re.escape(host), result.stdout, re.M), result.stdout[-3000:]
    addresses = set(address(h) for h in GPUS)
    assert [d for d in hub_downloads(since) if d[0] in addresses] == []
    for host in GPUS:
        assert on(host, "systemctl is-active llmfleet-weights-rsyncd.service", check=False).stdout.strip() != "active"


@pytest.mark.skipif(not HUB_MODEL_DIR, reason="needs the test bed's tiny model")
def test_a_controller_upload_goes_to_one_host_and_spreads_over_the_lan():
    """model_weights_source: local from the controller, peer transfer on: the controller uploads to one host, the
    other pulls it from that host over the LAN and verifies it against the controller's sha256; a re-run changes
    nothing."""
    dest = "/srv/llmfleet/models/uploaded-tiny"
    extra = json.dumps({"model_weights_source": "local", "model_weights_local_path": HUB_MODEL_DIR,
                        "model_weights_dir": dest})
    try:
        result = playbook("model.yml", "--tags", "model_weights", "-e", extra)
        record("upload_fanout", {"rc": result.returncode, "seconds": result.seconds})
        assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
        where = dict(re.findall(r'ok: \[(\S+)\] => \{\s*"msg": "%s: (uploaded from the controller|from peers in round 1)'
                                % re.escape(dest), result.stdout))
        assert sorted(where.values()) == ["from peers in round 1", "uploaded from the controller"], result.stdout[-6000:]
        seed = [h for h, w in where.items() if w.startswith("uploaded")][0]
        puller = [h for h in GPUS if h != seed][0]
        # The puller's report: every file of the controller's directory from the seed, none from the controller.
        report = (r'ok: \[%s\] => \{\s*"msg": "%s: %d files \([0-9.]+ MiB\) from peers; %s: ok; verified against '
                  r"the controller's manifest and placed")
        files = len(os.listdir(HUB_MODEL_DIR))
        assert re.search(report % (re.escape(puller), re.escape(dest), files, re.escape(seed)), result.stdout), \
            result.stdout[-6000:]
        journal = on(seed, "journalctl -u llmfleet-weights-rsyncd.service --no-pager -o cat", check=False).stdout
        assert re.search(r"rsync (on|to) llmfleet-weights-uploaded-tiny-\S* from .*\(%s\)" % re.escape(address(puller)),
                         journal), journal[-2000:]
        expected = published_sha256()
        for host in GPUS:
            sums = on(host, "cd %s && sha256sum %s" % (dest, " ".join(sorted(expected)))).stdout
            assert dict((line.split()[1], line.split()[0]) for line in sums.splitlines()) == expected, host
            marker = json.loads(on(host, "cat %s/.llmfleet-weights.json" % dest).stdout)
            assert marker["identity"]["origin"] == "controller:" + HUB_MODEL_DIR.rstrip("/"), marker["identity"]
            assert on(host, "systemctl is-active llmfleet-weights-rsyncd.service", check=False).stdout.strip() != "active"
        again = playbook("model.yml", "--tags", "model_weights", "-e", extra)
        assert again.returncode == 0, again.stdout[-6000:]
        for host in GPUS:
            assert re.search(r"^%s\s*:\s*ok=\d+\s+changed=0\s" % re.escape(host), again.stdout, re.M), again.stdout[-3000:]
    finally:
        for host in GPUS:
            on(host, "rm -rf %s /srv/llmfleet/models/.uploaded-tiny.*" % dest, check=False)


def test_vllm_listens_on_loopback_and_the_edge_on_the_private_address():
    for host in GPUS:
        ip = address(host)
        ports = on(host, "docker port llmfleet-vllm-0").stdout.split()
        assert ports[-1] == "127.0.0.1:18000", ports
        # vLLM itself: loopback only. The host's edge (key + route gate): the private address only.
        assert on(EDGE, "curl -s -o /dev/null -m 3 http://%s:18000/health" % ip, check=False).returncode != 0
        assert on(host, "%s -s -o /dev/null -m 3 https://127.0.0.1:8000/health" % CURL, check=False).returncode != 0
        assert on(EDGE, "%s -fsS -o /dev/null -m 5 https://%s:8000/health" % (CURL, ip), check=False).returncode == 0


def test_no_route_answers_without_the_key_from_the_network():
    """Every route of vLLM's own /openapi.json, without a key, from another container on the network: the
    balancer, each host's edge and each replica's own port answer 2xx to nothing but GET /health."""
    sys.path.insert(0, os.path.join(PROJECT, "tests"))
    import security_probe
    spec = json.loads(on(GPUS[0], "curl -fsS http://127.0.0.1:18000/openapi.json").stdout)
    targets = [balancer_url()] + ["%s://%s:%d" % (s, address(h), p) for h in GPUS for s, p in (("https", 8000), ("http", 18000))]
    report = security_probe.run_in_container(NETWORK, os.environ["MOLECULE_HOST_IMAGE"], spec, targets, MODEL,
                                             ca_pem=on(EDGE, "cat %s" % CA).stdout)
    record("route_probe", {"routes": len(security_probe.routes(spec)), "requests": report["requests"],
                           "reachable": report["reachable_targets"], "violations": report["violations"]})
    assert sorted(report["reachable_targets"]) == sorted([balancer_url()] + ["https://%s:8000" % address(h) for h in GPUS])
    assert report["violations"] == [], report["violations"]


def test_every_listener_that_takes_a_key_speaks_tls_only():
    """Issue 41, from another container on the network: the balancer, its exporter and each host's edge refuse plain
    HTTP with a valid key and TLS 1.0/1.1, and verify against the fleet's CA (by address)."""
    sys.path.insert(0, os.path.join(PROJECT, "tests"))
    import security_probe
    targets = ["%s:%d" % (address(EDGE), p) for p in (8080, 8405)] + ["%s:8000" % address(h) for h in GPUS]
    report = security_probe.transport_in_container(NETWORK, os.environ["MOLECULE_HOST_IMAGE"], targets,
                                                   on(EDGE, "cat %s" % CA).stdout, API_KEY, MODEL)
    record("transport_probe", {t["target"]: {"plain_http": t["plain_http"], "TLSv1": t["TLSv1"]["ok"],
                                             "TLSv1.1": t["TLSv1.1"]["ok"], "default": t["default"]["version"]}
                               for t in report["targets"]})
    assert report["violations"] == [], report["violations"]


def test_balancer_enforces_the_key_and_hides_vllm_internals():
    base = balancer_url()
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
    assert http(base + "/v1/models")[0] == 401
    assert http(base + "/v1/chat/completions", chat, key="wrong-key")[0] == 401
    status, text = http(base + "/v1/chat/completions", chat, key=API_KEY)
    assert status == 200 and json.loads(text)["choices"][0]["message"]["content"]
    # vLLM serves /metrics, /tokenize and more without checking the key: the balancer does not forward them.
    for path in ("/metrics", "/tokenize", "/version", "/reset_prefix_cache"):
        assert http(base + path, key=API_KEY)[0] == 404, path
    assert http(base + "/health") == (200, "ok")


def test_balancer_spreads_requests_over_both_hosts():
    before = {name: int(row["stot"]) for name, row in servers().items()}
    # Distinct prompts: with prefix-aware routing (the default) one prompt would be one conversation, one replica.
    summary = RequestLoop(balancer_url() + "/v1", MODEL, API_KEY, max_requests=12, max_seconds=120, workers=2,
                          vary_prompt=True).run()
    after = {name: int(row["stot"]) for name, row in servers().items()}
    assert summary["failed"] == 0, summary
    assert sorted(after) == [GPUS[0] + "-0", GPUS[1] + "-0"]
    assert all(after[name] > before[name] for name in after), (before, after)


def prefix_routing():
    """True when the balancer routes by prefix (loadbalancer_balance: prefix, the default)."""
    return "balance hdr(" in on(EDGE, "cat /etc/haproxy/haproxy.cfg").stdout


def served_by(body, headers=None):
    """Send one chat request through the balancer; the server (replica) that answered it, from the stats."""
    before = {name: int(row["stot"]) for name, row in servers().items()}
    request = urllib.request.Request(balancer_url() + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers=dict({"Content-Type": "application/json",
                                                   "Authorization": "Bearer " + API_KEY}, **(headers or {})))
    with urllib.request.urlopen(request, timeout=60) as response:
        reply = json.load(response)
    after = {name: int(row["stot"]) for name, row in servers().items()}
    moved = [name for name in after if after[name] > before.get(name, 0)]
    assert len(moved) == 1, (before, after)
    return moved[0], reply["choices"][0]["message"]["content"]


def test_prefix_routing_keeps_each_conversation_on_one_replica():
    if not prefix_routing():
        pytest.skip("the balancer does not route by prefix (loadbalancer_balance)")
    seen = {}
    for conversation in range(8):
        messages = [{"role": "system", "content": "You are terse."},
                    {"role": "user", "content": "Conversation %d: what is a KV cache?" % conversation}]
        replicas = []
        for turn in range(3):
            replica, text = served_by({"model": MODEL, "messages": messages, "max_tokens": 8, "temperature": 0,
                                       "ignore_eos": True})
            replicas.append(replica)
            messages = messages + [{"role": "assistant", "content": text}, {"role": "user", "content": "And %d?" % turn}]
        assert len(set(replicas)) == 1, (conversation, replicas)
        seen[conversation] = replicas[0]
    # A client's own conversation id wins over the prompt: one id, one replica, whatever the text.
    ids = {served_by({"model": MODEL, "messages": [{"role": "user", "content": "q%d" % n}], "max_tokens": 4},
                     {"X-Session-Id": "session-42"})[0] for n in range(4)}
    record("prefix_routing", {"conversation_replicas": seen, "session_header_replicas": sorted(ids)})
    assert len(ids) == 1, ids
    # Eight conversations use both replicas (consistent hash; 2 ** -7 odds of all on one).
    assert len(set(seen.values())) == 2, seen


def test_prometheus_scrapes_every_target():
    targets = json.loads(on(EDGE, "curl -fsS http://127.0.0.1:9090/api/v1/targets?state=active").stdout)
    active = targets["data"]["activeTargets"]
    # The edges' and the balancer's exporters over TLS, verified against the fleet's CA (up below).
    assert all(t["scrapeUrl"].startswith("https://") for t in active if t["labels"]["job"] in ("vllm", "haproxy")), active
    by_job = {}
    for target in active:
        by_job.setdefault(target["labels"]["job"], []).append(target["health"])
    record("prometheus_targets_after_converge", {job: "%d/%d up" % (h.count("up"), len(h)) for job, h in by_job.items()})
    assert sorted(by_job) == ["haproxy", "node", "prometheus", "vllm"]
    assert len(by_job["vllm"]) == 2 and len(by_job["node"]) == 3
    assert all(t["health"] == "up" for t in active), [(t["scrapeUrl"], t["lastError"]) for t in active]
    # vLLM's own series arrive, one per replica, labelled with the host.
    query = json.loads(on(EDGE, "curl -fsS 'http://127.0.0.1:9090/api/v1/query?query=vllm:num_requests_running'").stdout)
    assert sorted(r["metric"]["host"] for r in query["data"]["result"]) == GPUS


def presented_certificates():
    """{listener: the certificate (PEM) it presents}: the balancer and each host's edge."""
    listeners = [(address(EDGE), 8080)] + [(address(h), 8000) for h in GPUS]
    return {"%s:%d" % l: ssl.get_server_certificate(l) for l in listeners}


def serve_and_balance(*extra):
    """The serve stage (site.yml --tags model,serve: serve.yml alone lacks the image and model directory the model stage
    publishes), then fleet.yml, as a user rolls out a new certificate: (serve result, fleet result)."""
    serve = playbook("site.yml", "--tags", "model,serve", *extra)
    fleet = playbook("fleet.yml", *extra) if serve.returncode == 0 else serve
    return serve, fleet


def assert_no_request_failed(summary):
    """Every loop of a Traffic summary: no request failed, no stream cut, and each endpoint answered."""
    for label, loop in summary.items():
        if label != "all":
            assert loop["failed"] == 0, (label, loop)
            assert loop["ok"] >= 3, (label, loop)
            assert loop["streams"]["cut"] == 0 and loop["streams"]["failed"] == 0, (label, loop["streams"])
            assert loop["streams"]["ok"] >= 1, (label, loop["streams"])


def test_new_certificates_are_picked_up_by_a_reload_without_a_failed_request():
    """Issue 41: every host's certificate signed again (the controller's copies removed, as a renewal does) and rolled
    out by the serve stage and fleet.yml while requests and long streams go through the balancer and straight to each
    host's edge: the edges and the balancer reload, present the new certificates, no request fails and no stream is
    cut; the replicas are not restarted."""
    hosts_dir = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "tls", "hosts")
    before, replicas = presented_certificates(), {h: container(h) for h in GPUS}
    for name in os.listdir(hosts_dir):
        if name.endswith(".crt"):
            os.remove(os.path.join(hosts_dir, name))
    traffic = Traffic(balancer_and_edges(), workers=1, streams=1).start()
    try:
        serve, fleet = serve_and_balance()
    finally:
        summary = traffic.stop()
    after = presented_certificates()
    record("tls_rotation", {"serve_seconds": serve.seconds, "fleet_seconds": fleet.seconds, "requests": summary,
                            "listeners_renewed": sorted(l for l in after if after[l] != before[l])})
    assert serve.returncode == 0, serve.stdout[-3000:]
    assert fleet.returncode == 0, fleet.stdout[-3000:]
    assert all(after[l] != before[l] for l in before), "a listener still presents its old certificate"
    assert {h: container(h) for h in GPUS} == replicas, "a replica was restarted for a new certificate"
    assert_no_request_failed(summary)


def certificates_in(pem):
    return pem.count("-----BEGIN CERTIFICATE-----")


def verified_by(ca_pem):
    """{listener: True when its certificate verifies against ca_pem alone (and names the address dialled)}."""
    context = ssl.create_default_context(cadata=ca_pem)
    out = {}
    for listener in presented_certificates():
        host, port = listener.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=10) as raw:
                with context.wrap_socket(raw, server_hostname=host):
                    out[listener] = True
        except ssl.SSLError:
            out[listener] = False
    return out


def test_a_ca_rotation_with_overlap_fails_no_request():
    """Issue 41 item 4: the fleet's CA rotated in its three phases (llmfleet_tls_ca_rotation start, finish, end; each the
    serve stage then fleet.yml) while requests and streams go through the balancer and straight to the edges. The
    client takes the hosts' bundle after start (docs/SECURITY.md: give your clients the bundle), as a user's would:
    no request fails, no stream is cut, no replica restarts; at the end every listener verifies against the new CA
    alone and no host trusts the old one."""
    old_ca = on(EDGE, "cat %s" % CA).stdout
    replicas = {h: container(h) for h in GPUS}
    phases = {}
    traffic = Traffic(balancer_and_edges(), workers=1, streams=1).start()
    try:
        for phase in ("start", "finish", "end"):
            serve, fleet = serve_and_balance("-e", "llmfleet_tls_ca_rotation=%s" % phase)
            bundles = [on(h, "cat %s" % CA).stdout for h in GPUS + [EDGE]]
            phases[phase] = {"rc": [serve.returncode, fleet.returncode], "seconds": [serve.seconds, fleet.seconds],
                             "cas_trusted": [certificates_in(b) for b in bundles]}
            assert serve.returncode == 0, (phase, serve.stdout[-3000:])
            assert fleet.returncode == 0, (phase, fleet.stdout[-3000:])
            assert len(set(bundles)) == 1, (phase, "the hosts trust different CAs")
            if phase == "start":
                trust_fleet_ca(again=True)  # the client gets the bundle: the current and the next CA
    finally:
        summary = traffic.stop()
    new_ca = on(EDGE, "cat %s" % CA).stdout
    record("tls_ca_rotation", {"phases": phases, "requests": summary, "verified_by_new_ca_alone": verified_by(new_ca)})
    assert [p["cas_trusted"][0] for p in phases.values()] == [2, 2, 1], phases
    assert certificates_in(new_ca) == 1 and new_ca != old_ca
    assert all(verified_by(new_ca).values()), verified_by(new_ca)
    assert not any(verified_by(old_ca).values()), "a listener still presents a certificate of the old CA"
    assert {h: container(h) for h in GPUS} == replicas, "a replica was restarted for a new CA"
    assert_no_request_failed(summary)


def test_alert_rules_pass_their_promtool_unit_tests():
    with open(os.path.join(PROJECT, "tests", "monitoring", "llmfleet.rules.test.yml")) as handle:
        tests = handle.read()
    subprocess.run(["docker", "exec", "-i", EDGE, "sh", "-c", "cat > /tmp/llmfleet.rules.test.yml"],
                   input=tests, text=True, check=True)
    result = on(EDGE, "promtool test rules /tmp/llmfleet.rules.test.yml", check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rolling_upgrade_to_v2_fails_no_request():
    assert all(digest(container(h)[0]) == digest(V1) for h in GPUS), "the converge should serve v1"
    result, loop = roll_under_load("-e", "vllm_image_ref=%s" % V2)
    times = host_times(result.stdout)
    record("roll_v1_to_v2", {"playbook_rc": result.returncode, "playbook_seconds": result.seconds,
                             "requests": loop, "seconds_per_host": {h: t[0] for h, t in times.items()},
                             "seconds_out_of_balancer": {h: t[1] for h, t in times.items()}})
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert loop["failed"] == 0, loop
    assert loop["ok"] >= 10, loop
    # Streams of hundreds of tokens were in flight on the hosts as they were drained: none cut, none failed.
    assert loop["streams"]["cut"] == 0 and loop["streams"]["failed"] == 0, loop["streams"]
    assert loop["streams"]["ok"] >= 2, loop["streams"]
    assert sorted(times) == GPUS
    for host in GPUS:
        ref, _unused, running = container(host)
        assert running and digest(ref) == digest(V2), (host, ref)
    wait_all_up()


def test_broken_image_stops_the_roll_at_the_first_host():
    gpu2_before = container(GPUS[1])
    result, loop = roll_under_load("-e", "vllm_image_ref=%s" % BROKEN)
    state = {name: row["status"] for name, row in servers().items()}
    record("roll_broken_image", {"playbook_rc": result.returncode, "playbook_seconds": result.seconds,
                                 "requests": loop, "balancer_after": state,
                                 "hosts_upgraded": sorted(host_times(result.stdout))})
    assert result.returncode != 0
    assert host_times(result.stdout) == {}
    # The first host failed (its health gate) and stays out of the balancer ...
    recap = {m.group(1): int(m.group(2)) for m in re.finditer(re.escape(NAME) + r"(-\w+)\s*:\s*ok=\d+.*?failed=(\d+)",
                                                              result.stdout)}
    assert recap == {"-edge": 0, "-gpu1": 1, "-gpu2": 0}, recap
    assert state == {GPUS[0] + "-0": "MAINT", GPUS[1] + "-0": "UP"}
    # ... the second was never touched and carried every request.
    assert container(GPUS[1]) == gpu2_before and digest(gpu2_before[0]) == digest(V2)
    assert loop["failed"] == 0, loop
    assert loop["ok"] >= 5, loop
    assert loop["streams"]["cut"] == 0 and loop["streams"]["failed"] == 0, loop["streams"]


def test_rollback_puts_the_failed_host_back_on_the_good_version():
    result, loop = roll_under_load("-e", "vllm_image_ref=%s" % V2, "-e", "upgrade_allow_degraded_start=true")
    times = host_times(result.stdout)
    record("rollback_to_v2", {"playbook_rc": result.returncode, "playbook_seconds": result.seconds, "requests": loop,
                              "seconds_per_host": {h: t[0] for h, t in times.items()}})
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert loop["failed"] == 0, loop
    assert loop["streams"]["cut"] == 0 and loop["streams"]["failed"] == 0, loop["streams"]
    for host in GPUS:
        ref, _unused, running = container(host)
        assert running and digest(ref) == digest(V2), (host, ref)
    wait_all_up()


FIND_ENGINE = ("import os\n"
               "for p in os.listdir('/proc'):\n"
               "    if not p.isdigit() or p == str(os.getpid()): continue\n"
               "    try: t = open('/proc/%s/cmdline' % p, 'rb').read() + open('/proc/%s/comm' % p, 'rb').read()\n"
               "    except OSError: continue\n"
               "    if b'EngineCore' in t: print(p)\n")


def test_a_frozen_engine_leaves_the_balancer_within_seconds_and_the_watchdog_brings_it_back():
    """SIGSTOP of gpu1's engine core: its /health still says 200, the balancer's completion check takes it out of
    rotation within (fall x interval) + timeout, the host's watchdog restarts it, it comes back UP; gpu2 untouched."""
    wait_all_up()
    server = "%s-0" % GPUS[0]
    gpu2_before = container(GPUS[1])
    pids = run("docker", "exec", GPUS[0], "docker", "exec", "llmfleet-vllm-0", "python3", "-c", FIND_ENGINE).stdout.split()
    assert pids, "no EngineCore process on %s" % GPUS[0]
    started = time.monotonic()
    on(GPUS[0], "docker exec llmfleet-vllm-0 kill -STOP %s" % " ".join(pids))
    health = on(GPUS[0], "curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://127.0.0.1:18000/health",
                check=False).stdout
    out_s = back_s = None
    while time.monotonic() - started < 600:
        status = servers()[server]["status"]
        if out_s is None and status.startswith("DOWN"):
            out_s = time.monotonic() - started
        if out_s is not None and status == "UP":
            back_s = time.monotonic() - started
            break
        time.sleep(1)
    # While one replica is out, the other serves every request.
    ok = http(balancer_url() + "/v1/completions", {"model": MODEL, "prompt": "hi", "max_tokens": 1}, key=API_KEY)[0]
    journal = on(GPUS[0], "journalctl --no-pager -o cat -u llmfleet-watchdog.service", check=False).stdout
    record("frozen_engine", {"health_while_frozen": health, "out_of_balancer_s": out_s and round(out_s, 1),
                             "back_up_s": back_s and round(back_s, 1), "served_meanwhile": ok})
    assert health == "200", "the fault did not reproduce a hang behind a healthy /health"
    assert out_s is not None and out_s <= 20, "still in rotation %s s after the freeze" % out_s
    assert back_s is not None, "not back UP after the watchdog's restart:\n%s" % journal[-3000:]
    assert "is hung" in journal, journal[-3000:]
    assert ok == 200
    assert container(GPUS[1]) == gpu2_before


def test_prometheus_sees_every_target_up_after_the_rolls():
    deadline = time.monotonic() + 60
    while True:
        active = json.loads(on(EDGE, "curl -fsS http://127.0.0.1:9090/api/v1/targets?state=active").stdout)[
            "data"]["activeTargets"]
        up = [t for t in active if t["health"] == "up"]
        if len(up) == len(active) or time.monotonic() > deadline:
            break
        time.sleep(5)
    record("prometheus_targets_up_at_end", "%d/%d" % (len(up), len(active)))
    assert len(up) == len(active) == 7


# Many models in the fleet (issue #39's fleet case): model A (the tiny Qwen3-MoE, served as "tiny") on both hosts, model
# B (the tiny Llama) on the first host only. A user's inventory: llmfleet_models for the fleet in group_vars/all (the
# balancer routes by model because the list is defined), and the first host's own list in its host_vars.
LLAMA_REPO, _AT, LLAMA_COMMIT = next((r.partition("@") for r in os.environ.get("LLMFLEET_TEST_HUB_ARCH_REPOS", "").split(",")
                                     if r.startswith("llmfleet-test/tiny-llama@")), ("", "", ""))
MODEL_B = "tiny-llama"


def model_a(**changes):
    return dict({"name": MODEL, "model": HUB_REPO, "revision": HUB_COMMIT, "weights_dir": WEIGHTS_DIR,
                 "max_model_len": 512}, **changes)


# B's streams stay inside its context (max_model_len 256): a longer one is vLLM's 400, not a failure of the roll.
MODEL_B_STREAM_TOKENS = 200


def model_b(**changes):
    return dict({"name": MODEL_B, "model": LLAMA_REPO, "revision": LLAMA_COMMIT, "max_model_len": 256}, **changes)


def write_many_models(a, b=None):
    """The inventory directory of many models (a, b: models A's and B's entries): A everywhere, A and B on the first
    host."""
    root = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "many-models-inventory")
    for sub, name, data in (("group_vars", "all", {"llmfleet_models": [a]}),
                            ("host_vars", GPUS[0], {"llmfleet_models": [a, b or model_b()]})):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
        with open(os.path.join(root, sub, name + ".yml"), "w") as handle:
            json.dump(data, handle)  # JSON is YAML
    with open(os.path.join(root, "hosts.yml"), "w") as handle:
        json.dump({"all": {"hosts": dict((h, None) for h in GPUS + [EDGE])}}, handle)
    _MANY[:] = [root]


def backends_by_model():
    """{backend: {server: stats row}} of the balancer's per-model backends (llmfleet_model_<name>)."""
    out = {}
    for row in server_rows():
        if row.get("pxname", "").startswith("llmfleet_model_"):
            out.setdefault(row["pxname"], {})[row["svname"]] = row
    return out


def instance(host, name):
    """(image, start time, running) of a model's replica 0 on a host, or None where it has none."""
    out = on(host, "docker inspect --format '{{.Config.Image}} {{.State.StartedAt}} {{.State.Running}}' "
             "llmfleet-vllm-%s-0" % name, check=False).stdout.split()
    return (out[0], out[1], out[2] == "true") if len(out) == 3 else None


def chat(base, model, key=API_KEY, content="hi"):
    return http(base + "/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": content}],
                                                "max_tokens": 4}, key=key)


@pytest.mark.skipif(not (HUB_REPO and LLAMA_REPO), reason="needs the test bed's hub mirror with the tiny Llama")
def test_the_fleet_serves_model_a_on_both_hosts_and_model_b_on_one_behind_one_endpoint():
    """site.yml then fleet.yml with the inventory of many models: each host runs its models' replicas, and the balancer's
    one https endpoint routes A to both hosts' edges and B to the first host's only; /v1/models lists both; the second
    host's edge knows no B."""
    write_many_models(model_a())
    site = playbook("site.yml")
    fleet = playbook("fleet.yml") if site.returncode == 0 else site
    record("many_models_converge", {"site_seconds": site.seconds, "fleet_seconds": fleet.seconds})
    assert site.returncode == 0, site.stdout[-6000:]
    assert fleet.returncode == 0, fleet.stdout[-6000:]
    assert all(instance(h, MODEL) and instance(h, MODEL)[2] for h in GPUS)
    assert instance(GPUS[0], MODEL_B)[2] and instance(GPUS[1], MODEL_B) is None
    # The balancer: one backend per model, A over both hosts' edges, B over the first host's only.
    backends = backends_by_model()
    assert {b: sorted(s) for b, s in backends.items()} == {
        "llmfleet_model_" + MODEL: sorted("%s-%s" % (h, MODEL) for h in GPUS),
        "llmfleet_model_" + MODEL_B: ["%s-%s" % (GPUS[0], MODEL_B)]}, backends
    base = balancer_url()
    status, text = http(base + "/v1/models", key=API_KEY)
    assert status == 200 and sorted(m["id"] for m in json.loads(text)["data"]) == sorted([MODEL, MODEL_B]), text
    before = {b: {n: int(r["stot"]) for n, r in s.items()} for b, s in backends.items()}
    # Eight conversations of their own: the balancer routes by prompt prefix, so one prompt would stay on one host
    # (2 ** -7 odds of all eight on one).
    answers = [chat(base, m, content="Conversation %d: hi" % n) for n, m in enumerate([MODEL] * 8 + [MODEL_B] * 4)]
    assert all(status == 200 for status, _text in answers), answers
    assert [json.loads(t)["model"] for _s, t in answers] == [MODEL] * 8 + [MODEL_B] * 4
    after = {b: {n: int(r["stot"]) for n, r in s.items()} for b, s in backends_by_model().items()}
    moved = {b: {n: after[b][n] - before[b][n] for n in after[b]} for b in after}
    record("many_models_routing", moved)
    assert all(count > 0 for count in moved["llmfleet_model_" + MODEL].values()), moved
    assert moved["llmfleet_model_" + MODEL_B] == {"%s-%s" % (GPUS[0], MODEL_B): 4}, moved
    # Straight to the edges: the first host answers B, the second knows no B (404 naming what it serves).
    assert chat(edge_url(GPUS[0]), MODEL_B)[0] == 200
    status, text = chat(edge_url(GPUS[1]), MODEL_B)
    assert status == 404 and MODEL_B not in json.loads(text)["error"]["message"].split(":")[-1], text
    wait_for_model_backends_up()


def wait_for_model_backends_up(timeout=180):
    deadline = time.monotonic() + timeout
    while True:
        state = {n: r["status"] for s in backends_by_model().values() for n, r in s.items()}
        if state and set(state.values()) == {"UP"}:
            return state
        assert time.monotonic() < deadline, "not every model's server UP behind the balancer: %s" % state
        time.sleep(2)


def roll_under_traffic(key, upgrade_models, targets):
    """upgrade.yml -e <upgrade_models> while Traffic(targets) runs, recorded under key: (the run, the traffic summary,
    {host: (seconds, seconds out)}, (A's replicas by host, B's) before, the same after)."""
    before = ({h: instance(h, MODEL) for h in GPUS}, instance(GPUS[0], MODEL_B))
    traffic = Traffic(targets, workers=2, streams=1).start()
    try:
        result = playbook("upgrade.yml", "-e", upgrade_models)
    finally:
        summary = traffic.stop()
    times = host_times(result.stdout)
    after = ({h: instance(h, MODEL) for h in GPUS}, instance(GPUS[0], MODEL_B))
    record(key, {"playbook_rc": result.returncode, "playbook_seconds": result.seconds, "requests": summary,
                 "seconds_per_host": {h: t[0] for h, t in times.items()},
                 "model_b_started_at": [before[1][1], after[1] and after[1][1]],
                 "model_a_started_at": {h: [before[0][h][1], after[0][h] and after[0][h][1]] for h in GPUS}})
    return result, summary, times, before, after


@pytest.mark.skipif(not (HUB_REPO and LLAMA_REPO), reason="needs the test bed's hub mirror with the tiny Llama")
def test_a_rolling_upgrade_of_model_a_fails_no_request_and_leaves_model_b_untouched():
    """upgrade.yml -e upgrade_models=[A] with a change to A's entry (an environment variable of its own) while requests
    and streams of A and of B go through the balancer: A's replicas restart on both hosts one host at a time with no
    failed request and no cut stream; B's container keeps its start time and B's requests all succeed."""
    assert _MANY, "runs after test_the_fleet_serves_model_a_on_both_hosts_and_model_b_on_one_behind_one_endpoint"
    write_many_models(model_a(env={"LLMFLEET_ROLL_MARK": "1"}))
    result, summary, times, (a_before, b_before), (a_after, b_after) = roll_under_traffic(
        "roll_model_a", json.dumps({"upgrade_models": [MODEL]}),
        {"model_a": (balancer_url() + "/v1", MODEL), "model_b": (balancer_url() + "/v1", MODEL_B, MODEL_B_STREAM_TOKENS)})
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert sorted(times) == GPUS
    assert all(a_after[h][2] and a_after[h][1] != a_before[h][1] for h in GPUS), (a_before, a_after)
    assert b_after == b_before, "model B's container was restarted by a roll of model A"
    for host in GPUS:
        assert "LLMFLEET_ROLL_MARK" in on(host, "cat /etc/llmfleet/vllm-%s-0.env" % MODEL).stdout
    assert "LLMFLEET_ROLL_MARK" not in on(GPUS[0], "cat /etc/llmfleet/vllm-%s-0.env" % MODEL_B).stdout
    assert_no_request_failed(summary)
    wait_for_model_backends_up()


@pytest.mark.skipif(not (HUB_REPO and LLAMA_REPO), reason="needs the test bed's hub mirror with the tiny Llama")
def test_a_roll_of_model_b_restarts_only_its_one_host_and_no_request_fails():
    """upgrade.yml -e upgrade_models=[B] (key=value, as a user types it) with a change to B's entry: B, which only the
    first host serves, restarts there; the second host is not rolled at all (it serves no B: before, the roll failed
    there), and A's containers on both hosts keep their start time while A's requests go through. (B has one replica:
    it is out of the balancer while it restarts, so only A carries traffic here.)"""
    assert _MANY, "runs after test_the_fleet_serves_model_a_on_both_hosts_and_model_b_on_one_behind_one_endpoint"
    write_many_models(model_a(env={"LLMFLEET_ROLL_MARK": "1"}), model_b(env={"LLMFLEET_ROLL_MARK_B": "1"}))
    result, summary, times, (a_before, b_before), (a_after, b_after) = roll_under_traffic(
        "roll_model_b", "upgrade_models=[%s]" % MODEL_B, {"model_a": (balancer_url() + "/v1", MODEL)})
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert sorted(times) == [GPUS[0]], times
    assert b_after[2] and b_after[1] != b_before[1], (b_before, b_after)
    assert a_after == a_before, "model A's containers were restarted by a roll of model B"
    assert "LLMFLEET_ROLL_MARK_B" in on(GPUS[0], "cat /etc/llmfleet/vllm-%s-0.env" % MODEL_B).stdout
    assert_no_request_failed(summary)
    wait_for_model_backends_up()
    assert chat(balancer_url(), MODEL_B)[0] == 200


@pytest.mark.skipif(not (HUB_REPO and LLAMA_REPO), reason="needs the test bed's hub mirror with the tiny Llama")
def test_with_mutual_tls_an_edge_answers_the_balancer_and_no_client_without_its_certificate():
    """Issue 41 item 3 (llmfleet_tls_mutual): turned on for the fleet (the balancer first, so that it presents its
    certificate before any edge asks for one), every model still answers through the balancer; straight at an edge
    from another host, the balancer's certificate with a key gets a model, and no certificate gets 403 with or
    without a key."""
    mutual = ("-e", "llmfleet_tls_mutual=true")
    fleet = playbook("fleet.yml", *mutual)
    serve = playbook("site.yml", "--tags", "model,serve", *mutual) if fleet.returncode == 0 else fleet
    assert fleet.returncode == 0, fleet.stdout[-6000:]
    assert serve.returncode == 0, serve.stdout[-6000:]
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
    probe = ("%s -s -o /dev/null -w '%%%%{http_code}' -m 30 %%s -H 'Content-Type: application/json' -d '%s' "
             "https://%s:8000/v1/chat/completions" % (CURL, body, address(GPUS[1])))
    answers = {
        "balancer": chat(balancer_url(), MODEL)[0], "balancer_model_b": chat(balancer_url(), MODEL_B)[0],
        "edge_with_the_balancers_certificate_and_key": on(EDGE, probe % (
            "--cert /etc/llmfleet/tls/balancer.pem -H 'Authorization: Bearer %s'" % API_KEY), check=False).stdout,
        "edge_without_certificate_with_key": on(EDGE, probe % ("-H 'Authorization: Bearer %s'" % API_KEY),
                                                check=False).stdout,
        "edge_without_certificate_or_key": on(EDGE, probe % "", check=False).stdout}
    record("mutual_tls", answers)
    # Prometheus (on the balancer's host, off the serving hosts) presents its own certificate: it still scrapes every
    # edge (a scrape that began before the edges asked for certificates may still show; the next ones count).
    time.sleep(15)
    deadline = time.monotonic() + 60
    while True:
        active = json.loads(on(EDGE, "curl -fsS http://127.0.0.1:9090/api/v1/targets?state=active").stdout)[
            "data"]["activeTargets"]
        vllm = [(t["scrapeUrl"], t["health"], t["lastError"]) for t in active if t["labels"]["job"] == "vllm"]
        if all(health == "up" for _url, health, _error in vllm) or time.monotonic() > deadline:
            break
        time.sleep(5)
    record("mutual_tls_prometheus_vllm_targets", vllm)
    assert len(vllm) == 3 and all(health == "up" for _url, health, _error in vllm), vllm
    assert answers == {"balancer": 200, "balancer_model_b": 200, "edge_with_the_balancers_certificate_and_key": "200",
                       "edge_without_certificate_with_key": "403", "edge_without_certificate_or_key": "403"}, answers
