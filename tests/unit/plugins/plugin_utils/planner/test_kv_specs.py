"""kv_specs / model_arch: vLLM's per-layer KV arithmetic for the layer kinds the GPU captures do not cover
(Mamba2, chunked local attention, short conv, TP replication) and the refusals."""
import copy
import json
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import kv_specs as K
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import model_profiles as M
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import planner as P
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import capacity as CAP

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))


def config(name):
    with open(os.path.join(ROOT, "tests", "fixtures", "model_configs", name + ".json")) as fh:
        return json.load(fh)


# NVIDIA-Nemotron-Nano-9B-v2's published sizes (hidden 4480, 56 layers: 4 attention, 27 Mamba2, the rest MLP).
NEMOTRON_NANO_9B = {
    "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hidden_size": 4480,
    "num_hidden_layers": 56, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
    "vocab_size": 131072, "max_position_embeddings": 131072, "torch_dtype": "bfloat16", "intermediate_size": 15680,
    "hybrid_override_pattern": "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-",
    "ssm_state_size": 128, "conv_kernel": 4, "n_groups": 8, "mamba_num_heads": 128, "mamba_head_dim": 80,
}


def test_mamba2_hybrid_state_page_and_block_follow_vllm():
    a = M.normalize_config(NEMOTRON_NANO_9B)
    assert a["layer_counts"] == {"mamba2": 27, "full": 4}
    # conv (128 x 80 + 2 x 8 x 128) x 3 x 2 B + SSM 128 x 80 x 128 x 4 B (Nemotron-H keeps fp32 SSM state)
    assert K.state_page_bytes(a) == 12288 * 3 * 2 + 128 * 80 * 128 * 4 == 5316608
    lay = CAP.kv_layout(a, 1)
    assert lay.block_size == 1312  # 16 x cdiv(5316608, 16 x 4096)
    assert (lay.group_size, lay.attention_groups, lay.state_groups) == (4, 1, 7)
    assert CAP.blocks_per_request(lay, 131072) == 100 + 7 * 1  # ceil(131072 / 1312) + one state block per group
    # prefix caching: Nemotron-H supports Mamba prefix caching, so vLLM runs mamba cache mode 'all': the block is a
    # multiple of the Mamba chunk size (this trimmed config has no chunk_size: vLLM's default 2048) and every group
    # holds one state block per block of the request
    with_pc = CAP.kv_layout(a, 1, prefix_caching=True)
    assert with_pc.mamba_cache_mode == "all" and with_pc.block_size == 2048
    assert CAP.blocks_per_request(with_pc, 131072) == 64 + 7 * 64
    with_chunk = CAP.kv_layout(M.normalize_config(dict(NEMOTRON_NANO_9B, chunk_size=128)), 1, prefix_caching=True)
    assert with_chunk.block_size == 128 * 11  # 128 x cdiv(cdiv(5316608, 4096), 128)
    # from 0.32.0 on vLLM runs 'align' for every hybrid: two state blocks per group, the plain block
    newer = CAP.kv_layout(a, 1, prefix_caching=True, vllm_version="0.32.0")
    assert newer.mamba_cache_mode == "align" and newer.block_size == 1312
    assert CAP.blocks_per_request(newer, 131072) == 100 + 7 * 2


def test_short_conv_prefix_caching_runs_align_mode():
    # LFM2 does not implement vLLM's SupportsMambaPrefixCaching: 'align', two state blocks per group
    lay = CAP.kv_layout(M.normalize_config(config("LiquidAI--LFM2-700M")), 1, prefix_caching=True)
    assert lay.mamba_cache_mode == "align" and lay.block_size == 16
    assert CAP.blocks_per_request(lay, 32768) == 2048 + lay.state_groups * 2


