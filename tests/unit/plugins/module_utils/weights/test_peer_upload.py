"""A controller upload spread over the LAN: the controller's manifest of a directory or archive, and what a puller
accepts as one (plugins/module_utils/weights/peer_upload.py)."""
import hashlib
import io
import tarfile

import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import peer_upload as U


def sha(data):
    return hashlib.sha256(data).hexdigest()


def test_a_directory_manifest_has_every_model_files_size_and_sha256_and_no_bookkeeping(tmp_path):
    (tmp_path / "config.json").write_bytes(b"{}")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.safetensors").write_bytes(b"x" * 1000)
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "junk").write_bytes(b"j")
    (tmp_path / ".llmfleet-weights.json").write_text("{}")
    (tmp_path / "b.incomplete").write_bytes(b"half")
    (tmp_path / "link.json").symlink_to(tmp_path / "config.json")  # a hub cache snapshot: sent as its content
    m = U.dir_manifest(str(tmp_path))
    assert [(e["path"], e["size"], e["sha256"]) for e in m] == [
        ("config.json", 2, sha(b"{}")), ("link.json", 2, sha(b"{}")), ("sub/a.safetensors", 1000, sha(b"x" * 1000))]


def test_an_empty_or_missing_directory_is_refused(tmp_path):
    with pytest.raises(U.ManifestError, match="no model files"):
        U.dir_manifest(str(tmp_path))
    with pytest.raises(U.ManifestError, match="not a directory"):
        U.dir_manifest(str(tmp_path / "nope"))


def tar_with(path, members, mode="w"):
    with tarfile.open(path, mode) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tf.addfile(info)
            else:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))


def test_an_archive_manifest_strips_one_top_directory_as_the_extraction_does(tmp_path):
    tar_with(tmp_path / "m.tar.gz", [("tiny", None), ("tiny/config.json", b"{}"), ("tiny/w/x.bin", b"abc")], "w:gz")
    m = U.archive_manifest(str(tmp_path / "m.tar.gz"))
    expected = [("config.json", 2, sha(b"{}")), ("w/x.bin", 3, sha(b"abc"))]
    assert [(e["path"], e["size"], e["sha256"]) for e in m] == expected
    tar_with(tmp_path / "flat.tar", [("config.json", b"{}"), ("x.bin", b"abc")])
    assert [e["path"] for e in U.archive_manifest(str(tmp_path / "flat.tar"))] == ["config.json", "x.bin"]


def test_an_archive_with_a_member_leaving_the_directory_or_no_archive_at_all_is_refused(tmp_path):
    tar_with(tmp_path / "evil.tar", [("config.json", b"{}"), ("../../etc/passwd", b"x")])
    with pytest.raises(U.ManifestError, match="may not be extracted"):
        U.archive_manifest(str(tmp_path / "evil.tar"))
    (tmp_path / "not.tar").write_bytes(b"plain text")
    with pytest.raises(U.ManifestError, match="not a readable tar archive"):
        U.archive_manifest(str(tmp_path / "not.tar"))


def test_the_manifest_digest_changes_with_any_file_and_not_with_order():
    a = [{"path": "a", "size": 1, "sha256": "1" * 64}, {"path": "b", "size": 2, "sha256": "2" * 64}]
    b = [dict(a[0]), dict(a[1], sha256="3" * 64)]
    assert U.manifest_digest(a) != U.manifest_digest(b)
    assert U.manifest_digest(a) == U.manifest_digest([dict(e) for e in a])


@pytest.mark.parametrize("manifest, why", [
    ([], "non-empty list"),
    ([{"path": "config.json"}], "needs path and size"),
    ([{"path": "config.json", "size": 2}], "no sha256"),
    ([{"path": "config.json", "size": 2, "sha256": "nothex"}], "no sha256"),
    ([{"path": "../x", "size": 2, "sha256": "0" * 64}], "inside the model directory"),
    ([{"path": "/etc/x", "size": 2, "sha256": "0" * 64}], "inside the model directory"),
    ([{"path": ".llmfleet-weights.json", "size": 2, "sha256": "0" * 64}], "inside the model directory"),
])
def test_a_puller_refuses_a_manifest_it_cannot_verify_against(manifest, why):
    with pytest.raises(U.ManifestError, match=why):
        U.staging_marker(manifest)


def test_the_staging_marker_holds_the_controllers_files_sorted():
    marker = U.staging_marker([{"path": "b", "size": 2, "sha256": "A" * 64}, {"path": "a", "size": 1, "sha256": "1" * 64}])
    assert [(f["path"], f["sha256"]) for f in marker["files"]] == [("a", "1" * 64), ("b", "a" * 64)]
