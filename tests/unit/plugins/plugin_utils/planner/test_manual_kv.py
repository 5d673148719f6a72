"""A model the planner does not understand, planned with the KV cache sized by hand (manual_kv.py): what the user
gets, and that it is never silent about what was not understood."""
import copy
import json
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import manual_kv as B
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import model_profiles as M
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu import topology as T
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.gpu_catalogue import annotate_gpu_facts, load_catalogue
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.vllm_bootlog import compare_with_plan

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "model_configs")
GIB = 1024 ** 3


def config(name):
    with open(os.path.join(FIX, name + ".json")) as fh:
        return json.load(fh)


def unknown_llama():
    """Llama-3.1-8B-Instruct's published config.json under an architecture name nobody models."""
    return dict(config("meta-llama--Llama-3.1-8B-Instruct"), architectures=["FancyNewForCausalLM"])


def refusal(cfg):
    with pytest.raises(M.NotModelledError) as e:
        M.normalize_config(cfg, "fancy/config.json")
    return str(e.value)


def facts(spec):
    return annotate_gpu_facts(T.gpu_facts_from_spec(spec), load_catalogue())


def test_the_refusal_names_the_input_that_plans_it_by_hand():
    msg = refusal(unknown_llama())
    assert "FancyNewForCausalLM is not one the planner models" in msg
    assert "kv_cache_memory_bytes" in msg and "llmfleet_kv_cache_memory_bytes" in msg


def test_an_unknown_layer_type_is_a_not_modelled_error_too():
    cfg = copy.deepcopy(config("openai--gpt-oss-20b"))
    cfg["layer_types"][3] = "lightning_attention"
    assert "layer type 'lightning_attention'" in refusal(cfg)


def test_a_missing_key_is_not_a_not_modelled_error():
    cfg = dict(config("meta-llama--Llama-3.1-8B-Instruct"))
    del cfg["num_attention_heads"]
    with pytest.raises(M.ProfileError) as e:
        M.normalize_config(cfg)
    assert not isinstance(e.value, M.NotModelledError)


def test_without_kv_bytes_the_model_is_still_refused_with_the_way_out():
    msg = refusal(unknown_llama())
    with pytest.raises(PlanError, match="FancyNewForCausalLM.*set kv_cache_memory_bytes"):
        B.plan_by_hand(facts("1x H200"), "fancy/new", unknown_llama(), 16 * GIB, None, msg)


def test_a_gpu_plan_by_hand_uses_the_given_kv_bytes_and_says_it_is_not_verified():
    msg = refusal(unknown_llama())
    p = B.plan_by_hand(facts("1x H200"), "fancy/new", unknown_llama(), 16_060_522_496, 40 * GIB, msg,
                       max_model_len=32768)
    assert p["fits"] and p["verified"] is False
    assert p["not_understood"] == msg
    assert p["warnings"][0] == "not verified by the planner: " + msg
    assert p["vllm_args"]["kv-cache-memory-bytes"] == 40 * GIB
    assert p["vllm_args"]["tensor-parallel-size"] == 1 and p["vllm_args"]["max-model-len"] == 32768
    assert "gpu-memory-utilization" not in p["vllm_args"]  # vLLM ignores it once the KV bytes are given
    assert p["replicas"] == [[0]] and p["weights_bytes_per_gpu"] == 16_060_522_496
    assert p["kv_cache_tokens"] is None and p["max_concurrency"] is None
    assert any("not verified" in r for r in p["reasons"]) and p["summary"]["fits"] == "yes (not verified)"


