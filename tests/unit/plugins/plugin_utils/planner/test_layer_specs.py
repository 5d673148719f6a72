"""layer_specs: each layer kind's page and the blocks a request holds, against hand-computed values of vLLM's
formulas (vllm/v1/kv_cache_interface.py: page_size_bytes, max_memory_usage_bytes / page_size_bytes), and the
registry against the kinds model_arch.py emits."""
import dataclasses
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import layer_specs as L
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import model_arch
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import model_profiles as M
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import KVSpecError

from .test_kv_specs import NEMOTRON_NANO_9B, ROOT, config


def test_full_attention_page_and_blocks():
    llama = M.normalize_config(config("meta-llama--Llama-3.1-8B-Instruct"))  # 8 KV heads x 128, bf16
    spec = L.FullAttentionSpec.from_arch(llama, 2, 2)
    assert spec.page_size_bytes == 2 * 1 * 4 * 128 * 2 == 2048  # block 1: 2 (K, V) x 8 // 2 heads x 128 x 2 B
    big = dataclasses.replace(spec, block_size=16)
    assert big.page_size_bytes == 2 * 16 * 4 * 128 * 2 == 32768
    assert big.blocks_per_request(131072, 8192) == 8192 and big.blocks_per_request(1000, 8192) == 63
    # KV heads are replicated past TP: 8 heads on TP 16 keep one head per GPU
    assert L.FullAttentionSpec.from_arch(llama, 16, 2).num_kv_heads == 1


def test_sliding_window_page_and_blocks():
    gemma = M.normalize_config(config("google--gemma-3-1b-it"))  # 1 KV head x 256, window 512
    spec = dataclasses.replace(L.SlidingWindowSpec.from_arch(gemma, 1, 2), block_size=16)
    assert spec.window == 512 and spec.page_size_bytes == 2 * 16 * 1 * 256 * 2 == 16384
    # cdiv(min(512 - 1 + 8192, 32768), 16) + 1 = cdiv(8703, 16) + 1
    assert spec.blocks_per_request(32768, 8192) == 544 + 1
    assert spec.blocks_per_request(4096, 8192) == 256 + 1  # the whole context is shorter than window + batch


def test_chunked_local_attention_page_and_blocks():
    arch = {"num_kv_heads": 8, "head_dim": 128, "windows": {"chunked": 8192}}
    spec = dataclasses.replace(L.ChunkedLocalAttentionSpec.from_arch(arch, 1, 2), block_size=16)
    assert spec.page_size_bytes == 2 * 16 * 8 * 128 * 2
    assert spec.blocks_per_request(131072, 2048) == (8192 + 2048) // 16 == 640  # no + 1: chunks start on a block
    assert spec.blocks_per_request(4096, 2048) == 256
    assert not spec.hybrid_manager_default


def test_mla_page_is_one_latent_on_every_rank():
    ds = M.normalize_config(config("deepseek-ai--DeepSeek-V2-Lite"))  # kv_lora_rank 512 + rope 64
    for tp in (1, 8):
        spec = dataclasses.replace(L.MLAAttentionSpec.from_arch(ds, tp, 2), block_size=16)
        assert spec.page_size_bytes == 16 * (512 + 64) * 2 == 18432
    assert spec.blocks_per_request(32768, 2048) == 2048
    assert spec.cpu_block_size == 16 and L.FullAttentionSpec.cpu_block_size == 128


def test_mamba2_state_page_and_blocks_per_cache_mode():
    a = M.normalize_config(NEMOTRON_NANO_9B)
    # TP 2, one speculative token: conv (10240 + 2 x 8 x 128) / 2 x (4 - 1 + 1) x 2 B + 128 / 2 x 80 x 128 x 4 B
    spec = L.Mamba2StateSpec.from_arch(a, 2, None, spec_tokens=1)
    assert spec.page_size_bytes == 6144 * 4 * 2 + 64 * 80 * 128 * 4 == 2670592
    assert dataclasses.replace(spec, block_size=4096).page_size_bytes == spec.page_size_bytes  # whatever the block
    blocks = {mode: dataclasses.replace(spec, block_size=2048, mamba_cache_mode=mode, num_speculative_blocks=1)
              .blocks_per_request(131072, 8192) for mode in ("none", "align", "all")}
    assert blocks == {"none": 1 + 1, "align": 2 + 1, "all": 131072 // 2048 + 1}
    # TP 3: the 8 groups are replicated to 3, and 10240 + 2 x 3 x 128 = 11008 channels do not split three ways
    with pytest.raises(KVSpecError, match="does not divide the 11008 Mamba2 conv channels"):
        L.Mamba2StateSpec.from_arch(a, 3, None)


def test_gdn_state_page():
    arch = {"dtype_bytes": 2, "linear_attention": {"num_key_heads": 16, "num_value_heads": 32, "key_head_dim": 128,
                                                   "value_head_dim": 128, "conv_kernel": 4, "ssm_dtype_bytes": 4}}
    # TP 2: conv (2 x 16 x 128 + 32 x 128) / 2 x (4 - 1) x 2 B + 32 / 2 x 128 x 128 x 4 B
    spec = L.GDNStateSpec.from_arch(arch, 2, None)
    assert spec.page_size_bytes == 4096 * 3 * 2 + 16 * 128 * 128 * 4 == 1073152
    assert spec.blocks_per_request(32768, 8192) == 1


def test_short_conv_state_page():
    a = M.normalize_config(config("LiquidAI--LFM2-700M"))  # conv_dim 1536, L_cache 3, bf16
    assert L.ShortConvStateSpec.from_arch(a, 1, None).page_size_bytes == 1536 * 2 * 2 == 6144
    assert L.ShortConvStateSpec.from_arch(a, 2, None, spec_tokens=1).page_size_bytes == 768 * 3 * 2 == 4608


def _kinds_model_arch_emits():
    """Every kind model_arch.py emits: its spelling tables, MLA, and the kinds the fixture configs read as."""
    kinds = set(model_arch._LAYER_TYPE_KIND.values()) | set(model_arch._PATTERN_KIND.values())  # pylint: disable=protected-access
    kinds |= set(model_arch.count_kinds(["full", "sliding"], mla=True, parallel_mamba=True))
    for name in os.listdir(os.path.join(ROOT, "tests", "fixtures", "model_configs")):
        if name.endswith(".json"):
            kinds |= set(M.normalize_config(config(name[:-len(".json")]))["layer_counts"])
    return kinds - {None}


def test_the_registry_covers_every_kind_model_arch_emits():
    assert _kinds_model_arch_emits() == set(L.LAYER_SPECS)
    assert all(cls.kind == kind for kind, cls in L.LAYER_SPECS.items())
    assert set(L.ATTENTION_KINDS) | set(L.STATE_KINDS) == set(L.LAYER_SPECS)


def test_mamba2_groups_are_replicated_when_tp_does_not_divide_them():
    a = M.normalize_config(dict(NEMOTRON_NANO_9B, n_groups=1))
    # TP 2: one group is replicated to 2 (extra_groups_for_head_shards), conv channels (10240 + 2 x 2 x 128) / 2
    spec = L.Mamba2StateSpec.from_arch(a, 2, None)
    assert spec.page_size_bytes == (10240 + 4 * 128) // 2 * 3 * 2 + 64 * 80 * 128 * 4
