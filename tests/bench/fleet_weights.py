#!/usr/bin/env python
"""Weights once per fleet: hub bytes and wall time of the model_weights role for N hosts against one host alone.

On the test bed (make testbed: MOLECULE_HOST_IMAGE, LLMFLEET_TEST_WHEELHOUSE): a synthetic model (real
safetensors shards, --model-mb in total, never committed) is published as a git/LFS repo and served by olah (a
real Hugging Face mirror, offline) behind tests/testbed/throttle_proxy.py, ONE shared link of --hub-mib MiB/s
that counts every byte the hub side sends: the simulated internet link. The hosts are systemd containers from
the test bed's host image on a docker network of this bench's own (container-to-container traffic is not capped:
the LAN). The role runs as a user runs it (ansible-playbook, community.docker connection, the model_weights
role with its defaults: peer transfer on), first on one fresh host alone, then on N fresh hosts, then once more
on the N hosts (a re-run must change nothing).

The hosts are prepared once per run (rsync, python3-venv and the hub clients from the test bed's wheelhouse,
committed as an image of this bench's own): the timed runs measure the weights, not package installation.

Prints, for N hosts and for one host: model bytes, bytes the hub served, wall time, hosts verified (every file's
sha256 inside the host equals the published model's, and the role's marker is there); then whether the goal
holds (N hosts: hub bytes <= 1.05 x model bytes, wall <= 1.5 x one host). With --json the last line is one JSON
object: hosts, model_bytes, hub_bytes, wall_s, wall_one_host_s, verified_hosts (and a few more keys).

Usage: fleet_weights.py --hosts N [--json] [--model-mb 128] [--hub-mib 1] [--name PREFIX] [--keep]
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "testbed"))
import hub_repo  # noqa: E402
import hubs  # noqa: E402

REPO = "bench/fleet-weights"
DEST = "/srv/llmfleet/models/fleet-weights"
TOKEN = "bench-hub-token-never-on-a-peer"
LOG = sys.stderr

PLAYBOOK = """
- name: Weights for the fleet
  hosts: all
  gather_facts: false
  pre_tasks:
    - name: Read the host facts the role uses (as playbooks/model.yml does)
      ansible.builtin.setup:
        gather_subset: ["!all", network]
  roles:
    - role: llmfleet.vllm.model_weights
"""

PREPARE = """
- name: Prepare a bench host (packages the timed runs should not count)
  hosts: all
  gather_facts: true
  tasks:
    - name: Install rsync
      ansible.builtin.apt:
        name: rsync
        update_cache: true
    - name: Install the hub clients from the wheelhouse
      ansible.builtin.include_role:
        name: llmfleet.vllm.model_weights
        tasks_from: clients
"""


def log(msg):
    print(msg, file=LOG, flush=True)


def sh(*argv, check=True, **kw):
    return subprocess.run([str(a) for a in argv], check=check, capture_output=True, text=True, **kw)


def load_env(path):
    env = {}
    if os.path.exists(path):
        for line in open(path):
            if "=" in line and not line.startswith("#"):
                k, v = line.rstrip("\n").split("=", 1)
                env[k] = v
    env.update({k: v for k, v in os.environ.items() if k.startswith(("LLMFLEET_", "MOLECULE_"))})
    return env


def loadavg():
    return open("/proc/loadavg").read().split()[:3]


class Bed:
    """This bench's docker network and hosts (names start with prefix; nothing else is touched)."""

    def __init__(self, prefix, base_image):
        self.prefix, self.base_image = prefix, base_image
        self.network = prefix + "-net"
        self.hosts = []

    def up_network(self):
        if sh("docker", "network", "inspect", self.network, check=False).returncode != 0:
            sh("docker", "network", "create", self.network)
        cfg = json.loads(sh("docker", "network", "inspect", self.network).stdout)[0]["IPAM"]["Config"][0]
        return cfg.get("Gateway") or re.sub(r"\.0/\d+$", ".1", cfg["Subnet"])

    def start(self, name, image):
        sh("docker", "rm", "-f", name, check=False)
        sh("docker", "run", "-d", "--name", name, "--hostname", name, "--network", self.network,
           "--cap-add", "SYS_ADMIN", "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
           "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw", "--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp",
           "--cgroupns", "host", image, "/lib/systemd/systemd")
        self.hosts.append(name)
        end = time.time() + 60
        while time.time() < end:
            state = sh("docker", "exec", name, "systemctl", "is-system-running", check=False).stdout.strip()
            if state in ("running", "degraded"):
                return name
            time.sleep(0.5)
        raise SystemExit("%s: systemd did not come up" % name)

    def remove(self, names=None):
        for name in list(names or self.hosts):
            sh("docker", "rm", "-f", name, check=False)
            if name in self.hosts:
                self.hosts.remove(name)

    def down(self):
        self.remove()
        sh("docker", "network", "rm", self.network, check=False)