def test_kv_heads_are_replicated_past_tp_and_mla_is_never_divided():
    gemma = M.normalize_config(config("google--gemma-3-1b-it"))
    assert K.attention_page_per_token(gemma, 1, 2) == K.attention_page_per_token(gemma, 4, 2) == 2 * 256 * 2
    llama = M.normalize_config(config("meta-llama--Llama-3.1-8B-Instruct"))
    assert K.attention_page_per_token(llama, 2, 2) == K.attention_page_per_token(llama, 1, 2) // 2
    ds = M.normalize_config(config("deepseek-ai--DeepSeek-V2-Lite"))
    assert K.attention_page_per_token(ds, 1, 2) == K.attention_page_per_token(ds, 8, 2) == 576 * 2
    assert K.attention_page_per_token(ds, 1, 1) == 576  # fp8 MLA cache: one byte per latent element


def test_chunked_local_attention_holds_its_chunk_plus_one_batch():
    cfg = copy.deepcopy(config("meta-llama--Llama-3.1-8B-Instruct"))
    cfg.update(attention_chunk_size=8192, no_rope_layers=[0 if (i + 1) % 4 == 0 else 1 for i in range(32)])
    a = M.normalize_config(cfg)
    assert a["layer_counts"] == {"chunked": 24, "full": 8} and a["windows"] == {"chunked": 8192}
    lay = K.build_layout(a, 1, hybrid_manager=True)
    assert lay.group_size == 8 and lay.kind_groups == {"chunked": 3, "full": 1}
    # full: 131072 / 16; chunked: cdiv(min(8192 + 8192, 131072), 16) per group
    assert CAP.blocks_per_request(lay, 131072, 8192) == 8192 + 3 * 1024


def test_chunked_local_attention_is_full_attention_by_default():
    # vLLM turns its hybrid KV cache manager off for chunked local attention unless
    # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1: every layer then keeps the whole context
    cfg = copy.deepcopy(config("meta-llama--Llama-3.1-8B-Instruct"))
    cfg.update(attention_chunk_size=8192, no_rope_layers=[0 if (i + 1) % 4 == 0 else 1 for i in range(32)])
    a = M.normalize_config(cfg)
    lay = CAP.kv_layout(a, 1)
    assert lay.kind_groups == {"full": 1} and lay.kind_layers == {"full": 32}
    assert CAP.blocks_per_request(lay, 131072, 8192) == 8192
    # memory per request: 32 layers x 8192 blocks by default, 8 layers x (8192 + 3 x 1024) with the hybrid manager
    assert CAP.blocks_per_request(lay, 131072, 8192) * 32 > CAP.blocks_per_request(
        K.build_layout(a, 1, hybrid_manager=True), 131072, 8192) * 8


def test_without_the_hybrid_manager_only_mixed_windows_become_full():
    assert K.unify_without_hybrid_manager({"chunked": 4}) == {"chunked": 4}
    assert K.unify_without_hybrid_manager({"sliding": 5, "full": 1}) == {"full": 6}
    assert K.unify_without_hybrid_manager({"full": 6, "short_conv": 10}) == {"full": 6, "short_conv": 10}


def test_short_conv_state_is_hidden_by_cache_length():
    a = {"layer_counts": {"short_conv": 10, "full": 6}, "short_conv": {"conv_dim": 1024, "l_cache": 3},
         "dtype_bytes": 2}
    assert K.state_page_bytes(a) == 1024 * 2 * 2


def test_grouping_matches_vllms_uniform_page_rule():
    assert K.group_layers({"full": 10, "gdn": 30}) == (10, {"full": 1, "gdn": 3}, 0)
    assert K.group_layers({"full": 12, "sliding": 12}) == (12, {"full": 1, "sliding": 1}, 0)
    assert K.group_layers({"full": 4, "sliding": 22}) == (4, {"full": 1, "sliding": 6}, 2)
    assert K.group_layers({"full": 10, "gdn": 14}) == (14, {"full": 1, "gdn": 1}, 4)


def test_an_unknown_architecture_is_refused_with_the_way_out():
    cfg = dict(config("meta-llama--Llama-3.1-8B-Instruct"), architectures=["FancyNewForCausalLM"])
    with pytest.raises(M.ProfileError, match="FancyNewForCausalLM is not one the planner models.*kv-cache-memory-bytes"):
        M.normalize_config(cfg, "FancyNew/config.json")


