# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sentences a plan gives for its memory and KV layout (planner.py): vLLM's profile terms per GPU, the hybrid
allocator's groups and pages, sliding / chunked windows, and what is not loaded."""

from __future__ import annotations

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import engine_memory as EM
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.units import MIB, gib
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.vllm_versions import version_at_least


def _layout_reason(layout, t):
    """The plan's sentence on a KVLayout: windowed groups, windowed layers kept whole, and the hybrid pages."""
    parts = [_window_reason(layout)] if layout.windows else []
    if layout.windowed_as_full:
        parts.append("vLLM turns its hybrid KV cache manager off for chunked local attention (a latency regression; "
                     "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 turns it on), so its %d windowed layers "
                     "keep the whole context like the others: planned as vLLM runs it by default."
                     % layout.windowed_as_full)
    if layout.state_groups:
        kind = next((layout.specs[k].title for k in layout.kind_groups if layout.specs[k].holds_state), "state")
        parts.append(
            "KV cache layout (vLLM's hybrid arithmetic, per GPU of TP%d): one %s state page is %d "
            "bytes per layer, so the attention block is raised to %d tokens (%d bytes per layer, the state page "
            "padded %.2f%% to equal it); the %d attention + %d linear-attention layers form %d + %d groups of %d "
            "sharing one block pool; a request takes ceil(max_model_len / %d) attention blocks plus %s per "
            "linear-attention group (mamba cache mode '%s'); nothing is reserved up front."
            % (t, kind, layout.state_page_bytes, layout.block_size, layout.page_bytes,
               layout.state_padding_pct, layout.attention_layers, layout.state_layers,
               layout.attention_groups, layout.state_groups, layout.group_size, layout.block_size,
               _state_blocks_text(layout), layout.mamba_cache_mode))
    return " ".join(parts) or None


def _state_blocks_text(layout):
    if layout.mamba_cache_mode == "all":
        return "as many state blocks (one state per block, for prefix caching)"
    n = layout.state_blocks_per_request
    return "%d state block%s" % (n, "s" if n > 1 else "")


def _window_reason(layout):
    """Sliding-window / chunked layers hold their window plus one batch, not the whole context."""
    text = []
    for kind, w in sorted(layout.windows.items()):
        groups = layout.kind_groups[kind]
        text.append("%d %s layers (window %d tokens) in %d group%s of %d: a request holds at most %s blocks in each"
                    % (layout.kind_layers[kind], layout.specs[kind].title, w, groups, "s" if groups > 1 else "",
                       layout.group_size, layout.specs[kind].blocks_formula()))
    return "KV cache layout (vLLM's hybrid allocator): %s; the other layers hold the whole context." % "; ".join(text)


def _has_fp8(gpu):
    if gpu.get("fp8") is not None:
        return bool(gpu["fp8"])
    cc = str(gpu.get("compute_capability") or "")
    try:
        return tuple(int(x) for x in cc.split(".")[:2]) >= (8, 9)
    except ValueError:
        return True  # unknown: say nothing


def _underived_terms_reason(terms, opts, arch):
    """Which memory terms are bounds rather than vLLM's own computation, and for which vLLM release they were
    checked on a GPU (issue #40: where unsure, the plan errs on the side of less KV cache)."""
    parts = ["non-torch memory %d MiB" % (terms.get("non_torch", 0) // MIB),
             "a %d MiB workspace allowance in the activation peak" % (EM.SAMPLER_WORKSPACE_BYTES // MIB)]
    if terms.get("cudagraph"):
        parts.append("%d MiB of driver memory per captured CUDA graph" % (EM.cudagraph_bytes_per_graph(arch) // MIB))
    version = opts.get("vllm_version")
    checked = "vLLM 0.22.0" if version is None else (
        "vLLM 0.22.0 (this plan is for %s, whose profile was read but not measured)" % version
        if not version_at_least(version, "0.22.0") or version_at_least(version, "0.23.0") else "this release")
    return ("Not derived from the model, so planned as upper bounds (less KV cache, never more): %s; the memory "
            "terms were checked on GPU runs of %s." % (", ".join(parts), checked))


def _memory_reasons(e, profile, opts, util, t, hybrid, used_gpus, reasons):
    """The plan's memory story: vLLM's profile terms per GPU, the KV layout, and what is not loaded."""
    layout = e["layout"]
    ot = e.get("overhead_terms") or {}
    reasons.append(
        "Memory per GPU (vLLM's profile): %s requested (%.2f x %s CUDA memory of %s) - %s weights%s - %s "
        "non-torch - %s activation peak - %s CUDA-graph estimate = %s available for the KV cache pool%s." % (
            gib(e["budget_bytes"]), util, gib(e["cuda_total_bytes"]), gib(e["memory_bytes"]),
            gib(e["weights_bytes_per_gpu"]), " (1/%d of %s)" % (t, gib(e["weights_bytes"])) if t > 1 else "",
            gib(ot.get("non_torch", 0)), gib(ot.get("activation", 0)), gib(ot.get("cudagraph", 0)),
            gib(max(0, e["available_bytes_per_gpu"])), " (KV and linear-attention state)" if hybrid else ""))
    reasons.append(_underived_terms_reason(ot, opts, profile["arch"]))
    lr = _layout_reason(layout, t)
    if lr:
        reasons.append(lr)
    if (profile.get("quantization") or "").startswith("fp8") and any(not _has_fp8(g) for g in used_gpus):
        reasons.append("These GPUs have no FP8 tensor cores (compute capability below 8.9): vLLM serves the FP8 "
                       "checkpoint weight-only (Marlin kernel, BF16 compute); the memory plan is the same.")
    if opts["text_only"] and profile.get("vision_weights_bytes"):
        reasons.append("Text-only mode: the vision tower (%s) is not loaded." % gib(profile["vision_weights_bytes"]))
    if not opts["mtp_on"] and profile.get("mtp_weights_bytes"):
        reasons.append("MTP speculative decoding is off: its head (%s) is not loaded."
                       % gib(profile["mtp_weights_bytes"]))
