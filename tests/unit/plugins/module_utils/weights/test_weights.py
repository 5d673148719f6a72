"""Unit tests for plugins/module_utils/weights/weights.py (pure logic of model_fetch)."""
import hashlib
import json
import os
import struct
import tarfile

import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import weights as W

SHA_A = "a" * 64
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def st_bytes(tensors):
    """A real safetensors byte string: tensors maps name -> nbytes (U8)."""
    header, off = {}, 0
    for n, b in tensors.items():
        header[n] = {"dtype": "U8", "shape": [b], "data_offsets": [off, off + b]}
        off += b
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + b"\0" * off


def test_commit_and_prod_revision_warning():
    assert W.is_commit(COMMIT)
    assert not W.is_commit("main") and not W.is_commit(COMMIT[:-1]) and not W.is_commit(None)
    assert "pin model_weights_revision" in W.revision_warning("main", "prod", "hf")
    assert "default branch" in W.revision_warning(None, "prod", "modelscope")
    assert W.revision_warning(COMMIT, "prod", "hf") is None
    assert W.revision_warning("main", "dev", "hf") is None
    assert W.revision_warning(None, "prod", "local") is None


def test_filter_paths_follows_hub_semantics():
    paths = ["config.json", "model-1.safetensors", "original/consolidated.pth", "tokenizer.json"]
    assert W.filter_paths(paths, ["*.json"]) == ["config.json", "tokenizer.json"]
    assert W.filter_paths(paths, None, ["original/"]) == ["config.json", "model-1.safetensors", "tokenizer.json"]
    assert W.filter_paths(paths) == paths


def test_exact_pattern_matches_only_its_path():
    import fnmatch
    pat = W.exact_pattern("weird[1]*?.bin")
    assert fnmatch.fnmatch("weird[1]*?.bin", pat)
    assert not fnmatch.fnmatch("weird1xx.bin", pat)


def test_parse_index_lists_each_shard_once_and_rejects_bad_indexes():
    idx = json.dumps({"weight_map": {"a": "m-1.safetensors", "b": "m-2.safetensors", "c": "m-1.safetensors"}})
    assert W.parse_index(idx) == ["m-1.safetensors", "m-2.safetensors"]
    with pytest.raises(ValueError, match="not valid JSON"):
        W.parse_index("{")
    with pytest.raises(ValueError, match="no weight_map"):
        W.parse_index("{}")
    with pytest.raises(ValueError, match="invalid shard"):
        W.parse_index(json.dumps({"weight_map": {"a": "../../etc/passwd"}}))


def test_tokenizer_alternatives():
    assert W.missing_tokenizer({"tokenizer.json"}) is None
    assert W.missing_tokenizer({"vocab.json", "merges.txt"}) is None
    assert W.missing_tokenizer({"tokenizer.model"}) is None
    assert "no tokenizer files" in W.missing_tokenizer({"vocab.json", "config.json"})


def test_completeness_reports_every_problem_a_user_meets():
    manifest = [W.manifest_entry("config.json", 10), W.manifest_entry("m-1.safetensors", 100, SHA_A),
                W.manifest_entry("m-2.safetensors", 200, SHA_A)]
    idx = json.dumps({"weight_map": {"a": "m-1.safetensors", "b": "m-2.safetensors"}})
    ok = W.completeness(manifest, {"config.json": 10, "tokenizer.json": 5, "m-1.safetensors": 100,
                                   "m-2.safetensors": 200}, idx)
    assert ok["ok"] and ok["shards"] == ["m-1.safetensors", "m-2.safetensors"]
    bad = W.completeness(manifest, {"m-1.safetensors": 99}, idx)
    assert not bad["ok"]
    text = " | ".join(bad["problems"])
    assert "config.json is missing" in text and "no tokenizer files" in text
    assert "shard m-2.safetensors named in model.safetensors.index.json is missing" in text
    assert bad["size_mismatch"] == [{"path": "m-1.safetensors", "expected": 100, "actual": 99}]
    assert bad["missing"] == ["config.json", "m-2.safetensors"]


def test_completeness_without_index_needs_some_weights():
    r = W.completeness(None, {"config.json": 1, "tokenizer.json": 1})
    assert any("no weights" in p for p in r["problems"])
    assert W.completeness(None, {"config.json": 1, "tokenizer.json": 1, "model.safetensors": 9})["ok"]


