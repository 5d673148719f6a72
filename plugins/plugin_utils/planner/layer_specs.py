# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""vLLM's KV cache specs: one frozen dataclass per layer kind, with its page and the blocks a request holds.

Read from vLLM 0.22.0 (0.28.0 computes the same, docs/PLANNER.md "Versions"): ``vllm/v1/kv_cache_interface.py``
(``FullAttentionSpec``, ``SlidingWindowSpec``, ``ChunkedLocalAttentionSpec``, ``MLAAttentionSpec``, ``MambaSpec``:
their ``page_size_bytes`` and ``max_memory_usage_bytes``) and ``vllm/model_executor/layers/mamba/mamba_utils.py``
(``MambaStateShapeCalculator``, the state shapes).  ``LAYER_SPECS`` maps each kind model_arch.py emits to its
class: a new layer kind is one class here (how it reads the arch, its page, the blocks a request holds) and its
test.  kv_specs.py unifies the kinds of a model into its layout.  Pure, no I/O.
"""

from __future__ import annotations

import dataclasses

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import KVSpecError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.units import cdiv

# The vLLM CPU engine's block size when the user sets none (vllm/platforms/cpu.py, 0.32.0: 128; 16 for the reference
# CPU MLA backend). Full-attention-only models hold the same tokens at any block size; sliding-window layers and a
# max_model_len that is no multiple of it do not (tiny Gemma 3 on the test bed: 41,527 tokens at 128, 43,408 at 16).
CPU_BLOCK_SIZE = 128
CPU_MLA_BLOCK_SIZE = 16


@dataclasses.dataclass(frozen=True, kw_only=True)
class LayerSpec:
    """One layer of a kind on one GPU of a TP group (vLLM's ``KVCacheSpec``).  Class attributes: ``kind`` (the
    model_arch.py name), ``title`` (for the plan's reasons), ``holds_state`` (a state layer: vLLM's MambaSpec),
    ``windowed`` (holds a window, not the whole context), ``hybrid_manager_default`` (vLLM runs its hybrid KV cache
    manager for a model with such layers), ``cpu_block_size`` (the CPU engine's default block)."""

    kind = ""
    title = ""
    holds_state = False
    windowed = False
    hybrid_manager_default = True
    cpu_block_size = CPU_BLOCK_SIZE
    block_size: int = 1

    @classmethod
    def from_arch(cls, arch, tp, kv_dtype_bytes, spec_tokens=0):
        """The spec at block size 1 for a normalized arch (model_profiles.normalize_config) on one GPU of TP tp."""
        raise NotImplementedError

    @property
    def page_size_bytes(self):
        """Bytes one block of ``block_size`` tokens takes (vLLM's ``page_size_bytes``, unpadded)."""
        raise NotImplementedError

    def blocks_per_request(self, max_model_len, batched_tokens):
        """Blocks one request of max_model_len tokens holds (vLLM's ``max_memory_usage_bytes`` / page)."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True, kw_only=True)
class FullAttentionSpec(LayerSpec):
    """``FullAttentionSpec``: page = block x 2 (K, V) x max(1, KV heads // t) x head_dim x KV dtype bytes; a request
    holds cdiv(max_model_len, block) blocks."""

    kind = "full"
    title = "full-attention"
    num_kv_heads: int
    head_size: int
    dtype_bytes: int

    @classmethod
    def from_arch(cls, arch, tp, kv_dtype_bytes, spec_tokens=0):
        # ModelConfig.get_num_kv_heads: KV heads / TP, at least 1 (replicated past the KV head count)
        return cls(num_kv_heads=max(1, arch["num_kv_heads"] // tp), head_size=arch["head_dim"],
                   dtype_bytes=kv_dtype_bytes, **cls._window_of(arch))

    @classmethod
    def _window_of(cls, arch):
        return {}

    @property
    def page_size_bytes(self):
        return 2 * self.block_size * self.num_kv_heads * self.head_size * self.dtype_bytes

    def blocks_per_request(self, max_model_len, batched_tokens):
        return cdiv(max_model_len, self.block_size)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _WindowedSpec(FullAttentionSpec):
    """An attention layer that holds a window (``window``: arch["windows"][kind]) plus one batch."""

    windowed = True
    window: int

    @classmethod
    def _window_of(cls, arch):
        return {"window": int((arch.get("windows") or {})[cls.kind])}

    def blocks_formula(self):
        """The blocks a request holds, as the plan's reasons write it."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True, kw_only=True)
class SlidingWindowSpec(_WindowedSpec):
    """``SlidingWindowSpec``: the full-attention page; a request holds
    cdiv(min(window - 1 + max_num_batched_tokens, max_model_len), block) + 1 (the window may start mid-block)."""

    kind = "sliding"
    title = "sliding-window"

    def blocks_per_request(self, max_model_len, batched_tokens):
        return cdiv(min(self.window - 1 + batched_tokens, max_model_len), self.block_size) + 1

    def blocks_formula(self):
        return "cdiv(min(window - 1 + max_num_batched_tokens, max_model_len), %d) + 1" % self.block_size


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChunkedLocalAttentionSpec(_WindowedSpec):
    """``ChunkedLocalAttentionSpec`` (Llama 4): the full-attention page; a request holds
    cdiv(min(chunk + max_num_batched_tokens, max_model_len), block).  vLLM (vllm/config/vllm.py, 0.22.0 and 0.32.0)
    turns its hybrid KV cache manager off for such models (a latency regression) unless
    VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1."""

    kind = "chunked"
    title = "chunked local-attention"
    hybrid_manager_default = False

    def blocks_per_request(self, max_model_len, batched_tokens):
        return cdiv(min(self.window + batched_tokens, max_model_len), self.block_size)

    def blocks_formula(self):
        return "cdiv(min(chunk + max_num_batched_tokens, max_model_len), %d)" % self.block_size


@dataclasses.dataclass(frozen=True, kw_only=True)
class MLAAttentionSpec(FullAttentionSpec):
    """``MLAAttentionSpec``: page = block x (kv_lora_rank + qk_rope_head_dim) x KV dtype bytes: one latent "head",
    no factor 2, the whole latent on every TP rank (not divided by t); a request holds cdiv(max_model_len, block)."""

    kind = "mla"
    title = "MLA"
    cpu_block_size = CPU_MLA_BLOCK_SIZE

    @classmethod
    def from_arch(cls, arch, tp, kv_dtype_bytes, spec_tokens=0):
        mla = arch["mla"]
        return cls(num_kv_heads=1, head_size=mla["kv_lora_rank"] + mla["qk_rope_head_dim"], dtype_bytes=kv_dtype_bytes)

    @property
    def page_size_bytes(self):
        return self.block_size * self.num_kv_heads * self.head_size * self.dtype_bytes


def _tp_share(n, tp, what):
    if n % tp:
        raise KVSpecError("tensor parallel size %d does not divide the %d %s" % (tp, n, what))
    return n // tp


@dataclasses.dataclass(frozen=True, kw_only=True)
class StateSpec(LayerSpec):
    """``MambaSpec``: a state layer's page is its state for one sequence (conv + SSM), whatever the block; a request
    holds 1 block (mamba cache mode 'none'), 2 ('align'), + the speculative tokens; in mode 'all' one per block of
    the request (cdiv(max_model_len, block)) + the speculative tokens.  ``dims_key``: the arch key of its sizes;
    ``conv_channels`` and ``conv_width`` (kernel - 1 + speculative tokens) are one GPU's."""

    holds_state = True
    dims_key = ""
    conv_channels: int
    conv_width: int
    dtype_bytes: int
    mamba_cache_mode: str = "none"
    num_speculative_blocks: int = 0

    @property
    def page_size_bytes(self):
        return self.conv_channels * self.conv_width * self.dtype_bytes + self.ssm_bytes()

    def ssm_bytes(self):
        """The SSM (recurrent) state of one sequence on one GPU; 0 for a conv-only layer."""
        return 0

    def blocks_per_request(self, max_model_len, batched_tokens):
        if self.mamba_cache_mode == "all":
            return cdiv(max_model_len, self.block_size) + self.num_speculative_blocks
        return (2 if self.mamba_cache_mode == "align" else 1) + self.num_speculative_blocks


@dataclasses.dataclass(frozen=True, kw_only=True)
class Mamba2StateSpec(StateSpec):
    """Mamba2 (``MambaStateShapeCalculator.mamba2_state_shape``): conv (intermediate + 2 x groups x state) / t x
    (kernel - 1 + spec tokens) x conv dtype + SSM heads / t x head_dim x state x SSM dtype; groups are replicated up
    to t when t does not divide them (extra_groups_for_head_shards)."""

    kind = "mamba2"
    title = "Mamba2"
    dims_key = "mamba2"
    num_heads: int
    head_dim: int
    state_size: int
    ssm_dtype_bytes: int

    @classmethod
    def from_arch(cls, arch, tp, kv_dtype_bytes, spec_tokens=0):
        m = arch[cls.dims_key]
        groups = m["n_groups"] if m["n_groups"] % tp == 0 else tp
        conv_dim = m["intermediate_size"] + 2 * groups * m["state_size"]
        return cls(conv_channels=_tp_share(conv_dim, tp, "Mamba2 conv channels"),
                   conv_width=m["conv_kernel"] - 1 + spec_tokens, dtype_bytes=arch["dtype_bytes"],
                   num_heads=_tp_share(m["num_heads"], tp, "Mamba2 heads"), head_dim=m["head_dim"],
                   state_size=m["state_size"], ssm_dtype_bytes=m["ssm_dtype_bytes"])

    def ssm_bytes(self):
        return self.num_heads * self.head_dim * self.state_size * self.ssm_dtype_bytes


@dataclasses.dataclass(frozen=True, kw_only=True)
class GDNStateSpec(StateSpec):
    """Gated DeltaNet (``gated_delta_net_state_shape``): conv (2 key_dim + value_dim) / t x (kernel - 1 + spec
    tokens) x dtype + value heads / t x key_head_dim x value_head_dim x SSM dtype."""

    kind = "gdn"
    title = "Gated DeltaNet"
    dims_key = "linear_attention"
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    ssm_dtype_bytes: int

    @classmethod
    def from_arch(cls, arch, tp, kv_dtype_bytes, spec_tokens=0):
        g = arch[cls.dims_key]
        key_dim = g["num_key_heads"] * g["key_head_dim"]
        value_dim = g["num_value_heads"] * g["value_head_dim"]
        return cls(conv_channels=(2 * key_dim + value_dim) // tp, conv_width=g["conv_kernel"] - 1 + spec_tokens,
                   dtype_bytes=arch["dtype_bytes"], num_value_heads=g["num_value_heads"] // tp,
                   key_head_dim=g["key_head_dim"], value_head_dim=g["value_head_dim"],
                   ssm_dtype_bytes=g["ssm_dtype_bytes"])

    def ssm_bytes(self):
        return self.num_value_heads * self.key_head_dim * self.value_head_dim * self.ssm_dtype_bytes


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShortConvStateSpec(StateSpec):
    """Short conv, LFM2 (``short_conv_state_shape``): conv_dim / t x (L_cache - 1 + spec tokens) x dtype."""

    kind = "short_conv"
    title = "short-conv"
    dims_key = "short_conv"

    @classmethod
    def from_arch(cls, arch, tp, kv_dtype_bytes, spec_tokens=0):
        s = arch[cls.dims_key]
        return cls(conv_channels=_tp_share(s["conv_dim"], tp, "short-conv channels"),
                   conv_width=s["l_cache"] - 1 + spec_tokens, dtype_bytes=arch["dtype_bytes"])


LAYER_SPECS = {cls.kind: cls for cls in (FullAttentionSpec, SlidingWindowSpec, ChunkedLocalAttentionSpec,
                                         MLAAttentionSpec, Mamba2StateSpec, GDNStateSpec, ShortConvStateSpec)}
ATTENTION_KINDS = tuple(k for k, cls in LAYER_SPECS.items() if not cls.holds_state)
STATE_KINDS = tuple(k for k, cls in LAYER_SPECS.items() if cls.holds_state)


def attention_layers(counts):
    """Attention layers, all attention kinds together, of a {kind: layers} count."""
    return sum(n for k, n in counts.items() if k in ATTENTION_KINDS)


def state_layers(counts):
    """State layers (Mamba2, GDN, short conv) of a {kind: layers} count."""
    return sum(n for k, n in counts.items() if k in STATE_KINDS)


def attention_kind(arch):
    """The kind of the model's plain attention layers (and of its MTP drafter's): MLA or full."""
    return MLAAttentionSpec.kind if arch.get("mla") else FullAttentionSpec.kind


def attention_kind(arch):
    """The kind of the model's plain attention layers (and of its MTP drafter's): MLA or full."""
    return MLAAttentionSpec.kind if arch.get("mla") else FullAttentionSpec.kind
