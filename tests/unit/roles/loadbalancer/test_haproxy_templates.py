"""The edge's and the balancer's HAProxy configurations rendered from the data of plugin_utils/fleet/haproxy_config.py
are, byte for byte, the ones the templates rendered before that data existed (fixtures/rendered, made by the role's
templates of commit 1cc5b1e from the same inventory values): an unchanged inventory reloads no HAProxy."""
from pathlib import Path

import jinja2
import pytest
import yaml

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.haproxy_config import balancer_config, edge_config
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.tls import haproxy_tls

ROLE = Path(__file__).resolve().parents[4] / "roles" / "loadbalancer"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "rendered"
KEYS_FILE = "/etc/haproxy/llmfleet-api-keys.lst"

SCENARIOS = {
    # Two local replicas behind keys; three fleet backends (an IPv6 one), prefix routing, served-by header.
    "s1": dict(
        loadbalancer_edge_replicas=[{"name": "0", "port": 8000, "address": "127.0.0.1", "backend_port": 18000},
                                    {"name": "1", "port": 8001, "address": "127.0.0.1", "backend_port": 18001}],
        loadbalancer_api_keys=["k1-secret", "k2-secret"],
        backends=[{"name": "h1-0", "address": "10.0.0.1", "port": 8000, "served_model_name": "tiny"},
                  {"name": "h2-0", "address": "fd00::2", "port": 8000, "served_model_name": "tiny"},
                  {"name": "h3-0", "address": "host3.example", "port": 8001}],
        loadbalancer_served_by_header="X-Served-By", loadbalancer_server_maxconn=8,
        loadbalancer_metrics_address="10.0.0.9", loadbalancer_check_model="tiny"),
    # An IPv6 edge without keys; round robin with GET /health checks, no exporter.
    "s2": dict(
        loadbalancer_edge_replicas=[{"name": "a", "port": 8000, "address": "::1", "backend_port": 8000}],
        loadbalancer_edge_bind_address="::", loadbalancer_api_keys=[], loadbalancer_edge_public_paths=[],
        backends=[{"name": "h1-0", "address": "10.0.0.1", "port": 8000}],
        loadbalancer_balance="roundrobin", loadbalancer_check_completion=False, loadbalancer_metrics_address="",
        loadbalancer_check_model=""),
}


def variables(name, tls=False):
    with open(ROLE / "defaults" / "main.yml") as fh:
        values = yaml.safe_load(fh)
    values.update(SCENARIOS[name], ansible_managed="Ansible managed", inventory_hostname="localhost")
    values["__loadbalancer_edge"] = edge_config(values["loadbalancer_edge_replicas"], {
        "bind_address": values["loadbalancer_edge_bind_address"], "path_prefixes": values["loadbalancer_edge_path_prefixes"],
        "public_paths": values["loadbalancer_edge_public_paths"], "keys_file": values["loadbalancer_edge_keys_file"],
        "api_keys": values["loadbalancer_api_keys"]})
    values["__loadbalancer_haproxy"] = balancer_config(values["backends"], {
        "path_prefixes": values["loadbalancer_path_prefixes"], "keys_file": KEYS_FILE,
        "api_keys": values["loadbalancer_api_keys"], "check_completion": values["loadbalancer_check_completion"],
        "check_model": values["loadbalancer_check_model"]})
    # TLS off: the configurations as before TLS existed (the fixtures).
    values["__loadbalancer_tls"] = haproxy_tls(values["backends"], {
        "enabled": tls, "pem": "/etc/llmfleet/tls/balancer.pem", "ca_file": "/etc/llmfleet/tls/ca.crt"})
    return values


