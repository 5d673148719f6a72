"""Shared by the reliability tests (bad inputs, faults, secrets audit) and tests/reliability_report.py.

Runs playbooks through ansible-runner the way a CI job would, summarises the result (status, per-host
changed / failed counts, the failure messages), and starts / stops the local systemd test hosts (Debian 12
containers from `make testbed`, reached through the community.docker.docker connection).
"""
import atexit
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import sys

import ansible_runner
import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# ansible-runner starts ansible-playbook from PATH: the one next to this Python (the project's venv).
if os.path.dirname(sys.executable) not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
RESULTS_DIR = os.environ.get("LLMFLEET_RELIABILITY_OUT", os.path.join(TOP, ".cache", "reliability"))


def load_env(path=os.path.join(TOP, ".cache", "testbed.env")):
    """KEY=VALUE lines of the test-bed file written by `make testbed` (empty when there is none)."""
    env = {}
    if os.path.exists(path):
        with open(path) as fh:
            for line in fh:
                if "=" in line and not line.startswith("#"):
                    key, value = line.rstrip("\n").split("=", 1)
                    env[key] = value
    for key in list(os.environ):
        if key.startswith(("LLMFLEET_", "MOLECULE_HOST_IMAGE")):
            env.setdefault(key, os.environ[key])
    return env


def ansible_env(extra=None):
    env = {"ANSIBLE_COLLECTIONS_PATH": os.path.join(TOP, "collections"),
           "ANSIBLE_CONFIG": os.path.join(TOP, "ansible.cfg"),
           "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCALHOST_WARNING": "false",
           "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false", "ANSIBLE_DEPRECATION_WARNINGS": "false"}
    env.update(extra or {})
    return env


class Run:
    """The outcome of one ansible-runner run."""

    def __init__(self, runner, data_dir, wall_s):
        self.runner = runner
        self.data_dir = data_dir
        self.wall_s = wall_s
        self.status = runner.status
        self.rc = runner.rc
        stats = runner.stats or {}
        self.changed = dict(stats.get("changed") or {})
        self.failures = dict(stats.get("failures") or {})
        self.failures.update({h: n for h, n in (stats.get("dark") or {}).items() if n})
        self.messages = []
        self.changed_tasks = []
        for event in runner.events:
            ed = event.get("event_data") or {}
            res = ed.get("res") or {}
            if event.get("event") in ("runner_on_failed", "runner_on_unreachable") and not ed.get("ignore_errors"):
                self.messages.append("%s: %s" % (ed.get("task", "?"), _failure_text(res)))
            if event.get("event") in ("runner_on_ok", "runner_on_failed") and res.get("changed"):
                self.changed_tasks.append(ed.get("task", "?"))
        self.stdout = runner.stdout.read() if hasattr(runner.stdout, "read") else ""

    @property
    def changed_total(self):
        return sum(self.changed.values())

    @property
    def message(self):
        return "\n".join(self.messages)


def _failure_text(res):
    parts = [str(res.get("msg", ""))]
    for item in res.get("results") or []:
        if isinstance(item, dict) and item.get("failed"):
            parts.append(str(item.get("msg", "")))
    return " | ".join(p for p in parts if p)


def run_playbook(playbook, inventory, extravars=None, envvars=None, keep=False, timeout=None, cmdline=None):
    """Run a playbook (path or YAML text) through ansible-runner in a fresh private data dir."""
    data = tempfile.mkdtemp(prefix="llmfleet-rel-")
    if "\n" in playbook:
        path = os.path.join(data, "play.yml")
        with open(path, "w") as fh:
            fh.write(playbook)
        playbook = path
    kwargs = {}
    if timeout:
        kwargs["timeout"] = timeout
    if cmdline:
        kwargs["cmdline"] = cmdline
    started = time.monotonic()
    r = ansible_runner.run(private_data_dir=data, project_dir=TOP, playbook=playbook, inventory=inventory,
                           extravars=extravars or {}, envvars=ansible_env(envvars), quiet=True, **kwargs)
    run = Run(r, data, time.monotonic() - started)
    if not keep:
        shutil.rmtree(data, ignore_errors=True)
    return run


def docker(*args, check=True, timeout=120):
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check, timeout=timeout)


def wait_container_healthy(base, name, timeout):
    """Wait until base/health answers 200 while the container ``name`` runs: None then, else why not (whether it
    still runs, and its last log lines)."""
    started = time.monotonic()
    while True:
        try:
            with urllib.request.urlopen(base + "/health", timeout=2) as r:
                if r.status == 200:
                    return None
        except OSError:
            pass
        state = docker("inspect", "-f", "{{.State.Running}}", name, check=False).stdout.strip()
        if state != "true" or time.monotonic() - started > timeout:
            logs = docker("logs", "--tail", "40", name, check=False)
            return "%s did not become healthy (running=%s):\n%s%s" % (name, state, logs.stdout, logs.stderr)
        time.sleep(1)


