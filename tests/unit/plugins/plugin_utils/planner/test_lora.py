"""LoRA memory from a model's config.json, checked against peft's own parameter counts."""
import json
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.engine_memory import cudagraph_bytes_per_graph
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.model_profiles import normalize_config
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.lora import (
    DEFAULT_MAX_LORA_RANK,
    lora_cudagraph_bytes,
    lora_memory_bytes,
    lora_slot_elements,
    lora_slot_parts,
    planned_lora,
)

CONFIGS = os.path.join(os.path.dirname(__file__), *[".."] * 4, "fixtures", "model_configs")


def _config(name):
    with open(os.path.join(CONFIGS, name)) as handle:
        return json.load(handle)


def test_one_slot_of_llama_3_1_8b_at_rank_16_is_peft_s_all_linear_adapter():
    # peft's "trainable params: 41,943,040" for Llama-3(.1)-8B, r=16 on q,k,v,o,gate,up,down: the same matrices
    # vLLM allocates per slot (the published config.json, tests/fixtures/model_configs/SOURCES.md)
    config = _config("meta-llama--Llama-3.1-8B-Instruct.json")
    assert lora_slot_elements(config, 16) == 41943040
    assert lora_memory_bytes(config, max_loras=4, max_lora_rank=16) == 4 * 41943040 * 2   # bf16: 320 MiB


def test_the_attention_part_is_what_peft_counted_for_the_test_beds_adapter():
    # 41-tiny-pooling-model.sh: peft's LoRA of rank 8 on q,k,v,o of the tiny Llama (make_tiny_arch.py llama:
    # hidden 128, 4 layers, 4 heads of 32, 2 KV heads) reported 28672 trainable parameters
    tiny_llama = {"hidden_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "head_dim": 32, "intermediate_size": 256}
    assert lora_slot_parts(tiny_llama, 8)["attention"] == 28672


def test_tensor_parallel_splits_and_moe_experts_count():
    config = _config("meta-llama--Llama-3.1-8B-Instruct.json")
    assert lora_slot_elements(config, 16, tp=2) < lora_slot_elements(config, 16)
    moe = _config("Qwen--Qwen1.5-MoE-A2.7B.json")   # 60 experts + a shared expert
    parts = lora_slot_parts(moe, 8)
    # per layer: attention 131072; experts 60 x 82944 + shared 184320 (rank 8, hidden 2048, expert width 1408)
    assert parts == {"attention": 24 * 131072, "mlp": 24 * (60 * 82944 + 184320)}


def test_bad_inputs_are_refused():
    with pytest.raises(PlanError, match="max_loras and max_lora_rank must be at least 1"):
        lora_memory_bytes(_config("Qwen--Qwen3-1.7B.json"), 0)
    with pytest.raises(PlanError, match="needs hidden_size"):
        lora_slot_elements({"hidden_size": 8}, 8)


def test_adapters_are_planned_at_their_declared_rank_or_vllms_default():
    assert planned_lora([]) is None
    assert planned_lora([{"name": "a"}, {"name": "b", "rank": 64}]) == {"max_loras": 2, "max_lora_rank": 64}
    assert planned_lora([{"name": "a"}]) == {"max_loras": 1, "max_lora_rank": DEFAULT_MAX_LORA_RANK}


def test_active_lora_doubles_the_cuda_graphs_vllm_captures():
    # Llama-3.1-8B at 256 sequences and 8192 batched tokens: 51 PIECEWISE + 35 FULL graphs, each captured again for
    # active LoRA (the H100 capture logged PIECEWISE=102, FULL=70); none with --enforce-eager
    arch = normalize_config(_config("meta-llama--Llama-3.1-8B-Instruct.json"), "meta-llama/Llama-3.1-8B-Instruct")
    plan = {"max_num_seqs": 256, "vllm_args": {"max-num-batched-tokens": 8192}}
    assert lora_cudagraph_bytes(arch, plan) == (51 + 35) * cudagraph_bytes_per_graph(arch)
    assert lora_cudagraph_bytes(arch, dict(plan, vllm_args={"enforce-eager": True})) == 0