def render(template, values):
    """As Ansible renders a template file: trim_blocks, the final newline of each template dropped, then one put
    back at the end of the file when its source ends with one and the output does not."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROLE / "templates")), trim_blocks=True,
                             undefined=jinja2.StrictUndefined)
    text = env.get_template(template).render(values)
    return text if text.endswith("\n") else text + "\n"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("template", ["edge.cfg", "haproxy.cfg"])
def test_the_configuration_is_what_the_role_rendered_before(name, template):
    assert render(template + ".j2", variables(name)) == (FIXTURES / ("%s-%s" % (name, template))).read_text()


def test_another_backend_changes_the_balancer_configuration():
    """The comparison above can fail: a backend on another port is another server line."""
    values = variables("s1")
    values["__loadbalancer_haproxy"]["servers"][0]["address"] = "10.0.0.1:8009"
    assert render("haproxy.cfg.j2", values) != (FIXTURES / "s1-haproxy.cfg").read_text()


def _tls(backends, pem="/etc/llmfleet/tls/balancer.pem", **mutual):
    return haproxy_tls(backends, dict({"enabled": True, "pem": pem, "ca_file": "/etc/llmfleet/tls/ca.crt"}, **mutual))


def test_with_tls_every_listener_that_carries_a_key_binds_ssl_and_the_balancer_verifies_each_edge():
    values = variables("s1")
    values["backends"][0]["host"] = "gpu1"
    values["__loadbalancer_tls"] = _tls(values["backends"])
    balancer = render("haproxy.cfg.j2", values)
    assert "    ssl-default-bind-options ssl-min-ver TLSv1.2 no-tls-tickets\n" in balancer
    assert "    bind 0.0.0.0:8080 ssl crt /etc/llmfleet/tls/balancer.pem\n" in balancer
    assert "    bind 10.0.0.9:8405 ssl crt /etc/llmfleet/tls/balancer.pem\n" in balancer
    assert "    bind 127.0.0.1:8404\n" in balancer  # the local stats page: loopback, no key
    assert ("    server h1-0 10.0.0.1:8000 ssl verify required ca-file /etc/llmfleet/tls/ca.crt verifyhost gpu1\n"
            in balancer)
    assert "    server h2-0 [fd00::2]:8000 ssl verify required ca-file /etc/llmfleet/tls/ca.crt\n" in balancer
    values["__loadbalancer_tls"] = _tls([], "/etc/llmfleet/tls/edge.pem")
    edge = render("edge.cfg.j2", values)
    assert "    bind 0.0.0.0:8000 ssl crt /etc/llmfleet/tls/edge.pem\n" in edge
    assert "    bind 0.0.0.0:8001 ssl crt /etc/llmfleet/tls/edge.pem\n" in edge
    assert "    ssl-default-bind-ciphersuites TLS_AES_128_GCM_SHA256" in edge
    # The replicas behind the edge are on loopback: plain.
    assert "    server replica_0 127.0.0.1:18000\n" in edge


def test_with_tls_routing_by_model_binds_ssl_and_dials_each_hosts_edge_verified():
    values = by_model_values()
    backends = [dict(b, host=b["name"].split("-")[0], edge_port=8000) for b in values["backends"]]
    values["__loadbalancer_tls"] = _tls(backends)
    balancer = render("haproxy.cfg.j2", values)
    assert "    bind 0.0.0.0:8080 ssl crt /etc/llmfleet/tls/balancer.pem\n" in balancer
    emb = balancer[balancer.index("backend llmfleet_model_emb"):]
    assert ("    server h3-emb host3.example:8000 ssl verify required ca-file /etc/llmfleet/tls/ca.crt verifyhost h3\n"
            in emb)
    values["__loadbalancer_tls"] = _tls([], "/etc/llmfleet/tls/edge.pem")
    edge = render("edge.cfg.j2", values)
    assert "    bind 0.0.0.0:8000 ssl crt /etc/llmfleet/tls/edge.pem\n" in edge


def test_with_mutual_tls_the_edge_asks_for_the_balancers_certificate_and_the_balancer_presents_it():
    values = variables("s1")
    values["backends"][0]["host"] = "gpu1"
    values["__loadbalancer_tls"] = _tls(values["backends"], client_pem="/etc/llmfleet/tls/balancer.pem")
    balancer = render("haproxy.cfg.j2", values)
    assert ("    server h1-0 10.0.0.1:8000 ssl verify required ca-file /etc/llmfleet/tls/ca.crt verifyhost gpu1"
            " crt /etc/llmfleet/tls/balancer.pem\n" in balancer)
    assert "    bind 0.0.0.0:8080 ssl crt /etc/llmfleet/tls/balancer.pem\n" in balancer  # its clients: keys only
    values["__loadbalancer_tls"] = _tls([], "/etc/llmfleet/tls/edge.pem", verify_clients=True)
    edge = render("edge.cfg.j2", values)
    gate = "    http-request deny deny_status 403 if !{ ssl_c_used } !{ src 127.0.0.0/8 ::1 }\n"
    for port in (8000, 8001):
        bind = "    bind 0.0.0.0:%d ssl crt /etc/llmfleet/tls/edge.pem verify optional ca-file /etc/llmfleet/tls/ca.crt\n"
        # Right after each bind: before /health and the key check, so nothing off the host answers without one.
        assert bind % port + gate in edge


def by_model_values():
    """s1's inventory with many models: two models (one with an adapter) behind the edge and the balancer."""
    values = variables("s1")
    files = {"key_ids": "/k.map", "routes": "/r.map", "listings": "/l.map", "names": "/n.map", "upstream": "/u.map"}
    models = [("chat", ["chat-lora"]), ("emb", [])]
    members = [dict(r, model=m, adapters=a) for r, (m, a) in zip(values["loadbalancer_edge_replicas"], models)]
    values["__loadbalancer_edge"] = edge_config(members, {
        "bind_address": "0.0.0.0", "path_prefixes": ["/v1/", "/metrics"], "public_paths": ["/health"], "keys_file": "",
        "api_keys": values["loadbalancer_api_keys"], "route_by_model": True, "client_port": 8000,
        "max_body_bytes": 1048576, "model_keys": [{"key": "emb-only-secret", "models": ["emb"]}], "files": files})
    backends = [dict(b, model=m, host=b["name"].split("-")[0], edge_port=8000)
                for b, m in zip(values["backends"], ["chat", "chat", "emb"])]
    values["__loadbalancer_haproxy"] = balancer_config(backends, {
        "path_prefixes": ["/v1/"], "keys_file": KEYS_FILE, "api_keys": values["loadbalancer_api_keys"],
        "check_completion": True, "check_model": "chat", "route_by_model": True, "max_body_bytes": 1048576,
        "model_keys": [], "files": files})
    return values


