"""Shared by the reliability tests (bad inputs, faults, secrets audit) and tests/reliability_report.py.

Runs playbooks through ansible-runner the way a CI job would, summarises the result (status, per-host
changed / failed counts, the failure messages), and starts / stops the local systemd test hosts (Debian 12
containers from `make testbed`, reached through the community.docker.docker connection).
"""
import json
import os
import shutil
import subprocess
import tempfile
import time

import sys

import ansible_runner

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
        self.changed = {h: n for h, n in (stats.get("changed") or {}).items()}
        self.failures = {h: n for h, n in (stats.get("failures") or {}).items()}
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


def write_result(name, doc):
    os.makedirs(RESULTS_DIR, exist_ok=True)
    with open(os.path.join(RESULTS_DIR, name + ".json"), "w") as fh:
        json.dump(doc, fh, indent=2, sort_keys=True)


# ---- test hosts --------------------------------------------------------------------------------------------

def start_host(name, image, extra_args=()):
    """A fresh Debian 12 systemd test host (the same recipe as Molecule's platform and the demo)."""
    subprocess.run(["docker", "rm", "-f", "-v", name], capture_output=True)
    subprocess.run(["docker", "run", "-d", "--name", name, "--hostname", name, "--cap-add", "SYS_ADMIN",
                    "--cap-add", "NET_ADMIN", "--security-opt", "seccomp=unconfined", "--security-opt",
                    "apparmor=unconfined", "--cgroupns", "host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
                    "-v", "/var/lib/docker", "--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp",
                    *extra_args, image, "/lib/systemd/systemd"], check=True, capture_output=True)
    wait_systemd(name)


def wait_systemd(name, timeout=120):
    end = time.monotonic() + timeout
    state = ""
    while time.monotonic() < end:
        state = subprocess.run(["docker", "exec", name, "systemctl", "is-system-running"],
                               capture_output=True, text=True).stdout.strip()
        if state in ("running", "degraded"):
            return state
        time.sleep(1)
    raise TimeoutError("test host %s: systemd not up after %ds (state %r)" % (name, timeout, state))


def remove_host(name):
    subprocess.run(["docker", "rm", "-f", "-v", name], capture_output=True)


def host_exec(name, *cmd, check=False, timeout=60):
    return subprocess.run(["docker", "exec", name, *cmd], capture_output=True, text=True, check=check,
                          timeout=timeout)


def docker_inventory(hosts, group="gpu_nodes"):
    return {"all": {"children": {group: {"hosts": {h: {
        "ansible_connection": "community.docker.docker",
        "ansible_python_interpreter": "/usr/bin/python3"} for h in hosts}}}}}
