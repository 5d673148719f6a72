# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""vLLM's KV cache specs, one frozen dataclass per layer kind, read from a model's config.json; pure, no I/O.

Mirrors vLLM 0.22.0 (the release of the lent H200 machines; 0.28.0 computes the same, docs/PLANNER.md "Versions"):
``vllm/v1/kv_cache_interface.py`` (``FullAttentionSpec``, ``SlidingWindowSpec``, ``ChunkedLocalAttentionSpec``,
``MLAAttentionSpec``, ``MambaSpec``: their ``page_size_bytes`` and ``max_memory_usage_bytes``),
``vllm/v1/core/kv_cache_utils.py`` (``_get_kv_cache_groups_uniform_page_size``, ``get_kv_cache_config_from_groups``,
``get_max_concurrency_for_kv_cache_config``), ``vllm/model_executor/layers/mamba/mamba_utils.py``
(``MambaStateShapeCalculator``) and ``vllm/platforms/interface.py`` / ``vllm/model_executor/models/config.py``
(the hybrid block-size alignment).  ``LAYER_SPECS`` maps each kind model_arch.py emits to its class; a new layer
kind is one class here (its page, the blocks a request holds, how it reads the arch) and its test.

Hybrid models with state layers raise the attention block to the smallest multiple of 16 tokens whose page is at
least the state page, and pad the state page to it.  Attention sinks (gpt-oss) are per-head logits: no KV.
Layers of one kind form groups of equal size (the smaller kind's count, or the larger when it is < 1.5 x the
smaller); every group draws from one pool: num_blocks = available // page // group size.
"""

from __future__ import annotations

import dataclasses
import math

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.vllm_versions import version_at_least
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.units import cdiv

# vLLM's attention kernels take blocks in multiples of 16 tokens (FlashAttention MultipleOf(16); with fp32
# mamba state [16, 32, 64], of which the smallest is taken); CacheConfig.DEFAULT_BLOCK_SIZE is 16.
DEFAULT_BLOCK_SIZE = 16
KERNEL_BLOCK_ALIGNMENT = 16
# The vLLM CPU engine's block size when the user sets none (vllm/platforms/cpu.py, 0.32.0: 128; 16 for the reference
# CPU MLA backend). Full-attention-only models hold the same tokens at any block size; sliding-window layers and a
# max_model_len that is no multiple of it do not (tiny Gemma 3 on the test bed: 41,527 tokens at 128, 43,408 at 16).
CPU_BLOCK_SIZE = 128
CPU_MLA_BLOCK_SIZE = 16
GROUP_SIZE_SLACK = 1.5
# The first release whose MambaModelConfig always defaults to 'align' (0.22.0 still picks 'all' where supported).
ALIGN_ONLY_SINCE = "0.32.0"


class KVSpecError(ValueError):
    """A config the KV model does not understand; the message names what and the way out."""


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
    """Attention layers (any attention kind) in {kind: layers}."""
    return sum(n for k, n in counts.items() if k in ATTENTION_KINDS)


def state_layers(counts):
    """State layers (Mamba2, GDN, short conv) in {kind: layers}."""
    return sum(n for k, n in counts.items() if k in STATE_KINDS)


def attention_kind(arch):
    """The kind of the model's plain attention layers (and of its MTP drafter's): MLA or full."""
    return MLAAttentionSpec.kind if arch.get("mla") else FullAttentionSpec.kind


def attention_page_per_token(arch, tp, kv_dtype_bytes):
    """Bytes one token of one attention layer takes on one GPU (vLLM's page_size_bytes at block_size 1)."""
    return LAYER_SPECS[attention_kind(arch)].from_arch(arch, tp, kv_dtype_bytes).page_size_bytes


def _state_specs(arch, tp=1, spec_tokens=0):
    """{kind: spec at block 1} of the state kinds the model has layers and sizes of."""
    counts = arch["layer_counts"]
    return {k: LAYER_SPECS[k].from_arch(arch, tp, None, spec_tokens) for k in STATE_KINDS
            if arch.get(LAYER_SPECS[k].dims_key) and counts.get(k)}


def state_page_bytes(arch, tp=1, spec_tokens=0):
    """The largest state page of the model's state layers (vLLM unifies them); 0 without state layers."""
    return max([0] + [s.page_size_bytes for s in _state_specs(arch, tp, spec_tokens).values()])


def block_size_for(page_1, state_page, block_size=None, mamba_chunk=None):
    """vLLM's attention block size: 16 (or the user's --block-size) for attention-only models; with state layers
    the smallest multiple of 16 tokens whose attention page holds the state page; in mamba cache mode 'all'
    (``mamba_chunk`` given) a multiple of lcm(the Mamba chunk size, 16) instead (platforms/interface.py,
    _align_hybrid_block_size)."""
    if not state_page:
        return block_size or DEFAULT_BLOCK_SIZE
    align = max(KERNEL_BLOCK_ALIGNMENT, DEFAULT_BLOCK_SIZE)
    if mamba_chunk:
        chunk = align * mamba_chunk // math.gcd(align, mamba_chunk)
        return max(block_size or DEFAULT_BLOCK_SIZE, chunk * cdiv(cdiv(state_page, page_1), chunk))
    return max(block_size or DEFAULT_BLOCK_SIZE, align * cdiv(state_page, align * page_1))


def mamba_cache_mode(arch, prefix_caching, vllm_version=None):
    """vLLM's mamba cache mode: 'none' without prefix caching; with it 'all' (a state block per block of the
    sequence) for the model classes that support Mamba prefix caching, else 'align' (MambaModelConfig of 0.22.0);
    'align' for every model from 0.32.0 on.  An unknown version is planned as 0.22.0, the GPU-proven release."""
    if not prefix_caching:
        return "none"
    if vllm_version and version_at_least(vllm_version, ALIGN_ONLY_SINCE):
        return "align"
    return "all" if arch.get("mamba_prefix_caching_all") else "align"


def group_layers(counts):
    """{kind: layers} -> (group size, {kind: groups}, padding layers): vLLM's uniform-page grouping."""
    counts = {k: n for k, n in counts.items() if n}
    if len(counts) == 1:
        (kind, n), = counts.items()
        return n, {kind: 1}, 0
    lo, hi = min(counts.values()), max(counts.values())
    size = hi if hi < lo * GROUP_SIZE_SLACK else lo
    groups = {k: cdiv(n, size) for k, n in counts.items()}
    return size, groups, sum(g * size for g in groups.values()) - sum(counts.values())


def kind_counts(arch, mtp_layers=0):
    """Layer counts by KV kind; MTP drafter layers join the full-attention (or MLA) kind."""
    counts = dict(arch["layer_counts"])
    if mtp_layers:
        key = attention_kind(arch)
        counts[key] = counts.get(key, 0) + mtp_layers
    return counts


def hybrid_manager_default(arch):
    """Whether vLLM runs its hybrid KV cache manager for this model by default: not when a kind of its layers says
    no (chunked local attention, ChunkedLocalAttentionSpec)."""
    return all(LAYER_SPECS[k].hybrid_manager_default for k, n in arch["layer_counts"].items() if n)


def _windowed_layers(counts):
    return sum(n for k, n in counts.items() if LAYER_SPECS[k].windowed)


def unify_without_hybrid_manager(counts):
    """Layer counts as vLLM's unify_hybrid_kv_cache_specs leaves them when the hybrid manager is off: next to
    full-attention layers, windowed layers (sliding window, chunked) become full attention (they keep the whole
    context); a model of windowed layers only keeps its kind."""
    full = FullAttentionSpec.kind
    if not (counts.get(full) and _windowed_layers(counts)):
        return counts
    out = {k: n for k, n in counts.items() if not LAYER_SPECS[k].windowed}
    out[full] = counts[full] + _windowed_layers(counts)
    return out


@dataclasses.dataclass(frozen=True)
class KVLayout:  # pylint: disable=too-many-instance-attributes
    """The KV cache layout of one GPU of a TP group (build_layout).  Its fields, in this order, are the plan's
    ``kv_cache_layout`` keys (to_dict); ``specs`` holds each kind's LayerSpec at ``block_size``."""

    attention_page_bytes_per_token: int
    block_size: int
    page_bytes: int
    group_size: int
    kind_groups: dict
    kind_layers: dict
    windows: dict
    windowed_as_full: int
    attention_layers: int
    state_layers: int
    attention_groups: int
    state_groups: int
    padding_layers: int
    num_speculative_tokens: int
    mamba_cache_mode: str | None
    state_page_bytes: int
    state_padding_pct: float
    # per state group; in mode 'all' one per block of the request (state_blocks)
    state_blocks_per_request: int
    specs: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def to_dict(self):
        """The plan's ``kv_cache_layout`` fact (every field but ``specs``)."""
        out = {}
        for f in dataclasses.fields(self):
            if f.name != "specs":
                value = getattr(self, f.name)
                out[f.name] = dict(value) if isinstance(value, dict) else value
        return out

    def blocks_per_request(self, max_model_len, batched_tokens=None):
        """Blocks one request of max_model_len tokens takes from the shared pool, all groups together; windowed
        groups hold at most their window plus one batch of ``batched_tokens`` (default max_model_len)."""
        batched = batched_tokens or max_model_len
        return sum(groups * self.specs[kind].blocks_per_request(max_model_len, batched)
                   for kind, groups in self.kind_groups.items())

    def smallest_request_blocks(self, batched_tokens=None):
        """Blocks a one-token sequence holds (every group's first block, state groups their state blocks)."""
        return self.blocks_per_request(1, batched_tokens)

    def state_blocks(self, max_model_len):
        """State blocks one request holds in each state group (MambaSpec.max_memory_usage_bytes / page)."""
        state = [s for s in self.specs.values() if s.holds_state]
        if not state:
            return self.state_blocks_per_request
        return state[0].blocks_per_request(max_model_len, max_model_len)


def _layout_specs(arch, counts, tp, kvb, block, spec_tokens, mode):
    """{kind: LayerSpec at the layout's block size} for every kind of ``counts``."""
    out = {}
    for kind in counts:
        spec = LAYER_SPECS[kind].from_arch(arch, tp, kvb, spec_tokens)
        if spec.holds_state:
            spec = dataclasses.replace(spec, mamba_cache_mode=mode, num_speculative_blocks=spec_tokens)
        out[kind] = dataclasses.replace(spec, block_size=block)
    return out


def build_layout(arch, tp=1, kv_dtype_bytes=None, mtp_layers=0, spec_tokens=0, prefix_caching=False,
                 block_size=None, hybrid_manager=None, vllm_version=None):
    """The KV cache layout of one GPU of a TP group (a KVLayout).  ``block_size``: "cpu" for the CPU engine's.
    ``hybrid_manager``: vLLM's hybrid KV cache manager on or off (None: vLLM's default, hybrid_manager_default)."""
    kvb = kv_dtype_bytes or arch["dtype_bytes"]
    if block_size == "cpu":
        block_size = LAYER_SPECS[attention_kind(arch)].cpu_block_size
    counts = kind_counts(arch, mtp_layers)
    windowed = _windowed_layers(counts)
    if not (hybrid_manager_default(arch) if hybrid_manager is None else hybrid_manager):
        counts = unify_without_hybrid_manager(counts)
    page_1 = attention_page_per_token(arch, tp, kvb)
    raw = state_page_bytes(arch, tp, spec_tokens)
    mode = mamba_cache_mode(arch, prefix_caching, vllm_version) if raw else None
    block = block_size_for(page_1, raw, block_size, arch.get("mamba_chunk_size") if mode == "all" else None)
    size, groups, padding = group_layers(counts)
    page = block * page_1
    return KVLayout(
        attention_page_bytes_per_token=page_1, block_size=block, page_bytes=page, group_size=size,
        kind_groups=groups, kind_layers=counts,
        windows={k: w for k, w in (arch.get("windows") or {}).items() if k in counts},
        windowed_as_full=windowed - _windowed_layers(counts),
        attention_layers=attention_layers(counts), state_layers=state_layers(counts),
        attention_groups=attention_layers(groups), state_groups=state_layers(groups), padding_layers=padding,
        num_speculative_tokens=spec_tokens, mamba_cache_mode=mode, state_page_bytes=raw,
        state_padding_pct=100.0 * (page - raw) / raw if raw else 0.0,
        state_blocks_per_request=((2 if prefix_caching else 1) + spec_tokens) if raw else 0,
        specs=_layout_specs(arch, counts, tp, kvb, block, spec_tokens, mode))
