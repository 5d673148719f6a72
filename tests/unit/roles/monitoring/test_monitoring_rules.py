"""The alert rules and the scrape configuration as the monitoring role renders them (its defaults), checked by
Prometheus' own promtool where it is installed (Debian's prometheus package; the monitoring host has it, and
molecule/fleet runs the same promtool unit tests there): the per-model alerts fire for a model whose every replica
is down, or whose replicas are all saturated, and stay quiet otherwise; the replicas of each model are scraped
with a `model` label."""
import json
import re
import shutil
import subprocess
from pathlib import Path

import jinja2
import pytest
import yaml

from ansible.plugins.filter.core import to_bool

from ansible_collections.llmfleet.vllm.plugins.filter.fleet import fleet_address_port
from ansible_collections.llmfleet.vllm.plugins.filter.served_models import model_backends, prometheus_model_targets
from ansible_collections.llmfleet.vllm.plugins.lookup.conventions import names

ROOT = Path(__file__).resolve().parents[4]
ROLE = ROOT / "roles" / "monitoring"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian package prometheus) not installed")


def render(template, **values):
    """As Ansible renders the role's templates: its defaults, trim_blocks, the collection's filters."""
    with open(ROLE / "defaults" / "main.yml") as fh:
        defaults = yaml.safe_load(fh)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROLE / "templates")), trim_blocks=True,
                             undefined=jinja2.StrictUndefined)
    env.filters.update({"to_json": json.dumps, "bool": to_bool,
                        "llmfleet.vllm.prometheus_model_targets": prometheus_model_targets,
                        "llmfleet.vllm.fleet_address_port": fleet_address_port})
    defaults["monitoring_api_key"] = ""
    # llmfleet_tls's default, as Ansible templates it.
    defaults["monitoring_tls"] = True
    # llmfleet_tls_mutual's default.
    defaults["monitoring_tls_mutual"] = False
    defaults.update(values, ansible_managed="Ansible managed", __monitoring_names=names())
    return env.get_template(template).render(defaults) + "\n"


def rules():
    return yaml.safe_load(render("llmfleet.rules.yml.j2"))


def alert(name):
    return next(r for g in rules()["groups"] for r in g["rules"] if r.get("alert") == name)


def test_a_model_down_is_one_alert_per_model_from_the_targets_model_label():
    rule = alert("LLMFleetModelDown")
    assert re.fullmatch(r'sum by \(model\) \(up\{job="vllm", model!=""\}\) == 0', rule["expr"])
    assert rule["labels"]["severity"] == "critical"
    assert "diagnose_model={{ $labels.model }}" in rule["annotations"]["description"]


def test_the_replica_alerts_name_their_model():
    for name in ("VLLMRequestsWaiting", "VLLMKVCacheNearlyFull", "VLLMPreempting"):
        assert "$labels.model_name" in alert(name)["annotations"]["summary"], name
    for name in ("LLMFleetTargetDown", "LLMFleetReplicaHung", "LLMFleetReplicaProbeFailing"):
        assert "$labels.model" in alert(name)["annotations"]["summary"], name


