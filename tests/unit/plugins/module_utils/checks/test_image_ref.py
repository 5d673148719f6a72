"""Image references as users write them: parsing, the digest pin, the registry mirror."""
import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks import image_ref
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.image_ref import ImageRefError

D = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize("ref,registry,path,repository,tag,digest", [
    ("vllm/vllm-openai:v0.17.1@" + D, "docker.io", "vllm/vllm-openai", "vllm/vllm-openai", "v0.17.1", D),
    ("ubuntu", "docker.io", "library/ubuntu", "ubuntu", None, None),
    ("docker.io/vllm/vllm-openai:latest", "docker.io", "vllm/vllm-openai", "docker.io/vllm/vllm-openai", "latest", None),
    ("127.0.0.1:5000/llmfleet/vllm-cpu:0.32.0-ab12@" + D, "127.0.0.1:5000", "llmfleet/vllm-cpu",
     "127.0.0.1:5000/llmfleet/vllm-cpu", "0.32.0-ab12", D),
    ("localhost/a/b@" + D, "localhost", "a/b", "localhost/a/b", None, D),
    ("nvcr.io/nvidia/cuda:13.0.2-base-ubuntu22.04", "nvcr.io", "nvidia/cuda", "nvcr.io/nvidia/cuda",
     "13.0.2-base-ubuntu22.04", None),
    ("registry:5000/team/img:v1", "registry:5000", "team/img", "registry:5000/team/img", "v1", None),
])
def test_parse_splits_registry_path_tag_digest(ref, registry, path, repository, tag, digest):
    parts = image_ref.parse(ref)
    assert (parts["registry"], parts["path"], parts["repository"], parts["tag"], parts["digest"]) == \
        (registry, path, repository, tag, digest)


@pytest.mark.parametrize("ref,fragment", [
    ("", "empty"),
    ("vllm/vllm-openai:v1@sha256:abc", "64 lowercase hex"),
    ("vllm/vllm-openai:v1@md5:" + "a" * 32, "not sha256"),
    ("vllm/vllm-openai:v1@sha256:" + "A" * 64, "64 lowercase hex"),
    ("Vllm/vllm-openai:v1", "repository"),
    ("vllm/vllm-openai:-bad", "tag"),
    ("vllm/vllm openai:v1", "white space"),
    ("bad_host.example:5000/x/y:1", "registry"),
])
def test_parse_rejects_malformed_references_naming_the_bad_part(ref, fragment):
    with pytest.raises(ImageRefError, match=fragment):
        image_ref.parse(ref)


def test_unpinned_reference_is_refused_with_the_commands_that_give_the_digest():
    with pytest.raises(ImageRefError) as err:
        image_ref.check_pinned("vllm/vllm-openai:v0.17.1")
    msg = str(err.value)
    assert "not pinned by digest" in msg
    assert "docker buildx imagetools inspect vllm/vllm-openai:v0.17.1" in msg
    assert "skopeo inspect docker://vllm/vllm-openai:v0.17.1" in msg
    assert "vllm_image_allow_unpinned: true" in msg


def test_unpinned_reference_without_tag_is_named_as_latest():
    with pytest.raises(ImageRefError, match="vllm/vllm-openai:latest is not pinned"):
        image_ref.check_pinned("vllm/vllm-openai")


def test_allow_unpinned_accepts_a_tag():
    assert image_ref.check_pinned("vllm/vllm-openai:v0.17.1", allow_unpinned=True)["digest"] is None


@pytest.mark.parametrize("ref,mirror_host,expected", [
    ("vllm/vllm-openai:v0.17.1@" + D, "mirror.internal:5000", "mirror.internal:5000/vllm/vllm-openai:v0.17.1@" + D),
    ("docker.io/vllm/vllm-openai@" + D, "mirror.internal:5000", "mirror.internal:5000/vllm/vllm-openai@" + D),
    ("ubuntu:24.04", "mirror.internal", "mirror.internal/library/ubuntu:24.04"),
    ("nvcr.io/nvidia/cuda:13.0", "harbor.corp/proxy-cache/", "harbor.corp/proxy-cache/nvidia/cuda:13.0"),
    ("127.0.0.1:5000/a/b:1", "https://10.0.0.9:5000", "10.0.0.9:5000/a/b:1"),
    ("vllm/vllm-openai:v1", "", "vllm/vllm-openai:v1"),
])
def test_mirror_replaces_the_registry_and_keeps_path_tag_digest(ref, mirror_host, expected):
    assert image_ref.mirror(ref, mirror_host) == expected


def test_mirror_rejects_a_malformed_mirror():
    with pytest.raises(ImageRefError, match="vllm_image_registry_mirror"):
        image_ref.mirror("vllm/vllm-openai:v1", "mirror internal")


def test_describe_pulls_and_runs_by_digest_through_the_mirror():
    desc = image_ref.describe("vllm/vllm-openai:v0.17.1@" + D, "mirror.internal:5000")
    assert desc["pinned"] is True
    assert desc["pull_repository"] == "mirror.internal:5000/vllm/vllm-openai"
    assert desc["pull_tag"] == D
    assert desc["pull_registry"] == "mirror.internal:5000"
    assert desc["resolved"] == "mirror.internal:5000/vllm/vllm-openai@" + D
    assert desc["tag_ref"] == "mirror.internal:5000/vllm/vllm-openai:v0.17.1"


def test_describe_unpinned_allowed_runs_the_tag():
    desc = image_ref.describe("127.0.0.1:5000/t/img:v2", allow_unpinned=True)
    assert desc["pinned"] is False
    assert (desc["pull_repository"], desc["pull_tag"], desc["resolved"]) == ("127.0.0.1:5000/t/img", "v2",
                                                                             "127.0.0.1:5000/t/img:v2")


def test_describe_refuses_unpinned_by_default():
    with pytest.raises(ImageRefError, match="not pinned"):
        image_ref.describe("127.0.0.1:5000/t/img:v2")
