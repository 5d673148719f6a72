"""hub_metadata's pure parts: what counts as a repo id, and reading a controller cache directory (the hub path
itself is exercised against a real olah mirror in tests/integration/test_plan_repo_id.py)."""
import json

import pytest

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import hub_metadata as H


def test_repo_ids_and_paths_are_told_apart(tmp_path):
    assert H.looks_like_repo_id("google/gemma-3-1b-it")
    assert H.looks_like_repo_id("Qwen/Qwen3.5-35B-A3B-FP8")
    assert not H.looks_like_repo_id("gemma-3-1b-it")
    assert not H.looks_like_repo_id("/models/gemma")
    assert not H.looks_like_repo_id("a/b/c")
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "name").mkdir()
    assert not H.looks_like_repo_id(str(tmp_path / "org" / "name"))


def test_a_cached_commit_is_read_without_the_hub(tmp_path):
    commit = "a" * 40
    d = tmp_path / "hf" / "org--m" / commit
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 7}}))
    m = H.fetch_metadata("org/m", "hf", commit, "http://127.0.0.1:9", None, str(tmp_path))
    assert m["cached"] and m["config"] == {"model_type": "llama"} and m["index"]["metadata"]["total_size"] == 7
    assert m["generation_config"] is None


def test_an_unknown_hub_is_refused_naming_the_variable(tmp_path):
    with pytest.raises(H.HubMetadataError, match="model_weights_source must be hf or modelscope"):
        H.fetch_metadata("org/m", "s3", None, None, None, str(tmp_path))
