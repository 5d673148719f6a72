"""The engine arguments a deployment adds to the plan's flags (vllm_server_args_extra, vllm_server_env), read as plan
inputs (plugin_utils.planner.engine_args): the plan is made for the engine as it will run."""
import json
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import model_profiles as M
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import planner as P
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.gpu_catalogue import annotate_gpu_facts, load_catalogue
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.engine_args import engine_overrides
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.topology import gpu_facts_from_spec

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "model_configs")
FEATURES = ("prefix_caching", "enforce_eager")


def test_memory_flags_become_plan_inputs_in_the_types_the_planner_takes():
    inputs, features, hybrid, notes = engine_overrides(
        {"kv_cache_dtype": "fp8", "--max-num-batched-tokens": "4096", "gpu-memory-utilization": "0.85",
         "max-num-seqs": 64, "served-model-name": "x", "enable-chunked-prefill": True}, {}, FEATURES)
    assert inputs == {"kv_cache_dtype": "fp8", "max_num_batched_tokens": 4096, "gpu_memory_utilization": 0.85,
                      "max_num_seqs": 64}
    assert features == {} and hybrid is None
    assert "--kv-cache-dtype fp8" in notes and len(notes) == 4


def test_feature_flags_are_read_only_for_features_the_model_has():
    _i, features, _h, notes = engine_overrides({"no-enable-prefix-caching": True, "enforce-eager": "true"}, {},
                                               FEATURES)
    assert features == {"prefix_caching": False, "enforce_eager": True}
    assert engine_overrides({"enforce-eager": False}, {}, FEATURES)[1] == {"enforce_eager": False}
    assert engine_overrides({"enforce-eager": True}, {}, ())[1] == {}


def test_the_hybrid_manager_follows_the_flag_then_the_environment():
    assert engine_overrides({}, {"VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE": "1"})[2] is True
    assert engine_overrides({"disable-hybrid-kv-cache-manager": True},
                            {"VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE": "1"})[2] is False
    assert engine_overrides({}, {"VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE": "0"})[2] is None


def test_a_value_that_is_not_a_number_names_the_variable():
    with pytest.raises(PlanError, match=r"vllm_server_args_extra: --max-model-len must be a whole number, got 'long'"):
        engine_overrides({"max-model-len": "long"}, var="vllm_server_args_extra")


def test_without_the_hybrid_manager_a_sliding_window_model_keeps_the_whole_context():
    cat = load_catalogue()
    h200 = annotate_gpu_facts(gpu_facts_from_spec("1x H200", cat), cat)
    with open(os.path.join(CONFIGS, "google--gemma-3-1b-it.json")) as fh:
        profile = M.profile_from_model_dir(json.load(fh), weights_bytes=2 * 10 ** 9, name="google/gemma-3-1b-it")
    hybrid = P.plan(h200, profile, max_model_len=32768)
    unified = P.plan(h200, profile, max_model_len=32768, hybrid_manager=False)
    # 26 layers, 22 of them sliding (window 512): with the manager a request holds 2048 blocks in the full group and
    # cdiv(511 + 8192, 16) + 1 = 545 in each of 6 sliding groups of 4 layers; without it 2048 in all 26 layers
    assert unified["kv_cache_layout"]["kind_layers"] == {"full": 26}
    assert round(hybrid["max_concurrency"] / unified["max_concurrency"], 2) == round(26 * 2048 / (4 * (2048 + 6 * 545)), 2)
