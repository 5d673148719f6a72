"""Mutual TLS at a host's edge (issue 41 item 3, `llmfleet_tls_mutual`) through REAL HAProxy 2.6 (Debian 12's, the
test-bed image tests/images/haproxy): the edge's configuration rendered from the role's template with the TLS parts
of plugins/plugin_utils/fleet/tls.py (verify_clients), certificates made here with openssl as the collection's CA
makes them (an EC P-256 CA, host certificates with SANs). From off the edge's host (this machine, through Docker's
port mapping): a client without a certificate is refused even with a valid key, one with the balancer's certificate
(the fleet CA signed it) reaches the model, one signed by another CA fails the handshake; the edge's own /health
(the host's smoke test and gate dial it on loopback, without a certificate) keeps answering.

Test double: the replica behind the edge (tests/integration/standin_replicas.py), as in test_model_routing.py.
"""
import json
import os
import shutil
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_model_routing import haproxy_image, render, role_values  # noqa: E402

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.haproxy_config import (  # noqa: E402
    api_key_file, edge_config, edge_route_files)
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.tls import haproxy_tls  # noqa: E402

STANDIN = Path(__file__).resolve().parent / "standin_replicas.py"
KEY = "mutual-tls-client-key"
MEMBERS = [{"name": "alpha-0", "model": "alpha", "port": 8000, "address": "127.0.0.1", "backend_port": 18000}]

pytestmark = pytest.mark.skipif(not (shutil.which("docker") and shutil.which("openssl")),
                                reason="needs Docker (the test bed) and openssl")


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True)


def certificate(cwd, name, ca, sans):
    """name.key + name.crt signed by ca (ca.key/ca.crt in cwd), an EC P-256 key as the collection makes them."""
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", name + ".key", cwd=cwd)
    openssl("req", "-new", "-key", name + ".key", "-subj", "/CN=" + name, "-out", name + ".csr", cwd=cwd)
    (cwd / (name + ".ext")).write_text("subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n" % sans)
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key", "-CAcreateserial",
            "-days", "2", "-extfile", name + ".ext", "-out", name + ".crt", cwd=cwd)


def authority(cwd, name):
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", name + ".key", cwd=cwd)
    openssl("req", "-x509", "-new", "-key", name + ".key", "-subj", "/CN=" + name, "-days", "2", "-out",
            name + ".crt", cwd=cwd)


def make_certificates(tmp):
    authority(tmp, "ca")
    authority(tmp, "other-ca")
    certificate(tmp, "edge", "ca", "DNS:localhost,IP:127.0.0.1")
    certificate(tmp, "balancer", "ca", "DNS:balancer")
    certificate(tmp, "stranger", "other-ca", "DNS:stranger")
    (tmp / "edge.pem").write_text((tmp / "edge.crt").read_text() + (tmp / "edge.key").read_text())


def edge_setup(tmp):
    files = dict((kind, "/cfg/%s.map" % kind) for kind in ("key_ids", "routes", "listings", "names", "upstream"))
    settings = {"bind_address": "0.0.0.0", "path_prefixes": ["/v1/", "/metrics"], "public_paths": ["/health"],
                "keys_file": "/cfg/keys.lst", "api_keys": [KEY], "route_by_model": True, "client_port": 8000,
                "max_body_bytes": 262144, "body_timeout": 5, "model_keys": [{"key": KEY, "models": ["*"]}],
                "files": files}
    values = role_values(loadbalancer_edge_admin_socket="/tmp/edge.sock", loadbalancer_check_interval_ms=500)
    values["__loadbalancer_edge"] = edge_config(MEMBERS, settings)
    values["__loadbalancer_tls"] = haproxy_tls([], {"enabled": True, "pem": "/cfg/edge.pem", "ca_file": "/cfg/ca.crt",
                                                    "verify_clients": True, "local_addresses": ["0.0.0.0"]})
    (tmp / "edge.cfg").write_text(render("edge.cfg.j2", values))
    (tmp / "keys.lst").write_text(api_key_file([KEY], "test"))
    for entry in edge_route_files(MEMBERS, settings):
        (tmp / Path(entry["path"]).name).write_text(entry["content"])


