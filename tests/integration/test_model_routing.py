"""Routing by model through REAL HAProxy 2.6 (Debian 12's, the test-bed image tests/images/haproxy): the edge's and
the fleet balancer's configurations, rendered from the role's templates and the data of model_routing.py /
haproxy_config.py, run in a container in front of stand-in replicas.

Test doubles: the replicas (and, for the balancer, the hosts' edges) are python http.server processes that answer
like vLLM's API would be reached (GET /health; any POST answers which stand-in got it, the "model" it read and the
Authorization it was sent). No GPU and no vLLM are needed for what is tested here: HAProxy's choice of backend.
"""
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import jinja2
import pytest
import yaml

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "collections"))

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.haproxy_config import (  # noqa: E402
    api_key_file, balancer_config, balancer_route_files, edge_config, edge_route_files)
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.tls import haproxy_tls  # noqa: E402

ROLE = TOP / "roles" / "loadbalancer"
MAX_BODY = 262144
REPLICA_KEY = "replica-secret-key"
FULL_KEY = "full-key-1"
BETA_KEY = "beta-only-key"
LORA_KEY = "lora-only-key"

STANDIN = Path(__file__).resolve().parent / "standin_replicas.py"

pytestmark = pytest.mark.skipif(not shutil.which("docker"), reason="needs Docker (the test bed)")


def role_values(**overrides):
    with open(ROLE / "defaults" / "main.yml") as fh:
        values = yaml.safe_load(fh)
    values.update(ansible_managed="Ansible managed", inventory_hostname="testhost", loadbalancer_serving_group="gpu_nodes")
    # Plain HTTP here (TLS is tested apart).
    values["__loadbalancer_tls"] = haproxy_tls([], {"enabled": False, "pem": "", "ca_file": ""})
    values.update(overrides)
    return values


def render(template, values):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROLE / "templates")), trim_blocks=True,
                             undefined=jinja2.StrictUndefined)
    text = env.get_template(template).render(values)
    return text if text.endswith("\n") else text + "\n"


def container_files(files):
    """The map files' paths inside the container (/cfg)."""
    return dict((kind, "/cfg/%s.map" % kind) for kind in files)


MODEL_KEYS = [{"key": BETA_KEY, "models": ["beta"]}, {"key": LORA_KEY, "models": ["alpha-lora"]},
              {"key": FULL_KEY, "models": ["*"]}]
EDGE_MEMBERS = [
    {"name": "alpha-0", "model": "alpha", "adapters": ["alpha-lora"], "port": 8000, "address": "127.0.0.1",
     "backend_port": 18000},
    {"name": "alpha-1", "model": "alpha", "adapters": ["alpha-lora"], "port": 8001, "address": "127.0.0.1",
     "backend_port": 18001},
    {"name": "beta-0", "model": "beta", "port": 8002, "address": "127.0.0.1", "backend_port": 18002},
    # A model whose replica is down (no stand-in listens there).
    {"name": "gamma-0", "model": "gamma", "port": 8003, "address": "127.0.0.1", "backend_port": 18009},
]


def edge_setup(tmp):
    """edge.cfg and its maps, as tasks/edge.yml writes them, for the edge on port 8000."""
    files = container_files(["key_ids", "routes", "listings", "names", "upstream"])
    settings = {"bind_address": "0.0.0.0", "path_prefixes": ["/v1/", "/metrics"], "public_paths": ["/health"],
                "keys_file": "/cfg/keys.lst", "api_keys": [REPLICA_KEY], "route_by_model": True, "client_port": 8000,
                "max_body_bytes": MAX_BODY, "body_timeout": 5, "model_keys": MODEL_KEYS, "files": files}
    values = role_values(loadbalancer_edge_admin_socket="/tmp/edge.sock", loadbalancer_check_interval_ms=500)
    values["__loadbalancer_edge"] = edge_config(EDGE_MEMBERS, settings)
    (tmp / "edge.cfg").write_text(render("edge.cfg.j2", values))
    # The keys for every model (the replicas' own), which the replicas' own ports check for /metrics.
    (tmp / "keys.lst").write_text(api_key_file([REPLICA_KEY], "test"))
    for entry in edge_route_files(EDGE_MEMBERS, settings):
        (tmp / Path(entry["path"]).name).write_text(entry["content"])


# The balancer: model alpha on hosts h1 and h2, beta on h1 only; each host's "edge" is a stand-in.
FLEET = [
    {"name": "h1-alpha-0", "host": "h1", "address": "127.0.0.1", "port": 8000, "edge_port": 28001, "model": "alpha",
     "adapters": ["alpha-lora"]},
    {"name": "h1-beta-0", "host": "h1", "address": "127.0.0.1", "port": 8001, "edge_port": 28001, "model": "beta"},
    {"name": "h2-alpha-0", "host": "h2", "address": "127.0.0.1", "port": 8000, "edge_port": 28002, "model": "alpha",
     "adapters": ["alpha-lora"]},
]