def ansible_env():
    return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"), ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
                ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_NOCOLOR="1",
                # A fact cache of its own (none): the containers are new each run, under reused names.
                ANSIBLE_CACHE_PLUGIN="memory", ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks",
                PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))


def start_playbook(work, name, text, hosts, extra):
    """Start a playbook on the hosts (docker connection); returns the process (output in work/<name>.log)."""
    (work / (name + ".yml")).write_text(text)
    inv = {"all": {"hosts": {h: {"ansible_connection": "community.docker.docker",
                                 "ansible_python_interpreter": "/usr/bin/python3"} for h in hosts},
                   "vars": extra}}
    (work / (name + "-inventory.json")).write_text(json.dumps(inv))
    return subprocess.Popen([str(Path(sys.executable).parent / "ansible-playbook"), "-i",
                             str(work / (name + "-inventory.json")), "-f", "10", str(work / (name + ".yml"))],
                            env=ansible_env(), stdout=open(work / (name + ".log"), "w"), stderr=subprocess.STDOUT)


def playbook(work, name, text, hosts, extra, allow_failure=False):
    """Run a playbook on the hosts (docker connection); returns (wall seconds, changed count, output)."""
    t0 = time.monotonic()
    p = start_playbook(work, name, text, hosts, extra)
    p.wait()
    wall = time.monotonic() - t0
    out = (work / (name + ".log")).read_text()
    if p.returncode != 0 and not allow_failure:
        raise SystemExit("%s failed (rc %d); last output:\n%s" % (name, p.returncode, out[-6000:]))
    changed = sum(int(m) for m in re.findall(r"changed=(\d+)", out.split("PLAY RECAP", 1)[-1]))
    return wall, changed, out


def prepared_image(bed, work, wheelhouse):
    """The host image with rsync, python3-venv and the hub clients (built once, cached by its inputs)."""
    clients = (ROOT / "roles" / "model_weights" / "tasks" / "clients.yml").read_bytes()
    wheels = "\n".join(sorted(os.listdir(wheelhouse)))
    tag = hashlib.sha256(bed.base_image.encode() + clients + wheels.encode()).hexdigest()[:12]
    ref = "llmfleet-bench/fleet-weights-host:%s" % tag
    if sh("docker", "image", "inspect", ref, check=False).returncode == 0:
        return ref
    log("preparing the host image %s (rsync, hub clients)..." % ref)
    name = bed.start(bed.prefix + "-prep", bed.base_image)
    playbook(work, "prepare", PREPARE, [name], {"model_weights_wheelhouse": wheelhouse})
    sh("docker", "commit", name, ref)
    bed.remove([name])
    return ref


def verified(host, expected):
    """Every file of the model in the host's model directory has the published sha256; the marker is there."""
    listing = "".join("%s  %s\n" % (digest, path) for path, digest in sorted(expected.items()))
    p = subprocess.run(["docker", "exec", "-i", host, "sh", "-c",
                        "cd %s && test -f .llmfleet-weights.json && sha256sum --quiet -c -" % DEST],
                       input=listing, capture_output=True, text=True, check=False)
    return p.returncode == 0