def local_image_id(ref):
    """The ID of image ref in the local Docker engine; None when ref is empty or absent, or there is no engine."""
    if not ref:
        return None
    try:
        r = docker("image", "inspect", "--format", "{{.Id}}", ref, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (r.stdout.strip() or None) if r.returncode == 0 else None


def module_result(module, args, workdir, timeout=300):
    """One task of `module` with `args` on this machine (ansible-playbook, local connection, this Python): the
    task's result as the json callback reports it. The arguments travel in a vars file (a vLLM help text is larger
    than one command-line argument may be)."""
    workdir = str(workdir)
    with open(os.path.join(workdir, "module_args.json"), "w") as fh:
        json.dump({"module_args": args}, fh)
    with open(os.path.join(workdir, "module_play.yml"), "w") as fh:
        fh.write("- hosts: localhost\n  gather_facts: false\n  tasks:\n    - %s: '{{ module_args }}'\n" % module)
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1", **ansible_env())
    r = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-c", "local",
                        "-e", "ansible_python_interpreter=%s" % sys.executable,
                        "-e", "@" + os.path.join(workdir, "module_args.json"), os.path.join(workdir, "module_play.yml")],
                       cwd=TOP, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    try:
        return json.loads(r.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    except (ValueError, KeyError, IndexError):
        raise AssertionError("ansible-playbook rc %s:\n%s\n%s" % (r.returncode, r.stdout[-3000:], r.stderr[-3000:]))


def write_result(name, doc):
    os.makedirs(RESULTS_DIR, exist_ok=True)
    with open(os.path.join(RESULTS_DIR, name + ".json"), "w") as fh:
        json.dump(doc, fh, indent=2, sort_keys=True)


# ---- test hosts --------------------------------------------------------------------------------------------

def start_host(name, image, extra_args=()):
    """A fresh Debian 12 systemd test host (the same recipe as Molecule's platform and the demo)."""
    subprocess.run(["docker", "rm", "-f", "-v", name], capture_output=True, check=False)
    subprocess.run(["docker", "run", "-d", "--name", name, "--hostname", name, "--cap-add", "SYS_ADMIN",
                    "--cap-add", "NET_ADMIN", "--security-opt", "seccomp=unconfined", "--security-opt",
                    "apparmor=unconfined", "--cgroupns", "host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
                    "-v", "/var/lib/docker", "--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp",
                    *extra_args, image, "/lib/systemd/systemd"], check=True, capture_output=True)
    wait_systemd(name)


def wait_systemd(name, timeout=120, booting_ok=False):
    """Wait until systemd in the test host is up; booting_ok: "starting" is enough (units still starting at boot,
    e.g. a replica loading its model, keep the system "starting")."""
    end = time.monotonic() + timeout
    state = ""
    ok = ("running", "degraded") + (("starting",) if booting_ok else ())
    while time.monotonic() < end:
        state = subprocess.run(["docker", "exec", name, "systemctl", "is-system-running"],
                               capture_output=True, text=True, check=False).stdout.strip()
        if state in ok:
            return state
        time.sleep(1)
    raise TimeoutError("test host %s: systemd not up after %ds (state %r)" % (name, timeout, state))


def remove_host(name):
    subprocess.run(["docker", "rm", "-f", "-v", name], capture_output=True, check=False)


def host_exec(name, *cmd, check=False, timeout=60):
    return subprocess.run(["docker", "exec", name, *cmd], capture_output=True, text=True, check=check,
                          timeout=timeout)


def docker_inventory(hosts, group="gpu_nodes"):
    return {"all": {"children": {group: {"hosts": {h: {
        "ansible_connection": "community.docker.docker",
        "ansible_python_interpreter": "/usr/bin/python3"} for h in hosts}}}}}


# ---- one served test host, shared by the fault tests and the secrets audit ------------------------------------

# LLMFLEET_TEST_SERVED_HOST: another name, so two checkouts on one machine do not replace each other's host.
SERVED_HOST = os.environ.get("LLMFLEET_TEST_SERVED_HOST", "llmfleet-rel-host")
# Sentinels: unique strings that must never show up where the audit looks (only in the 0600 env file).
SENTINEL_API_KEY = "llmfleet-sentinel-apikey-7f3a9c2e"
SENTINEL_HUB_TOKEN = "hf_llmfleetSentinelHubToken5b81d4"
_deployment = {}
# systemd's TimeoutStartSec for the test replica (weights load + engine start on a loaded 2-core test bed).
START_TIMEOUT_S = int(os.environ.get("LLMFLEET_TEST_START_TIMEOUT", "1500"))


def testbed_ready(env=None):
    env = env if env is not None else load_env()
    return all(env.get(k) for k in ("MOLECULE_HOST_IMAGE", "LLMFLEET_TEST_VLLM_IMAGE_FROM_HOSTS",
                                    "LLMFLEET_TEST_MODEL_DIR", "LLMFLEET_TEST_REGISTRY_FROM_HOSTS"))


def deploy_site(host=SERVED_HOST, timeout=2700):
    """Start a fresh test host and run the whole site.yml on it (demo profile: cpu engine, tiny model) with
    the sentinel API key and hub token; once per test process (the fault tests and the audit share it).

    The secrets travel the way a CI job passes them: a 0600 vars file OUTSIDE the runner's private data dir,
    given as `-e @file`, so anything the audit finds in the artifacts came out of the play itself.
    Returns a dict: run (Run, artifacts kept), secrets_file, inventory, wall_s.
    """
    if host in _deployment:
        return _deployment[host]
    env = load_env()
    work = tempfile.mkdtemp(prefix="llmfleet-rel-site-")
    inventory = os.path.join(work, "inventory")
    shutil.copytree(os.path.join(TOP, "inventories", "demo", "group_vars"), os.path.join(inventory, "group_vars"))
    with open(os.path.join(inventory, "hosts.yml"), "w") as fh:
        json.dump(docker_inventory([host]), fh)
    secrets_file = os.path.join(work, "secrets.yml")
    fd = os.open(secrets_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"llmfleet_api_key": SENTINEL_API_KEY, "vllm_server_hf_token": SENTINEL_HUB_TOKEN,
                   "model_weights_token": SENTINEL_HUB_TOKEN,
                   # The CPU engine on two cores shared by the whole test bed can take >10 min to start.
                   "vllm_server_start_timeout": START_TIMEOUT_S,
                   # The fleet's CA of this deployment, with its other files.
                   "llmfleet_tls_ca_dir": os.path.join(work, "tls")}, fh)
    envvars = {k: v for k, v in env.items() if k.startswith("LLMFLEET_TEST_")}
    # The demo inventory reads the key from a file; point it at a non-secret stand-in (the -e file wins).
    stand_in = os.path.join(work, "demo_api_key")
    with open(stand_in, "w") as fh:
        fh.write("not-the-sentinel\n")
    envvars["LLMFLEET_DEMO_API_KEY_FILE"] = stand_in
    start_host(host, env["MOLECULE_HOST_IMAGE"])
    if not os.environ.get("LLMFLEET_KEEP_TEST_HOST"):
        atexit.register(_cleanup, host, work)
    run = run_playbook(os.path.join(TOP, "site.yml"), inventory, envvars=envvars, keep=True, timeout=timeout,
                       cmdline="-e @%s" % secrets_file)
    if run.status == "successful":
        trust_edge_ca(host)
    _deployment[host] = {"run": run, "secrets_file": secrets_file, "inventory": inventory, "work": work,
                         "envvars": envvars,
                         "wall_s": run.wall_s}
    return _deployment[host]


