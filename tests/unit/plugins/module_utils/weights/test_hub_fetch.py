"""plugins/module_utils/weights/hub_fetch.py called directly: the work of model_fetch without Ansible or a hub.

The hub paths (huggingface_hub, modelscope) run against local hubs in tests/integration/test_model_fetch_faults.py
and molecule/model_weights; here: host directories and archives, verification, placement, progress.
"""
import fcntl
import hashlib
import json
import os
import struct
import tarfile

import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import hub_fetch as H
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import weights as W

# model_fetch's option defaults (what AnsibleModule hands to fetch()).
DEFAULTS = {"repo_id": None, "revision": None, "allow_patterns": [], "ignore_patterns": [], "token": None,
            "endpoint": None, "local_path": None, "archive_path": None, "origin": None, "staging_dir": None,
            "progress_file": None, "space_margin": 1.05, "require_ssd": False, "environment": "dev",
            "verify_existing": False, "max_workers": 2}


def st_bytes(tensors):
    """A real safetensors byte string: tensors maps name -> nbytes (U8)."""
    header, off = {}, 0
    for name, size in tensors.items():
        header[name] = {"dtype": "U8", "shape": [size], "data_offsets": [off, off + size]}
        off += size
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + b"\1" * off


def make_model(root, shard_bytes=4096):
    """A tiny but structurally complete model directory (config, tokenizer, one safetensors shard)."""
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps({"architectures": ["Qwen3MoeForCausalLM"]}))
    (root / "tokenizer.json").write_text("{}")
    (root / "tokenizer_config.json").write_text("{}")
    (root / "model.safetensors").write_bytes(st_bytes({"w": shard_bytes}))
    return root


def params(**kw):
    p = dict(DEFAULTS)
    p.update(kw)
    return p


def test_a_second_writer_is_refused_while_the_first_holds_the_model_directory(tmp_path):
    # As a background fetch left running by an interrupted run would hold it (flock: another open file counts as
    # another writer, even in this process).
    src = make_model(tmp_path / "src")
    dest = tmp_path / "models" / "tiny"
    dest.parent.mkdir()
    holder = open(str(dest.parent / ".tiny.lock"), "w")
    fcntl.flock(holder.fileno(), fcntl.LOCK_EX)
    holder.write("4242\n")
    holder.flush()
    with pytest.raises(H.FetchError, match=r"another model_fetch \(pid 4242\) is placing .*tiny now.*nothing was changed"):
        H.fetch(params(source="local", local_path=str(src), dest=str(dest)))
    assert not dest.exists() and not (dest.parent / ".tiny.partial").exists()
    # Check mode (the role's plan) only reads, so it is not refused.
    assert H.fetch(params(source="local", local_path=str(src), dest=str(dest)), check_mode=True)[1]["changed"]
    holder.close()
    msg, result = H.fetch(params(source="local", local_path=str(src), dest=str(dest)))
    assert result["changed"] and (dest / "model.safetensors").exists()
    # No lock is left next to the model directory (the progress file is the role's to remove).
    assert sorted(os.listdir(dest.parent)) == [".tiny.progress.json", "tiny"]


def test_local_source_is_copied_verified_and_placed_then_a_rerun_changes_nothing(tmp_path):
    src = make_model(tmp_path / "src")
    dest = tmp_path / "models" / "tiny"
    warnings = []
    msg, result = H.fetch(params(source="local", local_path=str(src), dest=str(dest)), warn=warnings.append)
    assert result["changed"] and "placed and verified" in msg
    assert sorted(os.listdir(dest)) == sorted(os.listdir(src) + [W.MARKER_NAME])
    assert (dest / "model.safetensors").read_bytes() == (src / "model.safetensors").read_bytes()
    assert result["files_total"] == 4 and result["bytes_fetched"] == result["bytes_total"]
    assert not os.path.exists(result["staging_dir"])
    progress = json.loads(open(result["progress_file"]).read())
    assert progress["phase"] == "done" and progress["percent"] == 100.0
    marker = json.loads((dest / W.MARKER_NAME).read_text())
    assert marker["identity"]["origin"] == str(src) and len(marker["files"]) == 4

    msg, again = H.fetch(params(source="local", local_path=str(src), dest=str(dest)))
    assert not again["changed"] and "complete and verified" in msg


def test_check_mode_reports_the_plan_and_writes_nothing(tmp_path):
    src = make_model(tmp_path / "src")
    dest = tmp_path / "models" / "tiny"
    msg, result = H.fetch(params(source="local", local_path=str(src), dest=str(dest)), check_mode=True)
    assert result["changed"] and msg.startswith("would fetch 4 files")
    assert sorted(result["files_to_fetch"]) == sorted(os.listdir(src))
    assert not (tmp_path / "models").exists()