def test_safetensors_header_catches_truncation():
    data = st_bytes({"w": 100, "b": 4})
    assert W.check_safetensors_header(data, len(data)) is None
    assert "truncated" in W.check_safetensors_header(data, len(data) - 1)
    assert "does not fit" in W.check_safetensors_header(struct.pack("<Q", 10 ** 6) + b"{}", 50)
    assert "not JSON" in W.check_safetensors_header(struct.pack("<Q", 2) + b"xx", 10)


def test_fetch_plan_keeps_verified_verifies_present_fetches_rest():
    manifest = [W.manifest_entry("a", 10, SHA_A), W.manifest_entry("b", 20, SHA_A), W.manifest_entry("c", 30),
                W.manifest_entry("d", 40)]
    present = {"a": (10, 111), "b": (20, 222), "c": (29, 333)}
    verified = {"a": {"size": 10, "mtime_ns": 111, "digest": SHA_A},
                "b": {"size": 20, "mtime_ns": 999, "digest": SHA_A}}  # b changed since: re-verify
    plan = W.fetch_plan(manifest, present, verified)
    assert plan["keep"] == ["a"] and plan["verify"] == ["b"] and plan["fetch"] == ["c", "d"]
    assert plan["fetch_bytes"] == 70 and plan["total_bytes"] == 100


def test_hash_file_sha256_and_git_blob_id(tmp_path):
    f = tmp_path / "x"
    f.write_bytes(b"hello\n")
    assert W.hash_file(str(f), "sha256") == hashlib.sha256(b"hello\n").hexdigest()
    # git hash-object of "hello\n"
    assert W.hash_file(str(f), "git_sha1") == "ce013625030ba8dba906f756967f9e9ca394464a"
    e = W.manifest_entry("x", 6, hashlib.sha256(b"hello\n").hexdigest())
    assert W.verify_digest(e, W.hash_file(str(f), "sha256"))[0]
    assert not W.verify_digest(e, "0" * 64)[0]
    assert W.digest_kind(W.manifest_entry("y", 1, git_sha1="ab")) == "git_sha1"
    assert W.digest_kind(W.manifest_entry("y", 1)) is None


def test_manifests_from_hub_listings():
    hf = W.manifest_from_hf_tree([{"path": "m.safetensors", "size": 5, "lfs_sha256": SHA_A, "blob_id": "b1"},
                                  {"path": "config.json", "size": 3, "lfs_sha256": None, "blob_id": "b2"}])
    assert hf[0] == {"path": "config.json", "size": 3, "sha256": None, "git_sha1": "b2"}
    assert hf[1]["sha256"] == SHA_A and hf[1]["git_sha1"] is None
    ms = W.manifest_from_modelscope([{"path": "d", "size": 0, "type": "tree"},
                                     {"path": "d/x", "size": 2, "sha256": SHA_A.upper(), "type": "blob"},
                                     {"path": "y", "size": 2, "sha256": "", "type": "blob"}])
    assert [m["path"] for m in ms] == ["d/x", "y"] and ms[0]["sha256"] == SHA_A and ms[1]["sha256"] is None


def test_space_check_refuses_with_numbers_and_a_fix():
    ok, needed, msg = W.space_check(100 * 2 ** 30, 200 * 2 ** 30, 1.1)
    assert ok and needed == int(110 * 2 ** 30) and msg is None
    ok, needed, msg = W.space_check(67 * 2 ** 30, 50 * 2 ** 30, 1.1)
    assert not ok and "73.7 GiB needed, 50.0 GiB free" in msg and "model_weights_dir" in msg
    with pytest.raises(ValueError):
        W.space_check(1, 1, 0.5)


def _sysfs(tmp_path, layout):
    """layout: {"sda": {"rot": "1", "dev": "8:0", "parts": {"sda1": "8:1"}}, "dm-0": {"rot": "0", "dev": "253:0", "slaves": ["sda"]}}"""
    root = tmp_path / "sys"
    devdir = root / "dev" / "block"
    devdir.mkdir(parents=True)
    for name, spec in layout.items():
        d = root / "devices" / "virtual" / name
        (d / "queue").mkdir(parents=True)
        (d / "queue" / "rotational").write_text(spec["rot"] + "\n")
        (d / "dev").write_text(spec["dev"] + "\n")
        os.symlink(d, devdir / spec["dev"])
        for part, pdev in spec.get("parts", {}).items():
            (d / part).mkdir()
            (d / part / "partition").write_text("1\n")
            (d / part / "dev").write_text(pdev + "\n")
            os.symlink(d / part, devdir / pdev)
        if spec.get("slaves"):
            (d / "slaves").mkdir()
            for s in spec["slaves"]:
                os.symlink(root / "devices" / "virtual" / s, d / "slaves" / s)
    return str(root)


