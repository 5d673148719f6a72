"""Secrets audit: the whole site.yml with a sentinel API key and a sentinel hub token, then search every place
a secret must not be. 0 hits; the places they belong are the root-only 0600 env file of the replica and the
edge's 0600 key list (/etc/llmfleet/edge-api-keys.lst: the API key only).

The deployment is the one the fault tests use (a fresh test host, tests/integration/reliability_common.py):
llmfleet_api_key, vllm_server_hf_token and model_weights_token are sentinels, passed as a CI job would (a 0600
`-e @file` outside the runner's directory). When this file runs after test_faults.py, the journal and the
container logs also cover the restarts.

Searched (fixed strings, the values and their JSON-escaped form):
  controller: the ansible-runner private data dir (artifacts: stdout, job events, command, env) and the play's
              stdout
  host:       the whole journal (journalctl -o cat), /etc/systemd/system/llmfleet-*, /etc/llmfleet/* except the
              env file, /var/log, /root and /tmp (Ansible's remote temp files), /proc/*/cmdline of every
              process (the nested containers' included), `docker inspect` and `docker logs` of every container,
              and each container's writable layer (what vLLM wrote inside)
Writes .cache/reliability/secrets_audit.json for tests/reliability_report.py.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability_common as C  # noqa: E402

pytestmark = C.full_deployment_marks()

HOST = C.SERVED_HOST
SENTINELS = [C.SENTINEL_API_KEY, C.SENTINEL_HUB_TOKEN]
ENV_FILE = "/etc/llmfleet/vllm-0.env"


@pytest.fixture(scope="module")
def deployed():
    d = C.deploy_site()
    assert d["run"].status == "successful", "site.yml failed:\n%s" % (d["run"].message or d["run"].stdout[-4000:])
    return d


def count_in_text(text):
    return sum(text.count(s) for s in SENTINELS)


def controller_hits(path):
    """{file: hits} for every file under path."""
    hits = {}
    for root, _dirs, files in os.walk(path):
        for name in files:
            p = os.path.join(root, name)
            try:
                with open(p, "rb") as fh:
                    data = fh.read().decode("utf-8", "replace")
            except OSError:
                continue
            n = count_in_text(data)
            if n:
                hits[os.path.relpath(p, path)] = n
    return hits


def host_grep(paths, exclude=()):
    """{file: hits} from grep -rc on the host (fixed strings), paths that do not exist are skipped."""
    args = ["grep", "-rcF", "--binary-files=text"]
    for s in SENTINELS:
        args += ["-e", s]
    for e in exclude:
        args += ["--exclude=%s" % e]
    r = C.host_exec(HOST, "sh", "-c", " ".join(args) + " -- " + " ".join(paths) + " 2>/dev/null", timeout=300)
    hits = {}
    for line in r.stdout.splitlines():
        f, _unused, n = line.rpartition(":")
        if n.isdigit() and int(n) > 0:
            hits[f] = int(n)
    return hits


def host_text(*cmd, timeout=120):
    return C.host_exec(HOST, *cmd, timeout=timeout).stdout


def containers():
    return host_text("docker", "ps", "-aq", "--no-trunc").split()


def audit(d):
    run = d["run"]
    found = {}
    found["runner artifacts (private data dir)"] = controller_hits(run.data_dir)
    found["play stdout"] = {"stdout": count_in_text(run.stdout)} if count_in_text(run.stdout) else {}
    journal = host_text("journalctl", "-o", "cat", "--no-pager", timeout=300)
    found["host journal"] = {"journalctl -o cat": count_in_text(journal)} if count_in_text(journal) else {}
    found["unit files /etc/systemd/system/llmfleet-*"] = host_grep(["/etc/systemd/system/llmfleet-*"])
    # The two root-only 0600 files a secret belongs in: the replica's env file and the edge's key list.
    found["/etc/llmfleet (env file and edge key list excluded)"] = host_grep(
        ["/etc/llmfleet"], exclude=["vllm-*.env", "edge-api-keys.lst"])
    found["/var/log, /root, /tmp on the host"] = host_grep(["/var/log", "/root", "/tmp"])
    found["/var/cache/llmfleet (engine caches) and /var/lib/llmfleet"] = host_grep(["/var/cache/llmfleet", "/var/lib/llmfleet"])
    cmdlines = host_text("sh", "-c", "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done 2>/dev/null")
    found["/proc/*/cmdline on the host"] = {"cmdlines": count_in_text(cmdlines)} if count_in_text(cmdlines) else {}
    ids = containers()
    inspect = host_text("docker", "inspect", *ids) if ids else ""
    found["docker inspect (every container)"] = {"inspect": count_in_text(inspect)} if count_in_text(inspect) else {}
    logs = {}
    uppers = []
    for cid in ids:
        r = C.host_exec(HOST, "docker", "logs", cid, timeout=120)
        n = count_in_text(r.stdout + r.stderr)
        if n:
            logs[cid[:12]] = n
        upper = host_text("docker", "inspect", "-f", "{{.GraphDriver.Data.UpperDir}}", cid).strip()
        if upper.startswith("/"):
            uppers.append(upper)
    found["docker logs (every container)"] = logs
    found["containers' writable layers"] = host_grep(uppers) if uppers else {}
    return found, len(ids), len(cmdlines.splitlines())


def test_no_secret_outside_the_env_file(deployed):
    found, n_containers, n_procs = audit(deployed)
    total = sum(sum(v.values()) for v in found.values())
    env_mode = host_text("stat", "-c", "%a %U %G", ENV_FILE).strip()
    env_holds = [s for s in SENTINELS if s in host_text("cat", ENV_FILE)]
    # Positive control: the same search finds the sentinels where they are meant to be.
    control = host_grep(["/etc/llmfleet"])
    C.write_result("secrets_audit", {
        "secret_hits": total, "places": dict(found), "places_searched": len(found),
        "containers_inspected": n_containers, "processes_checked": n_procs, "env_file": ENV_FILE,
        "env_file_mode_owner": env_mode, "env_file_holds": len(env_holds), "control_hits_in_env_file": control})
    assert control.get(ENV_FILE, 0) >= 1, "the search does not even find the sentinels in the env file: %s" % control
    edge_keys = "/etc/llmfleet/edge-api-keys.lst"
    assert host_text("stat", "-c", "%a %U %G", edge_keys).strip() == "600 root root", "edge key list not root-only"
    assert C.SENTINEL_HUB_TOKEN not in host_text("cat", edge_keys), "the hub token does not belong in the edge's key list"
    assert total == 0, "secret found: %s" % {k: v for k, v in found.items() if v}
    assert n_containers >= 1 and n_procs > 10, "nothing to audit: %d containers, %d processes" % (n_containers,
                                                                                                  n_procs)


def test_env_file_is_root_only_and_holds_the_secrets(deployed):
    assert host_text("stat", "-c", "%a %U %G", ENV_FILE).strip() == "600 root root"
    text = host_text("cat", ENV_FILE)
    assert "VLLM_API_KEY=" + C.SENTINEL_API_KEY in text
    assert "HF_TOKEN=" + C.SENTINEL_HUB_TOKEN in text
    # and the container reads it from the mounted file, not from its environment as docker knows it
    env = host_text("docker", "inspect", "-f", "{{json .Config.Env}}", "llmfleet-vllm-0")
    assert "VLLM_API_KEY" not in env and "HF_TOKEN" not in env, env


def test_the_key_is_enforced(deployed):
    """The sentinel is not just stored: /v1 refuses a request without it."""
    import urllib.error
    import urllib.request
    ip = C.host_ip(HOST)
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(C.edge_url(ip, "/v1/models"), timeout=10)
    assert e.value.code == 401
    req = urllib.request.Request(C.edge_url(ip, "/v1/models"),
                                 headers={"Authorization": "Bearer " + C.SENTINEL_API_KEY})
    assert urllib.request.urlopen(req, timeout=10).status == 200
