"""model_fetch with peers (weights once per fleet), against real rsync daemons and a real Hugging Face mirror.

The module runs as the model_weights role runs it on a puller: its own process, the hub's manifest from olah (a
real HF mirror, offline), the bytes from peers that are real `rsync --daemon` processes serving a model
directory read-only. The hub and each peer sit behind tests/testbed/throttle_proxy.py, which counts the bytes
each one sent (and slows a peer down, so that it can be killed mid-transfer). Needs rsync; no Docker.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "testbed"))

import hub_repo  # noqa: E402
import hubs  # noqa: E402

REPO = "acme/tiny-peers"
BIG = "model-00002-of-00002.safetensors"
PEER_RATE = 2 << 20  # bytes/s of the slow peer: its 16 MiB shard takes ~8 s

pytestmark = pytest.mark.skipif(shutil.which("rsync") is None, reason="needs rsync (apt-get install rsync)")


# model_dir and model_bytes: conftest.py.


@pytest.fixture(scope="module")
def mirrors(model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("mirrors")
    hub_repo.publish(model_dir, root, REPO)
    return root


@pytest.fixture(scope="module")
def olah(mirrors):
    srv = hubs.start_olah(mirrors, probe_repo=REPO)
    yield srv
    srv.stop()


@pytest.fixture
def hub(olah):
    """The hub as the pullers see it: olah behind a counting proxy (bytes_sent: what the hub served)."""
    srv = hubs.start_throttle(olah.url, 0, stats=True)
    yield srv
    srv.stop()


class Peer:
    """A real rsync daemon serving `path` read-only as module `m`, optionally behind a (slow) counting proxy."""

    def __init__(self, work, path, rate=0):
        self.work = work
        work.mkdir(parents=True)
        self.port = hubs.free_port()
        (work / "rsyncd.conf").write_text(
            "address = 127.0.0.1\nport = %d\nuse chroot = no\nuid = root\ngid = root\nread only = yes\n"
            "list = no\nreverse lookup = no\npid file = %s\n[m]\npath = %s\nhosts allow = 127.0.0.1\n"
            % (self.port, work / "pid", path))
        self.proc = subprocess.Popen(["rsync", "--daemon", "--no-detach", "--config=%s" % (work / "rsyncd.conf")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        end = time.time() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                assert time.time() < end, "rsync daemon did not answer"
                time.sleep(0.2)
        self.proxy = hubs.start_throttle("rsync://127.0.0.1:%d" % self.port, rate, stats=True)
        self.url = "rsync://127.0.0.1:%d/m/" % self.proxy.port

    def bytes_sent(self):
        return self.proxy.bytes_sent()

    def kill(self):
        """The peer dies: its daemon (with its transfers) and its address go away at once."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.proxy.stop()

    def stop(self):
        if self.proc.poll() is None:
            self.kill()


@pytest.fixture
def peers(tmp_path):
    made = []

    def make(name, path, rate=0):
        made.append(Peer(tmp_path / name, path, rate))
        return made[-1]
    yield make
    for p in made:
        p.stop()


@pytest.fixture
def ms_hub(mirrors):
    """The test bed's ModelScope API server (a test double of modelscope.cn) over the same repo, counted."""
    srv = hubs.start_modelscope(mirrors)
    proxy = hubs.start_throttle(srv.url, 0, stats=True)
    yield proxy
    proxy.stop()
    srv.stop()


def start_fetch(tmp_path, hub, peer_list, name="dest", source="hf"):
    args = {"source": source, "repo_id": REPO, "endpoint": hub.url, "dest": str(tmp_path / "models" / name),
            "token": "hub-secret-token-not-for-peers", "revision": "v1" if source == "modelscope" else None,
            "peers": [{"host": h, "url": u} for h, u in peer_list], "peer_timeout": 5, "max_workers": 2}
    argfile = tmp_path / ("args-%s.json" % name)
    argfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "collections"), HF_HOME=str(tmp_path / "hf-home"),
               MODELSCOPE_CACHE=str(tmp_path / "ms-home"))
    return subprocess.Popen([sys.executable, str(ROOT / "plugins" / "modules" / "model_fetch.py"), str(argfile)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc):
    out, err = proc.communicate(timeout=180)
    res = json.loads(out)
    assert not res.get("failed"), res.get("msg")
    assert "hub-secret-token-not-for-peers" not in out + err
    return res


def same_files(a, b):
    names = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file()
                           and not p.name.startswith(".llmfleet"))
    return all((a / n).read_bytes() == (b / n).read_bytes() for n in names)