def test_rotational_detection_from_sysfs(tmp_path):
    sysfs = _sysfs(tmp_path, {"sda": {"rot": "1", "dev": "8:0", "parts": {"sda1": "8:1"}},
                              "nvme0n1": {"rot": "0", "dev": "259:0", "parts": {"nvme0n1p2": "259:2"}},
                              "dm-0": {"rot": "0", "dev": "253:0", "slaves": ["sda"]},
                              "dm-1": {"rot": "0", "dev": "253:1", "slaves": ["nvme0n1"]}})
    assert W.rotational_for_device(8, 1, sysfs) is True       # partition of an HDD
    assert W.rotational_for_device(259, 2, sysfs) is False    # partition of an NVMe
    assert W.rotational_for_device(253, 0, sysfs) is True     # LVM on an HDD, though dm says 0
    assert W.rotational_for_device(253, 1, sysfs) is False
    assert W.rotational_for_device(0, 45, sysfs) is None      # tmpfs / overlay
    assert W.rotational_for_device(7, 7, sysfs) is None       # unknown device


def test_archive_members():
    assert W.safe_member("model/config.json", "file")
    assert not W.safe_member("/etc/passwd", "file")
    assert not W.safe_member("model/../../etc/cron.d/x", "file")
    assert not W.safe_member("model/link", "other")
    assert W.strip_archive_root(["m", "m/config.json", "m/a/b"]) == "m/"
    assert W.strip_archive_root(["config.json", "tokenizer.json"]) == ""


def test_archive_files_are_the_regular_members_below_the_top_directory():
    def member(name, kind):
        info = tarfile.TarInfo(name)
        info.type = kind
        return info

    members = [member("m", tarfile.DIRTYPE), member("m/config.json", tarfile.REGTYPE),
               member("m/sub/model.safetensors", tarfile.REGTYPE)]
    assert [(m.name, rel) for m, rel in W.archive_files(members, "a.tar")] == [
        ("m/config.json", "config.json"), ("m/sub/model.safetensors", "sub/model.safetensors")]
    refused = members + [member("m/evil", tarfile.SYMTYPE), member("../up.txt", tarfile.REGTYPE)]
    with pytest.raises(ValueError, match=r"archive a.tar has members that may not be extracted .*: m/evil, ../up.txt"):
        W.archive_files(refused, "a.tar")


def test_bookkeeping_is_never_part_of_the_model():
    assert W.is_client_bookkeeping(".cache/huggingface/download/x.metadata")
    assert W.is_client_bookkeeping("model-1.safetensors.incomplete")
    assert W.is_client_bookkeeping(W.MARKER_NAME)
    assert not W.is_client_bookkeeping("config.json")


def test_progress_record_has_bytes_percent_rate_eta():
    p = W.progress(done=600 * 2 ** 20, total=1000 * 2 ** 20, done_at_start=100 * 2 ** 20, elapsed=10.0)
    assert p["percent"] == 60.0 and p["rate_bps"] == 50 * 2 ** 20 and p["eta_s"] == 8
    assert p["line"] == "downloading: 600.0 MiB / 1000.0 MiB (60.0%) at 50.0 MiB/s, ETA 8s"
    assert W.progress(0, 10, 0, 0.0)["eta_s"] is None
    assert W.human_duration(3725) == "1h02m05s" and W.human_bytes(512) == "512 B"


def test_an_adapter_needs_its_config_and_weights_but_no_tokenizer():
    adapter = {"adapter_config.json": 300, "adapter_model.safetensors": 4096}
    assert W.completeness(None, adapter, kind="adapter")["ok"]
    # As a model the same directory misses config.json and a tokenizer: the kind decides.
    as_model = " | ".join(W.completeness(None, adapter)["problems"])
    assert "config.json is missing" in as_model and "no tokenizer files" in as_model
    missing = W.completeness(None, {"adapter_model.safetensors": 4096}, kind="adapter")["problems"]
    assert missing == ["adapter_config.json is missing (a LoRA adapter directory has one)"]
    no_weights = W.completeness(None, {"adapter_config.json": 300}, kind="adapter")["problems"]
    assert len(no_weights) == 1 and "no weights" in no_weights[0]