def test_an_unknown_layer_type_is_refused_naming_it():
    cfg = copy.deepcopy(config("openai--gpt-oss-20b"))
    cfg["layer_types"][3] = "lightning_attention"
    with pytest.raises(M.ProfileError, match="layer type 'lightning_attention'.*kv-cache-memory-bytes"):
        M.normalize_config(cfg)
    nem = dict(NEMOTRON_NANO_9B, hybrid_override_pattern="M*X" + "-" * 53)
    with pytest.raises(M.ProfileError, match="block type.*X"):
        M.normalize_config(nem)


def test_a_repo_without_a_profile_plans_with_generic_features():
    p = M.profile_from_model_dir(config("google--gemma-3-1b-it"), name="google/gemma-3-1b-it", count_weights=True)
    assert p["weights_source"] == "counted from config.json"
    assert set(p["serving"]["features"]) == {"prefix_caching", "enforce_eager"}
    assert p["serving"]["min_vllm_version"] == "0.8.0"
    facts = {"gpus": [{"index": 0, "name": "NVIDIA H200", "memory_total_mib": 143771, "memory_reserved_mib": 616}]}
    plan = P.plan(facts, p, max_model_len=32768, features={"prefix_caching": False})
    assert plan["fits"] and plan["vllm_args"]["enable-prefix-caching"] is False
    assert plan["kv_cache_layout"]["kind_groups"] == {"sliding": 6, "full": 1}


def test_a_chunked_plan_says_why_every_layer_keeps_the_whole_context():
    from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.gpu_catalogue import annotate_gpu_facts, load_catalogue
    from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.topology import gpu_facts_from_spec
    cat = load_catalogue()
    cfg = copy.deepcopy(config("meta-llama--Llama-3.1-8B-Instruct"))
    cfg.update(attention_chunk_size=8192, no_rope_layers=[0 if (i + 1) % 4 == 0 else 1 for i in range(32)])
    r = P.plan(annotate_gpu_facts(gpu_facts_from_spec("1x H200", cat), cat),
               M.profile_from_model_dir(cfg, weights_bytes=16 * 10 ** 9, name="chunked-llama"), max_model_len=32768)
    assert r["fits"]
    assert any("VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE" in x and "24 windowed layers" in x
               for x in r["reasons"])


def test_lfm2_v1_names_its_attention_layers_in_full_attn_idxs():
    a = M.normalize_config(config("LiquidAI--LFM2-700M"))
    assert a["layer_counts"] == {"short_conv": 10, "full": 6}
    assert a["short_conv"] == {"conv_dim": 1536, "l_cache": 3}
    # block_ff_dim 10240, auto-adjusted as vLLM's Lfm2MLP does: int(2 * 10240 / 3) = 6826, rounded up to 256
    assert a["intermediate_size"] == 6912 and a["tie_word_embeddings"] is True


def test_an_lfm2_config_without_its_layer_list_is_refused():
    cfg = {k: v for k, v in config("LiquidAI--LFM2-700M").items() if k != "full_attn_idxs"}
    with pytest.raises(M.NotModelledError, match="full_attn_idxs"):
        M.normalize_config(cfg)


def test_the_layout_fact_keeps_its_public_keys():
    lay = CAP.kv_layout(M.normalize_config(config("google--gemma-3-1b-it")), 1)
    assert list(lay.to_dict()) == [
        "attention_page_bytes_per_token", "block_size", "page_bytes", "group_size", "kind_groups", "kind_layers",
        "windows", "windowed_as_full", "attention_layers", "state_layers", "attention_groups", "state_groups",
        "padding_layers", "num_speculative_tokens", "mamba_cache_mode", "state_page_bytes", "state_padding_pct",
        "state_blocks_per_request"]
    assert lay.to_dict()["kind_groups"] == {"sliding": 6, "full": 1}
    assert set(lay.specs) == {"sliding", "full"} and lay.specs["sliding"].block_size == lay.block_size
