"""The loadbalancer role routing by model on a real host (the test bed's Debian 12 systemd image, HAProxy 2.6 from
Debian): the edge entry point and the balancer, as ansible-playbook runs them, then a drain and the balancer's re-run
that puts the drained hosts back. test_model_routing.py proves the routing itself; this, the role's wiring: its files
(maps root only, no key in a configuration or the journal), its checks, and a re-run with changed=0.

Test doubles: the replicas are python http.server stand-ins inside the host (vLLM needs a GPU or the CPU image, and
what is tested is HAProxy's choice); the balancer's backends are given (loadbalancer_backends) instead of read from
serving hosts. Needs the test bed (MOLECULE_HOST_IMAGE) and Debian's package mirror (HAProxy is installed by the role).
"""
import json
import os
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("MOLECULE_HOST_IMAGE", "")
KEYS = {"replica": "replica-secret-5b1e", "full": "full-key-77c2", "beta": "beta-only-key-90ad"}
pytestmark = pytest.mark.skipif(not IMAGE, reason="needs the test bed (MOLECULE_HOST_IMAGE)")

# The stand-in replicas (TEST DOUBLE): tests/integration/standin_replicas.py.
STANDIN = Path(__file__).resolve().parent / "standin_replicas.py"

PLAYS = """
- name: Routing by model on one host (edge, balancer, drain)
  hosts: all
  gather_facts: true
  vars:
    llmfleet_models: []
    llmfleet_api_key: {replica}
    llmfleet_api_keys: [{{key: {beta}, models: [beta]}}, {{key: {full}}}]
  tasks:
    - name: The edge, as vllm_server includes it
      ansible.builtin.include_role:
        name: llmfleet.vllm.loadbalancer
        tasks_from: edge
      vars:
        loadbalancer_edge_replicas:
          - {{name: alpha-0, model: alpha, adapters: [alpha-lora], port: 8000, address: 127.0.0.1, backend_port: 18000}}
          - {{name: beta-0, model: beta, port: 8001, address: 127.0.0.1, backend_port: 18001}}
        loadbalancer_api_keys: [{replica}]
      when: step == 'serve'
    - name: The balancer
      ansible.builtin.include_role:
        name: llmfleet.vllm.loadbalancer
      vars:
        loadbalancer_smoke_test: false
        loadbalancer_wait_timeout: 60
        loadbalancer_backends:
          - {{name: a, host: "{{{{ inventory_hostname }}}}", address: 127.0.0.1, port: 18000, edge_port: 8000, model: alpha,
              adapters: [alpha-lora]}}
          - {{name: b, host: "{{{{ inventory_hostname }}}}", address: 127.0.0.1, port: 18001, edge_port: 8000, model: beta,
              runner: pooling}}
      when: step == 'serve'
    - name: The drain, as upgrade.yml includes it
      ansible.builtin.include_role:
        name: llmfleet.vllm.loadbalancer
        tasks_from: drain
      vars:
        loadbalancer_drain_balancers: ["{{{{ inventory_hostname }}}}"]
        loadbalancer_drain_timeout: 10
      when: step == 'drain'
""".format(**KEYS)

SERVING = {"served_model_name": "alpha", "bind_address": "127.0.0.1", "edge": True,
           "replicas": [{"name": "alpha-0", "port": 18000}],
           "models": [{"name": "alpha", "replicas": [{"name": "alpha-0", "port": 18000}],
                       "base_urls": ["http://127.0.0.1:8000/v1"]},
                      {"name": "beta", "runner": "pooling", "replicas": [{"name": "beta-0", "port": 18001}],
                       "base_urls": ["http://127.0.0.1:8000/v1"]}]}


def sh(name, script, check=True):
    return subprocess.run(["docker", "exec", name, "sh", "-c", script], capture_output=True, text=True, check=check)


