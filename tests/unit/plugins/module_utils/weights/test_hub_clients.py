"""The sources of a placement (module_utils.weights.hub_clients): a tar archive into the staging directory.

The hub clients themselves (huggingface_hub, modelscope) run against local hubs in
tests/integration/test_model_fetch_faults.py and molecule/model_weights.
"""
import os
import tarfile

import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import hub_clients as C
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights.fetch_place import FetchError


def make_dir(root):
    root.mkdir(parents=True)
    (root / "config.json").write_text("{}")
    (root / "sub").mkdir()
    (root / "sub" / "model.safetensors").write_bytes(b"\1" * 64)
    return root


def test_an_archive_is_extracted_without_its_top_directory(tmp_path):
    src = make_dir(tmp_path / "tiny-model")
    archive = tmp_path / "tiny.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(src, arcname="tiny-model")
    staging = tmp_path / "staging"
    C.extract_archive(str(archive), str(staging))
    assert sorted(str(p.relative_to(staging)) for p in staging.rglob("*") if p.is_file()) == [
        "config.json", "sub/model.safetensors"]


def test_archive_with_a_link_is_refused(tmp_path):
    src = make_dir(tmp_path / "m")
    os.symlink("/etc/passwd", src / "evil")
    archive = tmp_path / "evil.tar"
    with tarfile.open(archive, "w") as tf:
        tf.add(src, arcname="m")
    with pytest.raises(FetchError, match="may not be extracted"):
        C.extract_archive(str(archive), str(tmp_path / "staging"))
    assert not (tmp_path / "staging").exists()


def test_a_local_copy_places_exactly_the_paths_asked_for(tmp_path):
    src = make_dir(tmp_path / "src")
    staging = tmp_path / "staging"
    C.local_copy(str(src), str(staging), ["sub/model.safetensors"])
    assert [str(p.relative_to(staging)) for p in staging.rglob("*") if p.is_file()] == ["sub/model.safetensors"]
    assert (staging / "sub" / "model.safetensors").read_bytes() == b"\1" * 64