def balancer_setup(tmp):
    files = container_files(["key_ids", "routes", "listings", "names", "upstream"])
    files = dict((kind, path.replace(".map", "-lb.map")) for kind, path in files.items())
    settings = {"path_prefixes": ["/v1/"], "keys_file": "/cfg/lb-keys.lst", "api_keys": [REPLICA_KEY],
                "check_completion": True, "check_model": "", "route_by_model": True, "max_body_bytes": MAX_BODY,
                "body_timeout": 5, "model_keys": MODEL_KEYS, "files": files}
    values = role_values(loadbalancer_admin_socket="/tmp/lb.sock", loadbalancer_stats_port=8404,
                         loadbalancer_metrics_address="", loadbalancer_served_by_header="X-Served-By",
                         loadbalancer_check_interval_ms=500, loadbalancer_port=8080)
    values["__loadbalancer_haproxy"] = balancer_config(FLEET, settings)
    text = render("haproxy.cfg.j2", values)
    # In the container: no chroot, no syslog socket, in the foreground (the role's service runs it as Debian's unit).
    text = text.replace("    chroot /var/lib/haproxy\n", "").replace("    daemon\n", "")
    (tmp / "haproxy.cfg").write_text(text)
    for entry in balancer_route_files(FLEET, settings):
        (tmp / Path(entry["path"]).name).write_text(entry["content"])


def haproxy_image():
    """The test bed's HAProxy 2.6 image (tests/images/haproxy), built when missing."""
    return subprocess.run([str(TOP / "tests" / "testbed" / "image.sh"), "haproxy"], check=True, capture_output=True,
                          text=True).stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def proxies(tmp_path_factory):
    """One container: the stand-ins, the edge (port 8000) and the balancer (port 8080)."""
    image = haproxy_image()
    tmp = tmp_path_factory.mktemp("haproxy")
    edge_setup(tmp)
    balancer_setup(tmp)
    shutil.copy(STANDIN, tmp / "standin.py")
    os.chmod(tmp, 0o755)
    name = "llmfleet-routing-%s" % uuid.uuid4().hex[:8]
    script = ("python3 /cfg/standin.py alpha-0:18000 alpha-1:18001 beta-0:18002 edge-h1:28001 edge-h2:28002 & "
              "haproxy -c -f /cfg/edge.cfg && haproxy -c -f /cfg/haproxy.cfg || exit 3; "
              "haproxy -db -f /cfg/edge.cfg & exec haproxy -db -f /cfg/haproxy.cfg")
    subprocess.run(["docker", "run", "-d", "--rm", "--name", name, "-v", "%s:/cfg:ro" % tmp,
                    "-p", "127.0.0.1::8000", "-p", "127.0.0.1::8001", "-p", "127.0.0.1::8080", image, "sh", "-c",
                    script],
                   check=True, capture_output=True)
    try:
        ports = {}
        for port in (8000, 8001, 8080):
            out = subprocess.run(["docker", "port", name, "%d/tcp" % port], capture_output=True, text=True,
                                 check=False).stdout
            ports[port] = "http://%s" % out.split()[0] if out.strip() else ""
        wait_healthy(name, ports)
        yield {"edge": ports[8000], "replica": ports[8001], "balancer": ports[8080], "dir": tmp}
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)


def wait_healthy(name, ports):
    for attempt in range(60):
        try:
            if all(request(ports[p], "GET", path)[0] == 200 for p, path in (
                    (8000, "/health?model=alpha"), (8000, "/health?model=beta"), (8080, "/health"))):
                return
        except (OSError, IndexError):
            pass
        time.sleep(0.5)
    logs = subprocess.run(["docker", "logs", name], capture_output=True, text=True, check=False)
    pytest.fail("HAProxy did not come up: %s %s" % (logs.stdout[-3000:], logs.stderr[-3000:]))