@needs_promtool
def test_promtool_accepts_the_rules_and_their_unit_tests_pass(tmp_path):
    (tmp_path / "llmfleet.rules.yml").write_text(render("llmfleet.rules.yml.j2"))
    tests = (ROOT / "tests" / "monitoring" / "llmfleet.rules.test.yml").read_text()
    tests = tests.replace("/etc/prometheus/rules/llmfleet.rules.yml", str(tmp_path / "llmfleet.rules.yml"))
    (tmp_path / "rules.test.yml").write_text(tests)
    subprocess.run([PROMTOOL, "check", "rules", str(tmp_path / "llmfleet.rules.yml")], check=True, capture_output=True)
    result = subprocess.run([PROMTOOL, "test", "rules", str(tmp_path / "rules.test.yml")], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def model_host(host, address, models):
    described = [{"name": name, "runner": "generate", "model_path": "/srv/llmfleet/models/" + name,
                  "replicas": [{"name": "%s-0" % name, "port": port, "gpus": [0]}],
                  "base_urls": ["http://%s:8000/v1" % address], "adapters": []} for name, port in models]
    return {"host": host, "address": address,
            "serving": {"served_model_name": described[0]["name"], "bind_address": address, "edge": True,
                        "replicas": described[0]["replicas"], "base_urls": described[0]["base_urls"],
                        "models": described}}


def scrape_config(backends):
    return yaml.safe_load(render("prometheus.yml.j2", __monitoring_vllm_targets_effective=backends,
                                 __monitoring_node_hosts=[], __monitoring_balancer_hosts=[], __monitoring_addresses={}))


def test_each_model_s_replicas_are_scraped_with_their_model():
    backends = model_backends([model_host("gpu1", "10.0.0.1", [("chat", 8001), ("embed", 8002)]),
                               model_host("gpu2", "10.0.0.2", [("chat", 8001)])])
    vllm = next(job for job in scrape_config(backends)["scrape_configs"] if job["job_name"] == "vllm")
    # Each replica through its host's edge (one port), named in the query: /metrics?replica=<instance>.
    assert [(g["targets"], g["labels"]["model"], g["labels"]["__param_replica"]) for g in vllm["static_configs"]] == [
        (["10.0.0.1:8000"], "chat", "chat-0"), (["10.0.0.2:8000"], "chat", "chat-0"),
        (["10.0.0.1:8000"], "embed", "embed-0")]


@needs_promtool
def test_promtool_accepts_the_scrape_configuration(tmp_path):
    backends = model_backends([model_host("gpu1", "10.0.0.1", [("chat", 8001), ("embed", 8002)])])
    (tmp_path / "prometheus.yml").write_text(render(
        "prometheus.yml.j2", __monitoring_vllm_targets_effective=backends, __monitoring_node_hosts=[],
        __monitoring_balancer_hosts=[], __monitoring_addresses={}, monitoring_tls_ca_file=str(tmp_path / "ca.crt")
    ).replace("/etc/prometheus/rules/", str(tmp_path) + "/"))
    (tmp_path / "ca.crt").write_text("")
    (tmp_path / "llmfleet.rules.yml").write_text(render("llmfleet.rules.yml.j2"))
    result = subprocess.run([PROMTOOL, "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_edges_are_scraped_over_tls_verified_against_the_fleet_ca_unless_tls_is_off():
    backends = model_backends([model_host("gpu1", "10.0.0.1", [("chat", 8001)])])
    vllm = next(job for job in scrape_config(backends)["scrape_configs"] if job["job_name"] == "vllm")
    assert vllm["scheme"] == "https" and vllm["tls_config"] == {"ca_file": "/etc/prometheus/llmfleet-ca.crt"}
    plain = yaml.safe_load(render("prometheus.yml.j2", __monitoring_vllm_targets_effective=backends,
                                  __monitoring_node_hosts=[], __monitoring_balancer_hosts=[], __monitoring_addresses={},
                                  monitoring_tls=False))
    vllm = next(job for job in plain["scrape_configs"] if job["job_name"] == "vllm")
    assert "scheme" not in vllm and "tls_config" not in vllm


def test_with_mutual_tls_prometheus_presents_its_certificate_to_the_edges():
    """llmfleet_tls_mutual: an edge refuses a client off its host without a certificate the fleet's CA signed; Prometheus
    scrapes the edges from the monitoring host, so it presents one (the role installs it where these paths say)."""
    backends = model_backends([model_host("gpu1", "10.0.0.1", [("chat", 8001)])])
    mutual = yaml.safe_load(render("prometheus.yml.j2", __monitoring_vllm_targets_effective=backends,
                                   __monitoring_node_hosts=[], __monitoring_balancer_hosts=[], __monitoring_addresses={},
                                   monitoring_tls_mutual=True))
    vllm = next(job for job in mutual["scrape_configs"] if job["job_name"] == "vllm")
    assert vllm["tls_config"] == {"ca_file": "/etc/prometheus/llmfleet-ca.crt",
                                  "cert_file": "/etc/prometheus/llmfleet-client.crt",
                                  "key_file": "/etc/prometheus/llmfleet-client.key"}
    # Off (the default): the CA only, as before.
    vllm = next(job for job in scrape_config(backends)["scrape_configs"] if job["job_name"] == "vllm")
    assert vllm["tls_config"] == {"ca_file": "/etc/prometheus/llmfleet-ca.crt"}