def test_a_puller_takes_every_byte_from_a_peer_and_only_metadata_from_the_hub(
        tmp_path, hub, peers, model_dir, model_bytes):
    seed = peers("seed", model_dir)
    res = finish(start_fetch(tmp_path, hub, [("seed", seed.url)]))
    assert res["changed"] and res["peer_transfer"]["bytes"] == model_bytes
    assert res["peer_transfer"]["left"] == [] and res["verified"]["sha256"] >= 2
    assert same_files(model_dir, tmp_path / "models" / "dest")
    assert seed.bytes_sent() >= model_bytes
    assert hub.bytes_sent() < model_bytes / 20  # listing and metadata only, no file bytes


def test_a_peer_that_dies_mid_transfer_is_replaced_by_the_next_which_resumes(
        tmp_path, hub, peers, model_dir, model_bytes):
    slow = peers("slow", model_dir, rate=PEER_RATE)
    other = peers("other", model_dir)
    proc = start_fetch(tmp_path, hub, [("slow", slow.url), ("other", other.url)])
    end = time.time() + 60
    while slow.bytes_sent() < model_bytes // 3:
        assert time.time() < end and proc.poll() is None, "the transfer from the slow peer did not start"
        time.sleep(0.2)
    slow.kill()
    res = finish(proc)
    tried = res["peer_transfer"]["tried"]
    assert [t["host"] for t in tried] == ["slow", "other"]
    assert tried[0]["rc"] != 0 and tried[1]["rc"] == 0
    assert same_files(model_dir, tmp_path / "models" / "dest")
    # The second peer continued the cut-off shard from the partial file: it sent clearly less than the whole model.
    assert other.bytes_sent() < model_bytes - model_bytes // 4
    assert hub.bytes_sent() < model_bytes / 20
    assert not (tmp_path / "models" / "dest" / ".cache").exists()


def test_when_every_peer_is_gone_the_hub_delivers(tmp_path, hub, peers, model_dir, model_bytes):
    empty = tmp_path / "not-yet"
    empty.mkdir()
    unfinished = peers("unfinished", empty)  # a peer whose own fetch failed: its module has no model
    dead = peers("dead", model_dir)
    dead.kill()
    res = finish(start_fetch(tmp_path, hub, [("dead", dead.url), ("unfinished", unfinished.url)]))
    assert [t["rc"] != 0 for t in res["peer_transfer"]["tried"]] == [True, True]
    assert len(res["peer_transfer"]["left"]) == res["files_total"]
    assert same_files(model_dir, tmp_path / "models" / "dest")
    assert hub.bytes_sent() >= model_bytes


def test_a_peer_serving_wrong_bytes_is_caught_by_the_hubs_sha256_and_the_hub_delivers(
        tmp_path, hub, peers, model_dir, model_bytes):
    bad = tmp_path / "bad-copy"
    shutil.copytree(model_dir, bad)
    with open(bad / BIG, "r+b") as f:  # one flipped byte deep in the tensor data: same size, same header
        f.seek(8 << 20)
        byte = f.read(1)
        f.seek(8 << 20)
        f.write(bytes([byte[0] ^ 0xFF]))
    liar = peers("liar", bad)
    res = finish(start_fetch(tmp_path, hub, [("liar", liar.url)]))
    assert res["refetched"] == [BIG]
    assert same_files(model_dir, tmp_path / "models" / "dest")
    big = (model_dir / BIG).stat().st_size
    assert big <= hub.bytes_sent() < big + model_bytes / 10  # the bad shard only, from the hub


def test_modelscope_pullers_verify_against_modelscopes_sha256_and_take_the_bytes_from_peers(
        tmp_path, ms_hub, peers, model_dir, model_bytes):
    seed = peers("seed", model_dir)
    res = finish(start_fetch(tmp_path, ms_hub, [("seed", seed.url)], source="modelscope"))
    assert res["peer_transfer"]["bytes"] == model_bytes and res["peer_transfer"]["left"] == []
    assert res["verified"]["sha256"] >= 2
    assert same_files(model_dir, tmp_path / "models" / "dest")
    assert ms_hub.bytes_sent() < model_bytes / 20