def request(base, method, path, body=None, key=None, raw=None, headers=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", "Bearer %s" % key)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status, parsed(resp.read()), resp.headers
    except urllib.error.HTTPError as exc:
        return exc.code, parsed(exc.read()), exc.headers


def answer(*args, **kwargs):
    """request's status and document."""
    return request(*args, **kwargs)[:2]


def parsed(text):
    """A JSON answer as data; anything else (a plain-text /health) as text."""
    return json.loads(text) if text.startswith(b"{") else text.decode()


def chat(model, prompt="hi", first=False):
    """A chat body; first=False puts "model" after the messages (clients do not promise to put it first)."""
    messages = [{"role": "user", "content": prompt}]
    return {"model": model, "messages": messages} if first else {"messages": messages, "model": model}


def test_the_edge_routes_each_request_to_its_models_replicas_with_the_replicas_key(proxies):
    seen = set()
    for attempt in range(6):
        status, doc = answer(proxies["edge"], "POST", "/v1/chat/completions", chat("alpha"), key=FULL_KEY)
        assert status == 200 and doc["served_by"] in ("alpha-0", "alpha-1"), doc
        # The client's key was accepted at the edge; the replica gets the one key vLLM checks.
        assert doc["authorization"] == "Bearer %s" % REPLICA_KEY
    status, doc = answer(proxies["edge"], "POST", "/v1/completions", {"prompt": "x", "model": "beta"}, key=FULL_KEY)
    assert (status, doc["served_by"], doc["model"]) == (200, "beta-0", "beta")
    for attempt in range(4):
        seen.add(request(proxies["edge"], "POST", "/v1/chat/completions", chat("alpha-lora", prompt=uuid.uuid4().hex),
                         key=FULL_KEY)[1]["served_by"])
    assert seen <= {"alpha-0", "alpha-1"}  # an adapter goes to its base model's replicas


def test_the_model_after_a_64_kib_prompt_is_still_found(proxies):
    prompt = "z" * (96 * 1024)
    for model, standins in (("beta", {"beta-0"}), ("alpha", {"alpha-0", "alpha-1"})):
        status, doc = answer(proxies["edge"], "POST", "/v1/chat/completions", chat(model, prompt), key=FULL_KEY)
        assert status == 200 and doc["served_by"] in standins and doc["bytes"] > 96 * 1024, doc
        status, doc = answer(proxies["balancer"], "POST", "/v1/chat/completions", chat(model, prompt), key=FULL_KEY)
        assert status == 200 and doc["model"] == model, doc


def test_a_body_over_the_limit_gets_413_never_a_route(proxies):
    body = json.dumps(chat("beta", "y" * (MAX_BODY + 10))).encode()
    for base in (proxies["edge"], proxies["balancer"]):
        status, doc = answer(base, "POST", "/v1/chat/completions", raw=body, key=FULL_KEY)
        assert status == 413 and "%d bytes" % MAX_BODY in doc["error"]["message"], doc
    # Without a Content-Length (chunked): refused once the buffer holds more than the limit.
    chunks = iter([body[i:i + 65536] for i in range(0, len(body), 65536)])
    req = urllib.request.Request(proxies["edge"] + "/v1/chat/completions", data=chunks, method="POST",
                                 headers={"Authorization": "Bearer %s" % FULL_KEY, "Transfer-Encoding": "chunked",
                                          "Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=20)
    assert info.value.code == 413


def model_ids(doc):
    return [m["id"] for m in doc["data"]]


def test_v1_models_lists_what_each_key_may_use(proxies):
    for base, served in ((proxies["edge"], ["alpha", "alpha-lora", "beta", "gamma"]),
                         (proxies["balancer"], ["alpha", "alpha-lora", "beta"])):
        status, doc = answer(base, "GET", "/v1/models", key=FULL_KEY)
        assert status == 200 and doc["object"] == "list" and model_ids(doc) == served
        assert model_ids(request(base, "GET", "/v1/models", key=BETA_KEY)[1]) == ["beta"]
        assert model_ids(request(base, "GET", "/v1/models", key=LORA_KEY)[1]) == ["alpha-lora"]
        assert request(base, "GET", "/v1/models", key="not-a-key")[0] == 401
        assert request(base, "GET", "/v1/models")[0] == 401


def test_an_unknown_model_gets_an_openai_404_naming_the_keys_models(proxies):
    for base in (proxies["edge"], proxies["balancer"]):
        status, doc = answer(base, "POST", "/v1/chat/completions", chat("delta"), key=BETA_KEY)
        assert status == 404 and doc["error"]["type"] == "NotFoundError" and doc["error"]["code"] == 404
        assert "`delta`" in doc["error"]["message"] and doc["error"]["message"].endswith("may use: beta.")
        # A name with JSON's special characters comes back escaped: the answer stays JSON.
        status, doc = answer(base, "POST", "/v1/completions", {"model": 'x"}\\', "prompt": "p"}, key=FULL_KEY)
        assert status == 404 and "alpha, alpha-lora, beta" in doc["error"]["message"]
        status, doc = answer(base, "POST", "/v1/completions", {"prompt": "p"}, key=FULL_KEY)
        assert status == 400 and doc["error"]["param"] == "model"


def test_a_limited_key_is_refused_for_other_models_even_on_a_shared_backend(proxies):
    for base in (proxies["edge"], proxies["balancer"]):
        assert request(base, "POST", "/v1/chat/completions", chat("beta"), key=BETA_KEY)[1]["model"] == "beta"
        status, doc = answer(base, "POST", "/v1/chat/completions", chat("alpha"), key=BETA_KEY)
        assert status == 403 and doc["error"]["message"].endswith("may use: beta.")
        # alpha-lora runs on alpha's replicas: its key still does not reach alpha itself.
        assert request(base, "POST", "/v1/chat/completions", chat("alpha-lora"), key=LORA_KEY)[0] == 200
        assert request(base, "POST", "/v1/chat/completions", chat("alpha"), key=LORA_KEY)[0] == 403
        # Nor by naming "model" twice (HAProxy reads the first, vLLM the last).
        raw = b'{"model": "alpha-lora", "messages": [{"role": "user", "content": "x"}], "model": "alpha"}'
        status, doc = answer(base, "POST", "/v1/chat/completions", raw=raw, key=LORA_KEY)
        assert status == 400 and "more than once" in doc["error"]["message"]


def test_the_balancer_sends_a_model_only_to_the_hosts_that_serve_it(proxies):
    beta = {request(proxies["balancer"], "POST", "/v1/completions", {"prompt": uuid.uuid4().hex, "model": "beta"},
                    key=FULL_KEY)[1]["served_by"] for attempt in range(12)}
    alpha = {request(proxies["balancer"], "POST", "/v1/completions", {"prompt": uuid.uuid4().hex, "model": "alpha"},
                     key=FULL_KEY)[1]["served_by"] for attempt in range(24)}
    assert beta == {"edge-h1"}
    assert alpha == {"edge-h1", "edge-h2"}  # prefix-aware hashing spreads distinct prompts over alpha's hosts
    # The same conversation stays on one host (its prefix cache).
    same = {request(proxies["balancer"], "POST", "/v1/chat/completions", chat("alpha", "one conversation"),
                    key=FULL_KEY)[2].get("X-Served-By") for attempt in range(5)}
    assert len(same) == 1 and same <= {"h1-alpha", "h2-alpha"}


def test_no_key_reaches_the_rendered_configuration(proxies):
    for cfg in ("edge.cfg", "haproxy.cfg"):
        text = (proxies["dir"] / cfg).read_text()
        for key in (REPLICA_KEY, FULL_KEY, BETA_KEY, LORA_KEY):
            assert key not in text


def test_prometheus_reaches_each_replicas_metrics_by_name_on_the_one_port(proxies):
    status, doc = answer(proxies["edge"], "GET", "/metrics?replica=beta-0", key=BETA_KEY)
    assert (status, doc["served_by"], doc["path"]) == (200, "beta-0", "/metrics?replica=beta-0")
    assert request(proxies["edge"], "GET", "/metrics?replica=alpha-1", key=FULL_KEY)[1]["served_by"] == "alpha-1"
    for path in ("/metrics", "/metrics?replica=nope"):
        status, doc = answer(proxies["edge"], "GET", path, key=FULL_KEY)
        assert status == 400 and "alpha-0, alpha-1, beta-0" in doc["error"]["message"]
    assert request(proxies["edge"], "GET", "/metrics?replica=beta-0")[0] == 401
    # A replica's own port answers its /metrics with a key for every model, and never the API.
    metrics = {"served_by": "alpha-1", "path": "/metrics"}
    assert answer(proxies["replica"], "GET", "/metrics", key=REPLICA_KEY) == (200, metrics)
    assert answer(proxies["replica"], "GET", "/health") == (200, {"served_by": "alpha-1", "path": "/health"})
    assert answer(proxies["replica"], "GET", "/metrics", key=BETA_KEY)[0] == 401
    assert answer(proxies["replica"], "POST", "/v1/chat/completions", chat("alpha"), key=REPLICA_KEY)[0] == 404


def test_a_model_whose_replicas_are_down_is_answered_503_and_named_by_the_edges_health(proxies):
    for attempt in range(40):  # until the edge's checks have marked gamma-0 DOWN
        if request(proxies["edge"], "GET", "/health?model=gamma")[0] == 503:
            break
        time.sleep(0.25)
    assert request(proxies["edge"], "GET", "/health?model=gamma")[:2] == (503, "no replica up")
    assert request(proxies["edge"], "GET", "/health?model=beta")[:2] == (200, "ok")
    assert request(proxies["edge"], "GET", "/health")[0] == 503  # not every model has a replica up
    # Never another model's replicas.
    assert request(proxies["edge"], "POST", "/v1/chat/completions", chat("gamma"), key=FULL_KEY)[0] == 503
