"""A controller upload spread over the LAN (model_weights_peer_transfer with a local or archive source on the
controller), against real rsync daemons: the puller's modules as the model_weights role runs them.

The controller hashes the model (model_manifest, run here as the role runs it on the controller); the puller writes
that manifest into its staging directory and pulls the files from its peers (model_peer_pull: rsync --partial, the
next peer on a failure); model_fetch (source local, in place) verifies every file against the controller's sha256
and renames the directory into place. A peer's word is never taken: a flipped byte on a peer fails the
controller's sha256. Needs rsync; no Docker, no hub.
"""
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "testbed"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_peer_fetch import PEER_RATE, Peer  # noqa: E402

BIG = "model-00002-of-00002.safetensors"
ORIGIN = "controller:/data/models/tiny"

pytestmark = pytest.mark.skipif(shutil.which("rsync") is None, reason="needs rsync (apt-get install rsync)")


# model_dir and model_bytes: conftest.py.


@pytest.fixture
def peers(tmp_path):
    made = []

    def make(name, path, rate=0):
        made.append(Peer(tmp_path / name, path, rate))
        return made[-1]
    yield make
    for p in made:
        p.stop()


def module(name, args, tmp_path, wait=True):
    argfile = tmp_path / ("args-%s-%d.json" % (name, time.monotonic_ns()))
    argfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "collections"))
    proc = subprocess.Popen([sys.executable, str(ROOT / "plugins" / "modules" / ("%s.py" % name)), str(argfile)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return result(proc) if wait else proc


def result(proc):
    out, _err = proc.communicate(timeout=180)
    return json.loads(out)


def controller_manifest(tmp_path, path, kind="directory"):
    res = module("model_manifest", {"path": str(path), "kind": kind}, tmp_path)
    assert not res.get("failed"), res.get("msg")
    return res


def pull(tmp_path, manifest, peer_list, wait=True):
    return module("model_peer_pull", {"dest": str(tmp_path / "models" / "dest"), "manifest": manifest,
                                      "peers": [{"host": h, "url": u} for h, u in peer_list], "peer_timeout": 5},
                  tmp_path, wait)


def place(tmp_path):
    """model_fetch as the role's round runs it after the pull: the staging directory, verified and placed."""
    return module("model_fetch", {"source": "local", "local_path": str(tmp_path / "models" / ".dest.partial"),
                                  "origin": ORIGIN, "dest": str(tmp_path / "models" / "dest"), "max_workers": 2},
                  tmp_path)


def same_files(a, b):
    names = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file()
                           and not p.name.startswith(".llmfleet"))
    return all((a / n).read_bytes() == (b / n).read_bytes() for n in names)


def test_the_controllers_manifest_holds_every_files_sha256(tmp_path, model_dir, model_bytes):
    (model_dir / ".cache").mkdir(exist_ok=True)
    (model_dir / ".cache" / "junk").write_text("client bookkeeping")
    res = controller_manifest(tmp_path, model_dir)
    names = sorted(p.relative_to(model_dir).as_posix() for p in model_dir.rglob("*")
                   if p.is_file() and not p.relative_to(model_dir).as_posix().startswith(".cache/"))
    assert [f["path"] for f in res["files"]] == names
    assert res["bytes"] == model_bytes  # the bookkeeping file left out
    assert all(len(f["sha256"]) == 64 for f in res["files"])
    shutil.rmtree(model_dir / ".cache")


def test_a_puller_takes_the_upload_from_a_peer_and_verifies_it_against_the_controllers_sha256(
        tmp_path, peers, model_dir, model_bytes):
    manifest = controller_manifest(tmp_path, model_dir)["files"]
    seed = peers("seed", model_dir)
    res = pull(tmp_path, manifest, [("seed", seed.url)])
    assert res["changed"] and res["peer_transfer"]["bytes"] == model_bytes and res["peer_transfer"]["left"] == []
    placed = place(tmp_path)
    assert not placed.get("failed"), placed.get("msg")
    assert placed["verified"]["sha256"] == len(manifest)  # every file against the controller's digest
    dest = tmp_path / "models" / "dest"
    assert same_files(model_dir, dest)
    marker = json.loads((dest / ".llmfleet-weights.json").read_text())
    assert marker["identity"]["origin"] == ORIGIN
    assert [f["path"] for f in marker["files"]] == [f["path"] for f in manifest]
    assert not (tmp_path / "models" / ".dest.partial").exists() and not (dest / ".cache").exists()
    assert seed.bytes_sent() >= model_bytes


def test_a_peer_serving_wrong_bytes_fails_the_controllers_sha256_and_only_that_file_is_left_to_send(
        tmp_path, peers, model_dir):
    manifest = controller_manifest(tmp_path, model_dir)["files"]
    bad = tmp_path / "bad-copy"
    shutil.copytree(model_dir, bad)
    with open(bad / BIG, "r+b") as f:  # one flipped byte deep in the tensor data: same size, same header
        f.seek(8 << 20)
        byte = f.read(1)
        f.seek(8 << 20)
        f.write(bytes([byte[0] ^ 0xFF]))
    liar = peers("liar", bad)
    res = pull(tmp_path, manifest, [("liar", liar.url)])
    assert res["peer_transfer"]["left"] == []  # rsync delivered every file, sizes right
    placed = place(tmp_path)
    assert placed.get("failed") and BIG in placed["msg"], placed
    staging = tmp_path / "models" / ".dest.partial"
    assert not (staging / BIG).exists()  # deleted: the controller sends it (the role's upload_direct.yml)
    assert not (tmp_path / "models" / "dest").exists()
    shutil.copyfile(model_dir / BIG, staging / BIG)
    placed = place(tmp_path)
    assert not placed.get("failed"), placed.get("msg")
    assert same_files(model_dir, tmp_path / "models" / "dest")


def test_a_peer_that_dies_mid_transfer_is_replaced_by_the_next_which_resumes(tmp_path, peers, model_dir, model_bytes):
    manifest = controller_manifest(tmp_path, model_dir)["files"]
    slow = peers("slow", model_dir, rate=PEER_RATE)
    other = peers("other", model_dir)
    proc = pull(tmp_path, manifest, [("slow", slow.url), ("other", other.url)], wait=False)
    end = time.time() + 60
    while slow.bytes_sent() < model_bytes // 3:
        assert time.time() < end and proc.poll() is None, "the transfer from the slow peer did not start"
        time.sleep(0.2)
    slow.kill()
    res = result(proc)
    tried = res["peer_transfer"]["tried"]
    assert [t["host"] for t in tried] == ["slow", "other"] and tried[0]["rc"] != 0 and tried[1]["rc"] == 0
    assert res["peer_transfer"]["left"] == []
    assert other.bytes_sent() < model_bytes - model_bytes // 4  # the cut-off shard continued, not resent
    placed = place(tmp_path)
    assert not placed.get("failed"), placed.get("msg")
    assert same_files(model_dir, tmp_path / "models" / "dest")


def test_when_no_peer_delivers_the_files_are_left_for_the_controller(tmp_path, peers, model_dir):
    manifest = controller_manifest(tmp_path, model_dir)["files"]
    dead = peers("dead", model_dir)
    dead.kill()
    res = pull(tmp_path, manifest, [("dead", dead.url)])
    assert res["peer_transfer"]["tried"][0]["rc"] != 0
    assert res["peer_transfer"]["left"] == sorted(f["path"] for f in manifest)


def test_an_archive_upload_is_verified_against_the_sha256_of_the_archives_members(tmp_path, peers, model_dir):
    archive = tmp_path / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(model_dir, arcname="tiny")  # one top-level directory: model_fetch strips it, so does the manifest
    res = controller_manifest(tmp_path, archive, kind="archive")
    assert sorted(f["path"] for f in res["files"]) == sorted(p.relative_to(model_dir).as_posix()
                                                             for p in model_dir.rglob("*") if p.is_file())
    seed = peers("seed", model_dir)
    assert pull(tmp_path, res["files"], [("seed", seed.url)])["peer_transfer"]["left"] == []
    placed = place(tmp_path)
    assert not placed.get("failed"), placed.get("msg")
    assert placed["verified"]["sha256"] == len(res["files"])
    assert same_files(model_dir, tmp_path / "models" / "dest")


def test_a_manifest_without_sha256_or_with_a_path_leaving_the_directory_is_refused(tmp_path):
    res = pull(tmp_path, [{"path": "config.json", "size": 3}], [])
    assert res.get("failed") and "sha256" in res["msg"]
    res = pull(tmp_path, [{"path": "../../etc/x", "size": 3, "sha256": "0" * 64}], [])
    assert res.get("failed") and "inside the model directory" in res["msg"]
    assert not (tmp_path / "models").exists()