def test_weights_that_do_not_fit_one_gpu_take_the_smallest_tp_group_that_holds_them():
    # Mixtral-size weights (93 GB) and 12 GiB of KV per GPU on 8x L40S (48 GB): 4 GPUs per replica, 2 replicas.
    cfg = dict(config("mistralai--Mixtral-8x7B-v0.1"), architectures=["FancyMoeForCausalLM"])
    p = B.plan_by_hand(facts("8x L40S"), "fancy/moe", cfg, 93_405_585_408, 12 * GIB, refusal(cfg),
                       max_model_len=8192)
    assert p["fits"] and p["tensor_parallel_size"] == 4 and p["replicas"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert p["vllm_args"]["tensor-parallel-size"] == 4
    assert any("not checked against the model's heads" in w for w in p["warnings"])


def test_too_much_kv_for_the_gpus_does_not_fit_and_says_what_to_lower():
    msg = refusal(unknown_llama())
    p = B.plan_by_hand(facts("1x L40S"), "fancy/new", unknown_llama(), 16_060_522_496, 40 * GIB, msg,
                       max_model_len=8192)
    assert p["fits"] is False
    assert any(r.startswith("Does not fit") and "kv_cache_memory_bytes" in r for r in p["reasons"])


def test_the_context_defaults_to_the_model_and_is_bounded_by_it():
    msg = refusal(unknown_llama())
    p = B.plan_by_hand(None, "fancy/new", unknown_llama(), 10 ** 9, 64 << 20, msg, accelerator="cpu")
    assert p["max_model_len"] == 131072 and p["replicas"] == [[]] and "tensor-parallel-size" not in p["vllm_args"]
    with pytest.raises(PlanError, match="exceeds the model's context of 131072"):
        B.plan_by_hand(None, "fancy/new", unknown_llama(), 10 ** 9, 64 << 20, msg, accelerator="cpu",
                       max_model_len=200000)


def test_weights_are_needed():
    with pytest.raises(PlanError, match="give weights_bytes"):
        B.plan_by_hand(None, "fancy/new", unknown_llama(), None, 64 << 20, "x", accelerator="cpu")


def test_only_the_engine_options_every_model_has_can_be_planned():
    msg = refusal(unknown_llama())
    p = B.plan_by_hand(None, "fancy/new", unknown_llama(), 10 ** 9, 64 << 20, msg, accelerator="cpu",
                       features={"prefix_caching": False, "enforce_eager": True})
    assert p["vllm_args"]["enable-prefix-caching"] is False and p["vllm_args"]["enforce-eager"] is True
    plain = B.plan_by_hand(None, "fancy/new", unknown_llama(), 10 ** 9, 64 << 20, msg, accelerator="cpu")
    assert "enable-prefix-caching" not in plain["vllm_args"]  # vLLM's own default for the architecture
    with pytest.raises(PlanError, match="feature mtp cannot be planned for fancy/new"):
        B.plan_by_hand(None, "fancy/new", unknown_llama(), 10 ** 9, 64 << 20, msg, accelerator="cpu",
                       features={"mtp": True})


def test_the_boot_check_compares_the_kv_memory_alone():
    msg = refusal(unknown_llama())
    p = B.plan_by_hand(None, "fancy/new", unknown_llama(), 10 ** 9, 64 << 20, msg, accelerator="cpu",
                       max_model_len=512)
    boot = {"available_kv_cache_gib": 0.06, "kv_cache_tokens": 1234, "max_concurrency": 2.41,
            "max_concurrency_len": 512, "complete": True}
    cmp_ = compare_with_plan(boot, p)
    assert cmp_["ok"] is True
    assert compare_with_plan(dict(boot, available_kv_cache_gib=0.5), p)["ok"] is False


# ---- the test bed's tiny architectures on the vLLM CPU engine (tests/fixtures/testbed/README.md) ----------------

TESTBED = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "testbed")


@pytest.mark.parametrize("name, tokens, concurrency", [("tiny-llama", 65536, 32.0), ("tiny-gemma3", 41527, 20.28)])
def test_the_cpu_plan_matches_what_vllm_cpu_logged(name, tokens, concurrency):
    """vLLM's CPU engine takes 128-token blocks (16 at 16 would plan 43,408 tokens for the sliding-window model)."""
    from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import planner as P

    with open(os.path.join(TESTBED, name + ".config.json")) as fh:
        cfg = json.load(fh)
    prof = M.profile_from_model_dir(cfg, weights_bytes=3 << 20, name=name)
    p = P.plan(None, prof, accelerator="cpu", kv_cache_memory_bytes=64 << 20, max_model_len=2048)
    assert (p["kv_cache_tokens"], p["max_concurrency"], p["kv_cache_block_size"]) == (tokens, concurrency, 128)