def secret_seen(host):
    """Whether the hub token appears in the host's logs, journal, unit files or rsync configuration."""
    p = sh("docker", "exec", host, "sh", "-c",
           "(journalctl --no-pager -o cat 2>/dev/null; cat /etc/llmfleet-weights-rsyncd.conf "
           "/etc/systemd/system/llmfleet-* 2>/dev/null; "
           "grep -rs . /var/log 2>/dev/null) | grep -c -- '%s' || true" % TOKEN, check=False)
    return int((p.stdout.strip() or "0").splitlines()[-1]) > 0


def run_fleet(bed, work, image, n, hub, role_vars, expected, tag, rerun=False):
    names = ["%s-%s%d" % (bed.prefix, tag, i + 1) for i in range(n)]
    for name in names:
        bed.start(name, image)
    hub_before = hub.bytes_sent()
    wall, changed, out = playbook(work, "fleet-%s" % tag, PLAYBOOK, names, role_vars)
    hub_bytes = hub.bytes_sent() - hub_before
    res = {"hosts": n, "wall_s": round(wall, 1), "hub_bytes": hub_bytes,
           "verified_hosts": sum(1 for h in names if verified(h, expected)),
           "token_seen_on_hosts": sum(1 for h in names if secret_seen(h)),
           "peer_rounds": len(set(re.findall(r"round (\d+)\]", out)))}
    if rerun:
        hub_before = hub.bytes_sent()
        wall2, changed2, _out = playbook(work, "fleet-%s-rerun" % tag, PLAYBOOK, names, role_vars)
        res.update(rerun_changed=changed2, rerun_wall_s=round(wall2, 1), rerun_hub_bytes=hub.bytes_sent() - hub_before)
    bed.remove(names)
    return res


def run_kill_seed(bed, work, image, n, hub, role_vars, expected, model_bytes, bwlimit_mib):
    """N hosts; the seed (the first host: it downloads from the hub) is killed (docker kill: the host is gone)
    once its first puller holds a third of the model. The peer transfers are capped at bwlimit_mib so that the
    kill lands mid-transfer. The survivors must still end verified, from another peer or from the hub."""
    names = ["%s-k%d" % (bed.prefix, i + 1) for i in range(n)]
    for name in names:
        bed.start(name, image)
    extra = dict(role_vars, model_weights_peer_bwlimit_kib=int(bwlimit_mib * 1024), model_weights_peer_timeout=5)
    staging = "%s/.%s.partial" % (os.path.dirname(DEST), os.path.basename(DEST))
    hub_before = hub.bytes_sent()
    t0 = time.monotonic()
    proc = start_playbook(work, "kill-seed", PLAYBOOK, names, extra)
    killed_at, pulled = None, 0
    while proc.poll() is None and killed_at is None:
        out = sh("docker", "exec", names[1], "sh", "-c", "du -sb %s 2>/dev/null | cut -f1" % staging,
                 check=False).stdout.strip()
        pulled = int(out) if out.isdigit() else 0
        if pulled >= model_bytes // 3:
            sh("docker", "kill", names[0])
            killed_at = time.monotonic() - t0
        time.sleep(0.3)
    proc.wait()
    wall = time.monotonic() - t0
    out = (work / "kill-seed.log").read_text()
    survivors = names[1:]
    flat = re.sub(r"\n\s+", " ", out)
    delivered = ["%s: %s" % m for m in re.findall(r"ok: \[(\S+)\] =>\s+msg: '(/srv[^']* from peers, [^']*)'", flat)]
    res = {"hosts": n, "model_bytes": model_bytes, "seed_killed": killed_at is not None,
           "seed_killed_after_s": None if killed_at is None else round(killed_at, 1),
           "first_puller_had_bytes": pulled, "hub_bytes": hub.bytes_sent() - hub_before, "wall_s": round(wall, 1),
           "playbook_rc": proc.returncode, "survivors": len(survivors),
           "verified_survivors": sum(1 for h in survivors if verified(h, expected)), "peer_reports": delivered}
    bed.remove(names)
    return res