def test_a_damaged_existing_dest_is_repaired_from_the_source(tmp_path):
    src = make_model(tmp_path / "src")
    dest = tmp_path / "models" / "tiny"
    H.fetch(params(source="local", local_path=str(src), dest=str(dest)))
    with open(dest / "model.safetensors", "r+b") as f:
        f.truncate(100)
    msg, result = H.fetch(params(source="local", local_path=str(src), dest=str(dest)))
    assert result["changed"] and result["refetched"] == ["model.safetensors"]
    assert (dest / "model.safetensors").read_bytes() == (src / "model.safetensors").read_bytes()
    # The files that were still good came from the old dest by hard link, not by copy.
    assert "config.json" in result["files_reused"] and "model.safetensors" in result["files_to_fetch"]


def test_an_incomplete_model_is_refused_before_dest_is_touched(tmp_path):
    src = make_model(tmp_path / "src")
    os.unlink(src / "tokenizer.json")
    os.unlink(src / "tokenizer_config.json")
    dest = tmp_path / "models" / "tiny"
    with pytest.raises(H.FetchError, match="no tokenizer files"):
        H.fetch(params(source="local", local_path=str(src), dest=str(dest)))
    assert not dest.exists()


def test_archive_source_strips_its_top_directory(tmp_path):
    src = make_model(tmp_path / "tiny-model")
    archive = tmp_path / "tiny.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(src, arcname="tiny-model")
    dest = tmp_path / "models" / "tiny"
    msg, result = H.fetch(params(source="archive", archive_path=str(archive), dest=str(dest)))
    assert result["changed"] and (dest / "config.json").is_file() and result["files_total"] == 4
    msg, again = H.fetch(params(source="archive", archive_path=str(archive), dest=str(dest)))
    assert not again["changed"]


def test_bad_inputs_name_the_option(tmp_path):
    with pytest.raises(H.FetchError, match="absolute"):
        H.fetch(params(source="local", local_path=str(tmp_path), dest="relative/dir"))
    with pytest.raises(H.FetchError, match="not a directory on the host"):
        H.fetch(params(source="local", local_path=str(tmp_path / "nope"), dest=str(tmp_path / "d")))
    with pytest.raises(H.FetchError, match="needs repo_id"):
        H.fetch(params(source="hf", dest=str(tmp_path / "d")))


def test_not_enough_space_fails_before_fetching(tmp_path):
    src = make_model(tmp_path / "src")
    with pytest.raises(H.FetchError):
        H.fetch(params(source="local", local_path=str(src), dest=str(tmp_path / "d"), space_margin=1e12))
    assert not (tmp_path / "d").exists()


def test_verify_files_checks_sizes_and_each_digest_kind(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"hello")
    (tmp_path / "b.txt").write_bytes(b"world")
    (tmp_path / "c.bin").write_bytes(b"short")
    manifest = [W.manifest_entry("a.bin", 5, sha256=hashlib.sha256(b"hello").hexdigest()),
                W.manifest_entry("b.txt", 5, git_sha1=hashlib.sha1(b"blob 5\0world").hexdigest()),
                W.manifest_entry("c.bin", 6)]
    good, bad, counts = H.verify_files(str(tmp_path), manifest, ["a.bin", "b.txt", "c.bin"], 2)
    assert sorted(good) == ["a.bin", "b.txt"] and bad == ["c.bin"]
    assert counts == {"sha256": 1, "git_sha1": 1, "size": 0}
    # A digest streamed while downloading is used when it matches; a wrong one is recomputed, not trusted.
    good, bad, _counts = H.verify_files(str(tmp_path), manifest[:1], ["a.bin"], 1, streamed={"a.bin": "0" * 64})
    assert good == {"a.bin": hashlib.sha256(b"hello").hexdigest()} and bad == []


def test_structural_check_finds_a_truncated_shard_and_a_missing_indexed_shard(tmp_path):
    root = make_model(tmp_path / "m")
    (root / W.INDEX_NAME).write_text(json.dumps({"weight_map": {"w": "model.safetensors", "v": "model-2.safetensors"}}))
    with open(root / "model.safetensors", "r+b") as f:
        f.truncate(os.path.getsize(root / "model.safetensors") - 1)
    problems = H.structural_check(str(root), None)
    assert any("model-2.safetensors" in p and "missing" in p for p in problems)
    assert any(p.startswith("model.safetensors: ") and "truncated" in p for p in problems)


def test_place_swaps_an_existing_directory(tmp_path):
    staging, dest = tmp_path / "staging", tmp_path / "dest"
    staging.mkdir()
    (staging / "new").write_text("new")
    dest.mkdir()
    (dest / "old").write_text("old")
    H.place(str(staging), str(dest))
    assert os.listdir(dest) == ["new"] and not staging.exists()
    assert [n for n in os.listdir(tmp_path) if n != "dest"] == []


def test_listing_skips_client_bookkeeping_and_part_files_are_found(tmp_path):
    (tmp_path / ".cache" / "huggingface").mkdir(parents=True)
    (tmp_path / ".cache" / "huggingface" / "x.incomplete").write_bytes(b"12")
    (tmp_path / "model.safetensors").write_bytes(b"1234")
    (tmp_path / "model.safetensors_0_1023").write_bytes(b"1")
    assert set(H.listing(str(tmp_path))) == {"model.safetensors", "model.safetensors_0_1023"}
    assert H.incomplete_files(str(tmp_path)) == [str(tmp_path / ".cache" / "huggingface" / "x.incomplete")]
    assert H.part_files(str(tmp_path), ["model.safetensors"]) == [str(tmp_path / "model.safetensors_0_1023")]


