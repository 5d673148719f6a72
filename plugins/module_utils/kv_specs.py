# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""vLLM's KV cache specs, one per layer kind, read from a model's config.json; pure functions, no I/O.

Mirrors vLLM 0.22.0 (the release of the lent H200 machines; 0.28.0 computes the same, docs/PLANNER.md "Versions"):
``vllm/v1/kv_cache_interface.py`` (the specs' page_size_bytes and max_memory_usage_bytes),
``vllm/v1/core/kv_cache_utils.py`` (``_get_kv_cache_groups_uniform_page_size``, ``get_kv_cache_config_from_groups``,
``get_max_concurrency_for_kv_cache_config``), ``vllm/model_executor/layers/mamba/mamba_utils.py``
(``MambaStateShapeCalculator``) and ``vllm/platforms/interface.py`` / ``vllm/model_executor/models/config.py``
(the hybrid block-size alignment).  Per layer, on one GPU of a TP group of t:

  full attention     page = block x 2 (K, V) x max(1, KV heads // t) x head_dim x KV dtype bytes
                     a request holds cdiv(max_model_len, block) blocks
  sliding window w   same page; a request holds cdiv(min(w - 1 + max_num_batched_tokens, max_model_len), block) + 1
  chunked local c    same page; a request holds cdiv(min(c + max_num_batched_tokens, max_model_len), block)
  MLA                page = block x (kv_lora_rank + qk_rope_head_dim) x KV dtype bytes: one latent "head", no
                     factor 2, the whole latent on every TP rank (not divided by t)
  Mamba2 state       conv (intermediate + 2 x groups x state) / t x (kernel - 1 + spec tokens) x conv dtype
                     + SSM heads / t x head_dim x state x SSM dtype; groups are replicated up to t when t does not
                     divide them
  GDN state          conv (2 key_dim + value_dim) / t x (kernel - 1 + spec tokens) x dtype
                     + value heads / t x key_head_dim x value_head_dim x SSM dtype
  short conv (LFM2)  conv_dim / t x (L_cache - 1 + spec tokens) x dtype
  a state layer holds 1 block per request (prefix caching off, mamba cache mode 'none'), 2 ('align'), + spec tokens;
  with prefix caching, Mamba2 classes that support it (Nemotron-H, Falcon-H1, Granite 4.0-H, Bamba, Jamba, Zamba2)
  run mode 'all': one state block per block of the request, the block a multiple of lcm(mamba chunk size, 16)

Hybrid models with state layers raise the attention block to the smallest multiple of 16 tokens whose page is at
least the state page, and pad the state page to it.  Attention sinks (gpt-oss) are per-head logits: no KV.
Layers of one kind form groups of equal size (the smaller kind's count, or the larger when it is < 1.5 x the
smaller); every group draws from one pool: num_blocks = available // page // group size.
"""

from __future__ import annotations

import math

from ansible_collections.llmfleet.vllm.plugins.module_utils.plan_common import version_at_least

DEFAULT_BLOCK_SIZE = 16
# The vLLM CPU engine's block size when the user sets none (vllm/platforms/cpu.py, 0.32.0: 128; 16 for the reference
# CPU MLA backend). Full-attention-only models hold the same tokens at any block size; sliding-window layers and a
# max_model_len that is no multiple of it do not (tiny Gemma 3 on the test bed: 41,527 tokens at 128, 43,408 at 16).
CPU_BLOCK_SIZE = 128
CPU_MLA_BLOCK_SIZE = 16
KERNEL_BLOCK_ALIGNMENT = 16
GROUP_SIZE_SLACK = 1.5
ATTENTION_KINDS = ("full", "sliding", "chunked", "mla")
STATE_KINDS = ("mamba2", "gdn", "short_conv")


class KVSpecError(ValueError):
    """A config the KV model does not understand; the message names what and the way out."""


def cdiv(a, b):
    return -(-a // b)


def attention_page_per_token(arch, tp, kv_dtype_bytes):
    """Bytes one token of one attention layer takes on one GPU (vLLM's page_size_bytes at block_size 1)."""
    mla = arch.get("mla")
    if mla:
        return (mla["kv_lora_rank"] + mla["qk_rope_head_dim"]) * kv_dtype_bytes
    return 2 * max(1, arch["num_kv_heads"] // tp) * arch["head_dim"] * kv_dtype_bytes


def _tp_share(n, tp, what):
    if n % tp:
        raise KVSpecError("tensor parallel size %d does not divide the %d %s" % (tp, n, what))
    return n // tp


def mamba2_state_bytes(m, tp, spec_tokens, dtype_bytes):
    """One Mamba2 layer's state (MambaStateShapeCalculator.mamba2_state_shape) for one sequence on one GPU."""
    groups = m["n_groups"] if m["n_groups"] % tp == 0 else tp
    conv_dim = m["intermediate_size"] + 2 * groups * m["state_size"]
    conv = _tp_share(conv_dim, tp, "Mamba2 conv channels") * (m["conv_kernel"] - 1 + spec_tokens)
    ssm = _tp_share(m["num_heads"], tp, "Mamba2 heads") * m["head_dim"] * m["state_size"]
    return conv * dtype_bytes + ssm * m["ssm_dtype_bytes"]


def gdn_state_bytes(g, tp, spec_tokens, dtype_bytes):
    """One Gated DeltaNet layer's state (gated_delta_net_state_shape) for one sequence on one GPU."""
    key_dim = g["num_key_heads"] * g["key_head_dim"]
    value_dim = g["num_value_heads"] * g["value_head_dim"]
    conv = (2 * key_dim + value_dim) // tp * (g["conv_kernel"] - 1 + spec_tokens) * dtype_bytes
    ssm = g["num_value_heads"] // tp * g["key_head_dim"] * g["value_head_dim"] * g["ssm_dtype_bytes"]
    return conv + ssm


def short_conv_state_bytes(s, tp, spec_tokens, dtype_bytes):
    """One short-conv layer's state (short_conv_state_shape) for one sequence on one GPU."""
    return _tp_share(s["conv_dim"], tp, "short-conv channels") * (s["l_cache"] - 1 + spec_tokens) * dtype_bytes


def state_page_bytes(arch, tp=1, spec_tokens=0):
    """The largest state page of the model's state layers (vLLM unifies them); 0 without state layers."""
    pages = [0]
    dtype = arch["dtype_bytes"]
    if arch.get("mamba2") and arch["layer_counts"].get("mamba2"):
        pages.append(mamba2_state_bytes(arch["mamba2"], tp, spec_tokens, dtype))
    if arch.get("linear_attention") and arch["layer_counts"].get("gdn"):
        pages.append(gdn_state_bytes(arch["linear_attention"], tp, spec_tokens, dtype))
    if arch.get("short_conv") and arch["layer_counts"].get("short_conv"):
        pages.append(short_conv_state_bytes(arch["short_conv"], tp, spec_tokens, dtype))
    return max(pages)


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


# The first release read whose MambaModelConfig always defaults to 'align': 0.28.0 (vllm/model_executor/models/
# config.py:602-604; 0.32.0 :685-687); 0.22.0 still picks 'all' where supported (:350-354).  A release between them,
# not read, is planned as 0.22.0: 'all' holds more state blocks per sequence, never more sequences than vLLM.
ALIGN_ONLY_SINCE = "0.28.0"


def mamba_cache_mode(arch, prefix_caching, vllm_version=None):
    """vLLM's mamba cache mode: 'none' without prefix caching; with it 'all' (a state block per block of the
    sequence) for the model classes that support Mamba prefix caching, else 'align' (MambaModelConfig of 0.22.0);
    'align' for every model from 0.28.0 on.  An unknown version is planned as 0.22.0, the GPU-proven release."""
    if not prefix_caching:
        return "none"
    if vllm_version and version_at_least(vllm_version, ALIGN_ONLY_SINCE):
        return "align"
    return "all" if arch.get("mamba_prefix_caching_all") else "align"


def state_blocks(layout, max_model_len):
    """State blocks one request holds in each state group (MambaSpec.max_memory_usage_bytes / page)."""
    if layout["mamba_cache_mode"] == "all":
        return cdiv(max_model_len, layout["block_size"]) + layout["num_speculative_tokens"]
    return layout["state_blocks_per_request"]


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


def blocks_for_kind(kind, window, block, max_model_len, batched_tokens, state_blocks):
    """Blocks one request of max_model_len tokens holds in one group of this kind (max_memory_usage_bytes / page)."""
    if kind in ("full", "mla"):
        return cdiv(max_model_len, block)
    if kind == "sliding":
        return cdiv(min(window - 1 + batched_tokens, max_model_len), block) + 1
    if kind == "chunked":
        return cdiv(min(window + batched_tokens, max_model_len), block)
    return state_blocks


def kind_counts(arch, mtp_layers=0):
    """Layer counts by KV kind; MTP drafter layers join the full-attention (or MLA) kind."""
    counts = dict(arch["layer_counts"])
    if mtp_layers:
        key = "mla" if arch.get("mla") else "full"
        counts[key] = counts.get(key, 0) + mtp_layers
    return counts


def hybrid_manager_default(arch):
    """Whether vLLM runs its hybrid KV cache manager for this model by default: not with chunked local attention
    (Llama 4), where vllm/config/vllm.py (0.22.0 and 0.32.0 alike) turns it off for a latency regression unless
    VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1."""
    return not arch["layer_counts"].get("chunked")


def unify_without_hybrid_manager(counts):
    """Layer counts as vLLM's unify_hybrid_kv_cache_specs leaves them when the hybrid manager is off: next to
    full-attention layers, sliding-window and chunked layers become full attention (they keep the whole context);
    a model of windowed layers only keeps its one kind."""
    if not (counts.get("full") and (counts.get("sliding") or counts.get("chunked"))):
        return counts
    out = {k: n for k, n in counts.items() if k not in ("sliding", "chunked")}
    out["full"] = counts["full"] + counts.get("sliding", 0) + counts.get("chunked", 0)
    return out


def build_layout(arch, tp=1, kv_dtype_bytes=None, mtp_layers=0, spec_tokens=0, prefix_caching=False,
                 block_size=None, hybrid_manager=None, vllm_version=None):
    """The KV cache layout of one GPU of a TP group: block size, page, the groups and what each request holds.
    ``hybrid_manager``: vLLM's hybrid KV cache manager on or off (None: vLLM's default, hybrid_manager_default)."""
    kvb = kv_dtype_bytes or arch["dtype_bytes"]
    if block_size == "cpu":
        block_size = CPU_MLA_BLOCK_SIZE if arch.get("mla") else CPU_BLOCK_SIZE
    counts = kind_counts(arch, mtp_layers)
    windowed = sum(counts.get(k, 0) for k in ("sliding", "chunked"))
    if not (hybrid_manager_default(arch) if hybrid_manager is None else hybrid_manager):
        counts = unify_without_hybrid_manager(counts)
    page_1 = attention_page_per_token(arch, tp, kvb)
    raw = state_page_bytes(arch, tp, spec_tokens)
    mode = mamba_cache_mode(arch, prefix_caching, vllm_version) if raw else None
    block = block_size_for(page_1, raw, block_size, arch.get("mamba_chunk_size") if mode == "all" else None)
    size, groups, padding = group_layers(counts)
    attn = sum(g for k, g in groups.items() if k in ATTENTION_KINDS)
    state = sum(g for k, g in groups.items() if k in STATE_KINDS)
    page = block * page_1
    return dict(
        attention_page_bytes_per_token=page_1, block_size=block, page_bytes=page, group_size=size,
        kind_groups=groups, kind_layers=counts,
        windows={k: w for k, w in (arch.get("windows") or {}).items() if k in counts},
        windowed_as_full=windowed - sum(counts.get(k, 0) for k in ("sliding", "chunked")),
        attention_layers=sum(n for k, n in counts.items() if k in ATTENTION_KINDS),
        state_layers=sum(n for k, n in counts.items() if k in STATE_KINDS),
        attention_groups=attn, state_groups=state, padding_layers=padding, num_speculative_tokens=spec_tokens,
        mamba_cache_mode=mode, state_page_bytes=raw,
        state_padding_pct=100.0 * (page - raw) / raw if raw else 0.0,
        # per state group; in mode 'all' one per block of the request (state_blocks)
        state_blocks_per_request=((2 if prefix_caching else 1) + spec_tokens) if raw else 0)


def blocks_per_request(layout, max_model_len, batched_tokens=None):
    """Blocks one request of max_model_len tokens takes from the shared pool, all groups together."""
    batched = batched_tokens or max_model_len
    total = 0
    for kind, groups in layout["kind_groups"].items():
        total += groups * blocks_for_kind(kind, layout["windows"].get(kind, 0), layout["block_size"],
                                          max_model_len, batched, state_blocks(layout, max_model_len))
    return total


def smallest_request_blocks(layout, batched_tokens=None):
    """Blocks a one-token sequence holds (every group's first block, state groups their state blocks)."""
    return blocks_per_request(layout, 1, batched_tokens)