@pytest.fixture(scope="module")
def edge(tmp_path_factory):
    image = haproxy_image()
    tmp = tmp_path_factory.mktemp("mtls")
    make_certificates(tmp)
    edge_setup(tmp)
    shutil.copy(STANDIN, tmp / "standin.py")
    for path in [tmp] + list(tmp.iterdir()):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    name = "llmfleet-mtls-%s" % uuid.uuid4().hex[:8]
    script = ("python3 /cfg/standin.py alpha-0:18000 & haproxy -c -f /cfg/edge.cfg || exit 3; "
              "exec haproxy -db -f /cfg/edge.cfg")
    subprocess.run(["docker", "run", "-d", "--rm", "--name", name, "-v", "%s:/cfg:ro" % tmp,
                    "-p", "127.0.0.1::8000", image, "sh", "-c", script], check=True, capture_output=True)
    try:
        out = subprocess.run(["docker", "port", name, "8000/tcp"], capture_output=True, text=True, check=True).stdout
        port = int(out.split()[0].rsplit(":", 1)[1])
        yield {"port": port, "dir": tmp, "name": name}
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)


def chat(edge, client=None, key=KEY):
    """A chat request from off the edge's host over TLS verified against the fleet CA, presenting client (a name of
    make_certificates) or no certificate: (status, document) or the handshake's error."""
    context = ssl.create_default_context(cafile=str(edge["dir"] / "ca.crt"))
    if client:
        context.load_cert_chain(str(edge["dir"] / (client + ".crt")), str(edge["dir"] / (client + ".key")))
    body = json.dumps({"model": "alpha", "messages": [{"role": "user", "content": "hi"}]}).encode()
    req = urllib.request.Request("https://127.0.0.1:%d/v1/chat/completions" % edge["port"], data=body, method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
    try:
        with urllib.request.urlopen(req, timeout=20, context=context) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except (urllib.error.URLError, ssl.SSLError, ConnectionError) as exc:
        return None, repr(getattr(exc, "reason", exc))


def ready(edge):
    for attempt in range(60):
        status, _doc = chat(edge, "balancer")
        if status == 200:
            return
        subprocess.run(["sleep", "0.5"], check=True)
    logs = subprocess.run(["docker", "logs", edge["name"]], capture_output=True, text=True, check=False)
    pytest.fail("the edge did not come up: %s %s" % (logs.stdout[-2000:], logs.stderr[-2000:]))


def test_the_balancers_certificate_reaches_the_model(edge):
    ready(edge)
    status, doc = chat(edge, "balancer")
    assert status == 200 and doc["served_by"] == "alpha-0", doc


def test_a_client_off_the_host_without_a_certificate_is_refused_even_with_a_valid_key(edge):
    ready(edge)
    status, doc = chat(edge, None)
    assert status == 403, (status, doc)


def test_a_certificate_another_ca_signed_fails_the_handshake(edge):
    ready(edge)
    status, doc = chat(edge, "stranger")
    assert status is None and ("certificate" in doc.lower() or "alert" in doc.lower()), (status, doc)


def test_the_hosts_own_clients_on_loopback_need_no_certificate(edge):
    # the smoke test and the health gate dial the edge on the host itself, without a client certificate
    out = subprocess.run(["docker", "exec", edge["name"], "python3", "-c",
                          "import ssl,urllib.request as u; c=ssl.create_default_context(cafile='/cfg/ca.crt');"
                          "r=u.Request('https://127.0.0.1:8000/v1/chat/completions',method='POST',"
                          "data=b'{\"model\":\"alpha\",\"messages\":[]}',headers={'Authorization':'Bearer %s',"
                          "'Content-Type':'application/json'});print(u.urlopen(r,context=c,timeout=20).status)" % KEY],
                         capture_output=True, text=True, check=False)
    assert out.stdout.strip() == "200", (out.stdout, out.stderr[-1500:])