def test_progress_counts_bytes_on_disk(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 50)
    manifest = [W.manifest_entry("a", 100), W.manifest_entry("b", 100)]
    prog = H.Progress(str(tmp_path / "p.json"), str(tmp_path), manifest, ["a"], base_done=100)
    rec = prog.write("downloading")
    assert rec["phase"] == "downloading" and prog.measure() == 150
    assert json.loads((tmp_path / "p.json").read_text())["phase"] == "downloading"


# ---- issue 28: nothing left behind ------------------------------------------------------------------------------

def _upload(src, staging):
    """What the role's upload does: the controller's files copied into the staging directory next to dest."""
    import shutil
    staging.mkdir(parents=True, exist_ok=True)
    for name in os.listdir(src):
        shutil.copyfile(str(src / name), str(staging / name))


def test_a_refused_placement_keeps_no_lock_and_the_next_good_run_removes_what_it_left(tmp_path):
    good = make_model(tmp_path / "good")
    bad = make_model(tmp_path / "bad")
    with open(str(bad / "model.safetensors"), "r+b") as fh:   # a truncated shard
        fh.truncate(os.path.getsize(str(bad / "model.safetensors")) - 100)
    dest = tmp_path / "models" / "tiny"
    staging = tmp_path / "models" / ".tiny.partial"
    upload = dict(source="local", local_path=str(staging), dest=str(dest), origin="controller:/srv/ctl/tiny")

    _upload(good, staging)
    assert H.fetch(params(**upload))[1]["changed"]
    os.unlink(str(tmp_path / "models" / ".tiny.progress.json"))          # the role removes it after a placement
    assert sorted(os.listdir(str(dest.parent))) == ["tiny"]

    _upload(bad, staging)
    with pytest.raises(H.FetchError, match="not usable"):
        H.fetch(params(**upload))
    # Refused: the serving directory is untouched and no lock is left; staging and progress stay (resumable).
    assert (dest / "model.safetensors").read_bytes() == (good / "model.safetensors").read_bytes()
    assert sorted(os.listdir(str(dest.parent))) == [".tiny.partial", ".tiny.progress.json", "tiny"]

    # The next good run (the same files as the directory in place): the plan says there is something to do, and
    # the run removes what the refused one left, leaving the model directory alone.
    _upload(good, staging)
    inode = os.stat(str(dest / "model.safetensors")).st_ino
    plan = H.fetch(params(**upload), check_mode=True)[1]
    assert plan["changed"] and plan["leftovers_removed"] == [str(staging), str(tmp_path / "models" / ".tiny.progress.json")]
    assert staging.exists()                                                # check mode removes nothing
    msg, result = H.fetch(params(**upload))
    assert result["changed"] and "removed what an interrupted or refused placement left" in msg
    assert sorted(os.listdir(str(dest.parent))) == ["tiny"]
    assert os.stat(str(dest / "model.safetensors")).st_ino == inode
    # And then nothing to do.
    _msg, again = H.fetch(params(source="local", local_path=str(dest), dest=str(dest),
                                 origin="controller:/srv/ctl/tiny"), check_mode=True)
    assert not again["changed"] and again["leftovers_removed"] == []


def test_a_killed_fetch_leaves_a_lock_file_that_the_next_good_run_removes(tmp_path):
    src = make_model(tmp_path / "src")
    dest = tmp_path / "models" / "tiny"
    H.fetch(params(source="local", local_path=str(src), dest=str(dest)))
    # What kill -9 during a later fetch leaves: a lock file nobody holds, a half-written staging directory, progress.
    (dest.parent / ".tiny.lock").write_text("99999\n")
    (dest.parent / ".tiny.partial" / ".cache").mkdir(parents=True)
    (dest.parent / ".tiny.partial" / "model.safetensors").write_bytes(b"\0" * 10)
    msg, result = H.fetch(params(source="local", local_path=str(src), dest=str(dest)))
    assert result["changed"] and len(result["leftovers_removed"]) == 3
    assert sorted(os.listdir(str(dest.parent))) == ["tiny"]


def test_leftovers_of_a_placement_that_still_runs_are_not_removed(tmp_path):
    src = make_model(tmp_path / "src")
    dest = tmp_path / "models" / "tiny"
    H.fetch(params(source="local", local_path=str(src), dest=str(dest)))
    (dest.parent / ".tiny.partial").mkdir()
    holder = open(str(dest.parent / ".tiny.lock"), "w")
    fcntl.flock(holder.fileno(), fcntl.LOCK_EX)
    holder.write("4242\n")
    holder.flush()
    try:
        with pytest.raises(H.FetchError, match=r"another model_fetch \(pid 4242\) is placing"):
            H.fetch(params(source="local", local_path=str(src), dest=str(dest)))
        assert (dest.parent / ".tiny.partial").is_dir()
    finally:
        holder.close()