def playbook(name, tmp, step):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(TOP / "collections"), ANSIBLE_CONFIG=str(TOP / "ansible.cfg"),
               PATH="%s:%s" % (TOP / ".venv" / "bin", os.environ.get("PATH", "")))
    # The fleet's CA of this test (TLS is on by default), beside its play.
    result = subprocess.run(["ansible-playbook", "-i", "%s," % name, "-c", "community.docker.docker", "-e",
                             "step=%s" % step, "-e", "llmfleet_tls_ca_dir=%s" % (tmp / "tls"), str(tmp / "play.yml")],
                            capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    recap = re.search(r"ok=\d+\s+changed=(\d+)", result.stdout)
    return int(recap.group(1)), result.stdout


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("route-role")
    (tmp / "play.yml").write_text(PLAYS)
    name = "llmfleet-route-role-%s" % uuid.uuid4().hex[:8]
    subprocess.run(["docker", "run", "-d", "--name", name, "--cgroupns=host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
                    "--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp", "--cap-add", "SYS_ADMIN",
                    "--security-opt", "seccomp=unconfined", IMAGE, "/lib/systemd/systemd"], check=True,
                   capture_output=True)
    try:
        for attempt in range(30):
            if sh(name, "systemctl is-system-running", check=False).stdout.strip() in ("running", "degraded"):
                break
            time.sleep(1)
        sh(name, "mkdir -p /etc/llmfleet")
        subprocess.run(["docker", "cp", str(STANDIN), "%s:/root/standin.py" % name], check=True, capture_output=True)
        subprocess.run(["docker", "exec", "-d", name, "python3", "/root/standin.py", "alpha-0:18000", "beta-0:18001"],
                       check=True)
        first = playbook(name, tmp, "serve")[0]
        yield {"name": name, "tmp": tmp, "first_changed": first}
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)


def curl(name, url, key, body=None):
    data = " -d '%s'" % json.dumps(body) if body is not None else ""
    # The edge and the balancer speak TLS: verified against the fleet's CA the role put on the host.
    out = sh(name, "curl -s --cacert /etc/llmfleet/tls/ca.crt -H 'Authorization: Bearer %s' '%s'%s" % (key, url, data)).stdout
    return json.loads(out)


def test_the_role_routes_by_model_on_the_edge_and_the_balancer(host):
    assert host["first_changed"] > 0
    for port in (8000, 8080):
        models = curl(host["name"], "https://127.0.0.1:%d/v1/models" % port, KEYS["beta"])
        assert [m["id"] for m in models["data"]] == ["beta"]
        answer = curl(host["name"], "https://127.0.0.1:%d/v1/chat/completions" % port, KEYS["full"],
                      {"messages": [], "model": "alpha-lora"})
        assert (answer["served_by"], answer["model"], answer["authorization"]) == (
            "alpha-0", "alpha-lora", "Bearer %s" % KEYS["replica"])
        refused = curl(host["name"], "https://127.0.0.1:%d/v1/chat/completions" % port, KEYS["beta"], {"model": "alpha"})
        assert refused["error"]["code"] == 403


def test_a_re_run_changes_nothing(host):
    assert playbook(host["name"], host["tmp"], "serve")[0] == 0


def test_keys_live_only_in_root_only_files(host):
    listing = sh(host["name"], "stat -c '%a %U %n' /etc/llmfleet/edge-*.map /etc/haproxy/llmfleet-*.map").stdout
    assert listing.count("600 root") == 10, listing
    text = sh(host["name"], "cat /etc/llmfleet/edge.cfg /etc/haproxy/haproxy.cfg; journalctl --no-pager").stdout
    for key in KEYS.values():
        assert key not in text


def test_a_drain_takes_the_host_out_of_each_models_backend_and_the_balancer_puts_it_back(host):
    name = host["name"]
    sh(name, "cat > /etc/llmfleet/serving.json <<'EOF'\n%s\nEOF" % json.dumps(SERVING))
    playbook(name, host["tmp"], "drain")
    stats = sh(name, "curl -s 'http://127.0.0.1:8404/stats;csv' | cut -d, -f1,2,18 | grep %s" % name).stdout
    assert sorted(stats.split()) == ["llmfleet_model_alpha,%s-alpha,MAINT" % name,
                                     "llmfleet_model_beta,%s-beta,MAINT" % name]
    assert playbook(name, host["tmp"], "serve")[0] > 0  # the servers left in maintenance, enabled again
    stats = sh(name, "curl -s 'http://127.0.0.1:8404/stats;csv' | cut -d, -f1,2,18 | grep %s" % name).stdout
    assert all(line.endswith(",UP") for line in stats.split()) and len(stats.split()) == 2