def run_partial(bed, work, image, n, hub, role_vars, expected):
    """A partial fleet: one host holds the model (its own earlier run), then the role runs on all N. The host
    that holds it seeds; the others must take nothing but listings from the hub."""
    names = ["%s-p%d" % (bed.prefix, i + 1) for i in range(n)]
    for name in names:
        bed.start(name, image)
    playbook(work, "partial-first", PLAYBOOK, names[:1], role_vars)
    hub_before = hub.bytes_sent()
    wall, changed, out = playbook(work, "partial-all", PLAYBOOK, names, role_vars)
    flat = re.sub(r"\n\s+", " ", out)
    res = {"hosts": n, "holders_before": 1, "hub_bytes": hub.bytes_sent() - hub_before, "wall_s": round(wall, 1),
           "verified_hosts": sum(1 for h in names if verified(h, expected)),
           "peer_reports": ["%s: %s" % m for m in re.findall(
               r"ok: \[(\S+)\] =>\s+msg: '(/srv[^']* from peers, [^']*)'", flat)]}
    bed.remove(names)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="end with one JSON line")
    ap.add_argument("--model-mb", type=float, default=128, help="synthetic model size in MiB (two shards)")
    ap.add_argument("--hub-mib", type=float, default=1.0, help="the hub side's link, MiB/s (shared by all hosts)")
    ap.add_argument("--name", default=os.environ.get("LLMFLEET_FLEET_WEIGHTS_NAME", "llmfleet-fleetw"),
                    help="prefix of this bench's containers and network")
    ap.add_argument("--testbed-env", default=str(ROOT / ".cache" / "testbed.env"))
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, inventories)")
    ap.add_argument("--kill-seed", action="store_true",
                    help="instead: kill the seeding host while its first puller copies from it (peer transfers "
                         "capped at --peer-mib) and check that the others still end verified")
    ap.add_argument("--partial", action="store_true",
                    help="instead: one host already holds the model (a partial fleet); the role on all N hosts must "
                         "take only listings from the hub")
    ap.add_argument("--peer-mib", type=float, default=4.0, help="--kill-seed: cap of each peer transfer, MiB/s")
    a = ap.parse_args()
    env = load_env(a.testbed_env)
    for key in ("MOLECULE_HOST_IMAGE", "LLMFLEET_TEST_WHEELHOUSE"):
        if not env.get(key):
            raise SystemExit("%s is not set: run make testbed (or point --testbed-env at its env file)" % key)
    work = Path(tempfile.mkdtemp(prefix="llmfleet-fleetw-"))
    bed = Bed(a.name, env["MOLECULE_HOST_IMAGE"])
    servers = []
    try:
        half = a.model_mb / 2
        model = hub_repo.synth_model(work / "model", [half, half], seed=31)
        commit = hub_repo.publish(model, work / "mirrors", REPO)
        expected = {}
        for p in sorted(model.rglob("*")):
            if p.is_file():
                expected[p.relative_to(model).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
        model_bytes = sum((model / f).stat().st_size for f in expected)
        gateway = bed.up_network()
        olah = hubs.start_olah(work / "mirrors", probe_repo=REPO)
        servers.append(olah)
        hub = hubs.start_throttle(olah.url, a.hub_mib * 2 ** 20, shared=True, host=gateway, stats=True)
        servers.append(hub)
        endpoint = "http://%s:%d" % (gateway, hub.port)
        image = prepared_image(bed, work, env["LLMFLEET_TEST_WHEELHOUSE"])
        role_vars = {"model_weights_source": "hf", "model_weights_repo_id": REPO, "model_weights_revision": commit,
                     "model_weights_endpoint": endpoint, "model_weights_token": TOKEN, "model_weights_dir": DEST,
                     "model_weights_poll_interval": 1}
        log("model: %d files, %.1f MiB; hub link %.1f MiB/s (shared) at %s; load %s" % (
            len(expected), model_bytes / 2 ** 20, a.hub_mib, endpoint, " ".join(loadavg())))
        if a.kill_seed:
            res = run_kill_seed(bed, work, image, max(2, a.hosts), hub, role_vars, expected, model_bytes, a.peer_mib)
            print("seed killed after %s s (its first puller held %.1f MiB); playbook rc %s (the dead host is "
                  "unreachable); survivors verified %d/%d; hub served %.1f MiB of a %.1f MiB model; wall %.1f s" % (
                      res["seed_killed_after_s"], res["first_puller_had_bytes"] / 2 ** 20, res["playbook_rc"],
                      res["verified_survivors"], res["survivors"], res["hub_bytes"] / 2 ** 20, model_bytes / 2 ** 20,
                      res["wall_s"]))
            for line in res["peer_reports"]:
                print("  " + line)
            if a.json:
                print(json.dumps(res))
            return 0 if res["seed_killed"] and res["verified_survivors"] == res["survivors"] else 1
        if a.partial:
            res = run_partial(bed, work, image, max(2, a.hosts), hub, role_vars, expected)
            res["model_bytes"] = model_bytes
            print("partial fleet: 1 of %d hosts held the model; the run on all took %.1f KiB from the hub (model "
                  "%.1f MiB), %.1f s; verified %d/%d" % (
                      res["hosts"], res["hub_bytes"] / 1024.0, model_bytes / 2 ** 20, res["wall_s"],
                      res["verified_hosts"], res["hosts"]))
            for line in res["peer_reports"]:
                print("  " + line)
            if a.json:
                print(json.dumps(res))
            return 0 if res["hub_bytes"] < model_bytes / 50 and res["verified_hosts"] == res["hosts"] else 1
        one = run_fleet(bed, work, image, 1, hub, role_vars, expected, "one")
        log("one host:  %.1f s, hub %.1f MiB, verified %d/1" % (
            one["wall_s"], one["hub_bytes"] / 2 ** 20, one["verified_hosts"]))
        if a.hosts > 1:
            fleet = run_fleet(bed, work, image, a.hosts, hub, role_vars, expected, "n", rerun=True)
        else:
            fleet = dict(one)
        load = loadavg()
        result = {"hosts": a.hosts, "model_bytes": model_bytes, "hub_bytes": fleet["hub_bytes"],
                  "wall_s": fleet["wall_s"], "wall_one_host_s": one["wall_s"],
                  "verified_hosts": fleet["verified_hosts"], "hub_bytes_one_host": one["hub_bytes"],
                  "hub_mib_s": a.hub_mib, "peer_rounds": fleet["peer_rounds"],
                  "rerun_changed": fleet.get("rerun_changed"), "rerun_hub_bytes": fleet.get("rerun_hub_bytes"),
                  "token_seen_on_hosts": fleet["token_seen_on_hosts"] + one["token_seen_on_hosts"],
                  "hub_ratio": round(fleet["hub_bytes"] / model_bytes, 3),
                  "wall_ratio": round(fleet["wall_s"] / one["wall_s"], 2), "load": load}
        goal = (result["hub_ratio"] <= 1.05 and result["wall_ratio"] <= 1.5
                and result["verified_hosts"] == a.hosts)
        result["goal_met"] = goal
        mib = model_bytes / 2 ** 20
        print("fleet weights, %d host(s), model %.1f MiB, hub link %.1f MiB/s:" % (a.hosts, mib, a.hub_mib))
        row = "  %-10s %10.1f %12.1f %9.1f %6d/%d"
        print("  %-10s %10s %12s %9s %9s" % ("", "model MiB", "hub MiB", "wall s", "verified"))
        print(row % ("one host", mib, one["hub_bytes"] / 2 ** 20, one["wall_s"], one["verified_hosts"], 1))
        print(row % ("%d hosts" % a.hosts, mib, fleet["hub_bytes"] / 2 ** 20, fleet["wall_s"],
                     fleet["verified_hosts"], a.hosts))
        print("  hub bytes / model bytes %.3f (goal <= 1.05), wall / one host %.2f (goal <= 1.5), peer rounds %d, "
              "re-run changed=%s, token seen on hosts: %d, load %s: %s" % (
                  result["hub_ratio"], result["wall_ratio"], fleet["peer_rounds"], result["rerun_changed"],
                  result["token_seen_on_hosts"], " ".join(load), "GOAL MET" if goal else "GOAL NOT MET"))
        if a.json:
            print(json.dumps(result))
        return 0 if goal else 1
    finally:
        for s in servers:
            s.stop()
        bed.down()
        if a.keep:
            log("work directory kept: %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
