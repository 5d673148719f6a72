"""The vllm_image_ref filter as the vllm_image role calls it (errors come back as data for an assert)."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.filter.image_ref import FilterModule

F = FilterModule().filters()["vllm_image_ref"]
D = "sha256:" + "ab" * 32


def test_pinned_reference_has_no_error_and_pulls_by_digest():
    out = F("vllm/vllm-openai:v0.28.0@" + D, "mirror.internal:5000")
    assert out["error"] is None
    assert out["pull_ref"] == "mirror.internal:5000/vllm/vllm-openai@" + D


def test_unpinned_reference_returns_the_fix_as_error():
    out = F("vllm/vllm-openai:v0.28.0")
    assert "not pinned by digest" in out["error"] and "pull_ref" not in out


def test_strict_raises():
    with pytest.raises(AnsibleFilterError, match="not pinned"):
        F("vllm/vllm-openai:v0.28.0", "", False, True)


def test_none_mirror_is_no_mirror():
    assert F("a.io/b/c:1@" + D, None)["pull_ref"] == "a.io/b/c@" + D
