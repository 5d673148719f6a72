# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A model's KV cache layout on one GPU of a TP group: its layer kinds (layer_specs.py) unified as vLLM does; pure.

Mirrors vLLM 0.22.0 (the release of the lent H200 machines; 0.28.0 computes the same, docs/PLANNER.md "Versions"):
``vllm/v1/core/kv_cache_utils.py`` (``unify_hybrid_kv_cache_specs``, ``_get_kv_cache_groups_uniform_page_size``,
``get_kv_cache_config_from_groups``, ``get_max_concurrency_for_kv_cache_config``), ``vllm/platforms/interface.py``
/ ``vllm/model_executor/models/config.py`` (the hybrid block-size alignment, the mamba cache mode).

Hybrid models with state layers raise the attention block to the smallest multiple of 16 tokens whose page is at
least the state page, and pad the state page to it.  Attention sinks (gpt-oss) are per-head logits: no KV.
Layers of one kind form groups of equal size (the smaller kind's count, or the larger when it is < 1.5 x the
smaller); every group draws from one pool: num_blocks = available // page // group size.
"""

from __future__ import annotations

import dataclasses
import math

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.layer_specs import (
    LAYER_SPECS, STATE_KINDS, FullAttentionSpec, attention_kind, attention_layers, state_layers)
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.units import cdiv
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.vllm_versions import version_at_least

# vLLM's attention kernels take blocks in multiples of 16 tokens (FlashAttention MultipleOf(16); with fp32
# mamba state [16, 32, 64], of which the smallest is taken); CacheConfig.DEFAULT_BLOCK_SIZE is 16.
DEFAULT_BLOCK_SIZE = 16
KERNEL_BLOCK_ALIGNMENT = 16
GROUP_SIZE_SLACK = 1.5
# The first release read whose MambaModelConfig always defaults to 'align': 0.28.0 (vllm/model_executor/models/
# config.py:602-604; 0.32.0 :685-687); 0.22.0 still picks 'all' where supported (:350-354).  A release between them,
# not read, is planned as 0.22.0: 'all' holds more state blocks per sequence, never more sequences than vLLM.
ALIGN_ONLY_SINCE = "0.28.0"


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
    'align' for every model from 0.28.0 on.  An unknown version is planned as 0.22.0, the GPU-proven release."""
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


def _spec_at(cls, arch, tp, kvb, block, spec_tokens, mode):
    """A kind's LayerSpec at the layout's block size (state specs with the mamba cache mode)."""
    spec = cls.from_arch(arch, tp, kvb, spec_tokens)
    if spec.holds_state:
        spec = dataclasses.replace(spec, mamba_cache_mode=mode, num_speculative_blocks=spec_tokens)
    return dataclasses.replace(spec, block_size=block)


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
        specs={k: _spec_at(LAYER_SPECS[k], arch, tp, kvb, block, spec_tokens, mode) for k in counts})