def _cleanup(host, work):
    """At the end of the test process: the test host and the deployment's files (LLMFLEET_KEEP_TEST_HOST=1 keeps)."""
    remove_host(host)
    d = _deployment.get(host)
    if d:
        shutil.rmtree(d["run"].data_dir, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)


# The edge speaks TLS (llmfleet_tls, the default): this process verifies it against the CA each deployed host keeps.
EDGE_CA = "/etc/llmfleet/tls/ca.crt"
_EDGE_TRUST = ssl.create_default_context()


def trust_edge_ca(host):
    """Add the CA a deployed host keeps to what every urllib request of this process verifies https:// against."""
    _EDGE_TRUST.load_verify_locations(cadata=host_exec(host, "cat", EDGE_CA, check=True).stdout)
    urllib.request.install_opener(urllib.request.build_opener(urllib.request.HTTPSHandler(context=_EDGE_TRUST)))


def edge_url(ip, path="", port=8000):
    """A URL of a host's edge (https: see trust_edge_ca)."""
    return "https://%s:%d%s" % (ip, port, path)


def serving_ok(ip, key=SENTINEL_API_KEY, port=8000):
    """True when /health answers 200 and /v1/models lists the served name (with the API key)."""
    try:
        with urllib.request.urlopen(edge_url(ip, "/health", port), timeout=3) as r:
            if r.status != 200:
                return False
        req = urllib.request.Request(edge_url(ip, "/v1/models", port), headers={"Authorization": "Bearer " + key})
        with urllib.request.urlopen(req, timeout=5) as r:
            return any(m.get("id") == "tiny" for m in json.load(r).get("data", []))
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_serving(ip, bound_s, started):
    """Seconds from `started` until serving_ok(ip), polled every second; None when bound_s passes first."""
    while time.monotonic() - started < bound_s:
        if serving_ok(ip):
            return time.monotonic() - started
        time.sleep(1)
    return None


def host_ip(name):
    return subprocess.run(["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                           name], capture_output=True, text=True, check=True).stdout.strip()


def full_deployment_marks():
    """pytest marks of a test file that deploys site.yml on a test host of its own: it needs the test bed and
    runs only in `make test-full` (LLMFLEET_FULL=1), which keeps `make test` within CI time."""
    return [pytest.mark.integration,
            pytest.mark.skipif(not testbed_ready(), reason="needs `make testbed` (.cache/testbed.env)"),
            pytest.mark.skipif(os.environ.get("LLMFLEET_FULL") != "1",
                               reason="a full deployment of its own: runs in `make test-full` (LLMFLEET_FULL=1)")]