def test_routing_by_model_renders_one_edge_port_and_a_backend_per_model_without_any_key():
    values = by_model_values()
    edge, balancer = render("edge.cfg.j2", values), render("haproxy.cfg.j2", values)
    assert "    tune.bufsize 1114112\n" in edge and "    tune.bufsize 1114112\n" in balancer
    assert "\nfrontend llmfleet_edge\n    bind 0.0.0.0:8000\n" in edge
    # The second replica's own port: its /metrics and /health, not the API (a limited key could use it there).
    replica = edge[edge.index("\nfrontend llmfleet_edge_1\n"):]
    replica = replica[:replica.index("\nbackend ")]
    assert "    bind 0.0.0.0:8001\n" in replica and "/v1/" not in replica and "path_beg /metrics" in replica
    assert edge.count("\nfrontend ") == 2  # replica 0's port is the client port
    for text in (edge, balancer):
        assert "\nbackend llmfleet_model_chat\n" in text and "\nbackend llmfleet_model_emb\n" in text
        assert "use_backend llmfleet_model_%[var(txn.llmfleet_backend)]\n" in text
        assert "http-request wait-for-body time 30s\n" in text
        for key in ("k1-secret", "k2-secret", "emb-only-secret"):
            assert key not in text
    # The balancer: emb only on the host that serves it, chat's check asks chat.
    emb = balancer[balancer.index("backend llmfleet_model_emb"):]
    assert "    server h3-emb host3.example:8000\n" in emb and "h1-" not in emb
    assert '"model": "chat"' in balancer[balancer.index("backend llmfleet_model_chat"):balancer.index("backend llmfleet_model_emb")]
