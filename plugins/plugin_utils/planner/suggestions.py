# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Suggestions for a plan that does not fit: the smallest changes (context, sequences, memory share, a smaller
checkpoint of the family, feature trade-offs, more GPUs) that were re-planned and do fit."""

from __future__ import annotations

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.model_profiles import DEFAULT_MAX_NUM_SEQS
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.units import gib
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.topology import link_rank, nvlink_count


def _largest_context(attempt, hi, **changes):
    """Largest max_model_len (a multiple of 1024, or 256 for short contexts) that fits with ``changes``."""
    step = 1024 if hi > 8192 else 256
    lo, best = 0, None
    while hi - lo > step:
        mid = (lo + hi) // 2
        mid -= mid % step
        if mid <= lo:
            break
        r = attempt(max_model_len=mid, **changes)
        if r and r["fits"]:
            lo, best = mid, r
        else:
            hi = mid
    return lo, best


def _cpu_kv_budget(profile, inputs):
    """The CPU engine's KV cache that holds one max_model_len request: the failed plan's layout (rebuilt: its
    kv_cache_layout fact is plain data) x the blocks a request takes."""
    from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import planner as P
    from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import capacity as CAP
    lay = P.layout_for(profile, 1, inputs["features"], inputs["kv_cache_dtype"], inputs["objective"],
                       inputs.get("hybrid_manager"), inputs.get("vllm_version"), block_size="cpu")
    need = CAP.blocks_per_request(lay, inputs["max_model_len"]) * lay.page_bytes * lay.group_size
    return {"set": {"kv_cache_memory_bytes": need},
            "text": "Give the CPU engine at least %d bytes of KV cache (--kv-cache-memory-bytes)." % need}


def suggest(gpu_facts, profile, inputs, failed, alternatives):
    """The smallest changes that make a failed plan fit.  Each: {'set': {input: value}, 'text': sentence}."""
    from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import planner as P

    def attempt(p=profile, **changes):
        kw = dict(inputs)
        kw.update(changes)
        try:
            return P.plan(gpu_facts, p, alternatives=None, _suggest=False, **kw)
        except PlanError:
            return None

    if inputs.get("vllm_version") is not None and failed.get("vllm_version_ok") is False:
        return [{"set": {"vllm_version": failed["min_vllm_version"]},
                 "text": "Use vLLM %s or newer." % failed["min_vllm_version"]}]
    # 1-3: one knob at a time (a shorter context, fewer sequences in flight, more of the memory)
    out = _shorter_context(attempt, inputs) + _fewer_sequences(attempt, inputs)
    out += _more_memory(attempt, inputs) if inputs["accelerator"] == "gpu" else [_cpu_kv_budget(profile, inputs)]
    # 4. when no single knob is enough: all of them at once
    if not out and inputs["accelerator"] == "gpu":
        out += _all_knobs(attempt, inputs)
    # 5. a smaller checkpoint of the same family
    out += _smaller_checkpoint(attempt, profile, alternatives)
    # 6. feature trade-offs that free memory
    out.extend(_feature_tradeoffs(attempt, inputs, failed))
    # 7. more GPUs like these (NVLink-connected only if these have NVLink)
    out.extend(_more_gpus(gpu_facts, profile, inputs))
    # 8. more hosts like this one (a model larger than one host: TP inside each host, PP across them)
    if inputs["accelerator"] == "gpu" and isinstance(gpu_facts, dict) and gpu_facts.get("gpus"):
        out.extend(_more_hosts(gpu_facts, profile, inputs))
    return out


def _shorter_context(attempt, inputs):
    ctx, best = _largest_context(attempt, inputs["max_model_len"])
    if not best:
        return []
    return [{"set": {"max_model_len": ctx},
             "text": "Lower max_model_len to %d (KV cache then %d tokens per replica, layout %s)."
                     % (ctx, best["kv_cache_tokens"], best["layout"])}]


def _fewer_sequences(attempt, inputs):
    current = inputs.get("max_num_seqs") or DEFAULT_MAX_NUM_SEQS[inputs["objective"]]
    for seqs in (64, 32, 16, 8, 4, 1):
        if seqs < current:
            r = attempt(max_num_seqs=seqs)
            if r and r["fits"]:
                return [{"set": {"max_num_seqs": seqs}, "text": "Lower max_num_seqs to %d." % seqs}]
    return []


def _more_memory(attempt, inputs):
    for u in (0.92, 0.95):
        if u > inputs["gpu_memory_utilization"]:
            r = attempt(gpu_memory_utilization=u)
            if r and r["fits"]:
                return [{"set": {"gpu_memory_utilization": u},
                         "text": "Raise gpu_memory_utilization to %.2f (less headroom for other processes on "
                                 "the GPU)." % u}]
    return []


def _all_knobs(attempt, inputs):
    for seqs in (16, 4, 1):
        ctx, best = _largest_context(attempt, inputs["max_model_len"], max_num_seqs=seqs,
                                     gpu_memory_utilization=max(0.95, inputs["gpu_memory_utilization"]))
        if best:
            return [{"set": {"max_model_len": ctx, "max_num_seqs": seqs,
                             "gpu_memory_utilization": best["gpu_memory_utilization"]},
                     "text": "Squeeze it in: max_model_len %d, max_num_seqs %d, gpu_memory_utilization %.2f "
                             "(KV cache %d tokens; little room to spare)."
                             % (ctx, seqs, best["gpu_memory_utilization"], best["kv_cache_tokens"])}]
    return []


def _smaller_checkpoint(attempt, profile, alternatives):
    for alt in sorted(alternatives, key=lambda a: a["weights_bytes"], reverse=True):
        if alt["id"] == profile["id"] or alt["family"] != profile["family"] or \
                alt["weights_bytes"] >= profile["weights_bytes"]:
            continue
        r = attempt(p=alt)
        if r and r["fits"]:
            return [{"set": {"model": alt["id"]},
                     "text": "Serve %s instead (%s weights): fits as %s with %d KV tokens per replica."
                             % (alt["id"], gib(alt["weights_bytes"]), r["layout"], r["kv_cache_tokens"])}]
    return []


def _feature_tradeoffs(attempt, inputs, failed):
    """Features whose memory a failed plan could give back (MTP off, text only), when that makes it fit."""
    out = []
    feats = inputs.get("features") or {}
    if failed.get("features", {}).get("mtp"):
        r = attempt(features=dict(feats, mtp=False))
        if r and r["fits"]:
            out.append({"set": {"features": {"mtp": False}}, "text": "Turn MTP speculative decoding off."})
    if "text_only" in failed.get("features", {}) and not failed["features"]["text_only"]:
        r = attempt(features=dict(feats, text_only=True))
        if r and r["fits"]:
            out.append({"set": {"features": {"text_only": True}}, "text": "Serve text only (--language-model-only)."})
    return out


def _more_gpus(gpu_facts, profile, inputs):
    """The suggestion of more GPUs like these in one host (NVLink-connected only if these have NVLink)."""
    from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import planner as P
    out = []
    if not (inputs["accelerator"] == "gpu" and isinstance(gpu_facts, dict) and gpu_facts.get("gpus")):
        return out
    from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.topology import gpu_facts_from_spec
    g0 = min(gpu_facts["gpus"], key=lambda g: g["memory_total_mib"])
    has_nv = any(nvlink_count(link["type"]) for link in gpu_facts.get("links") or [])
    link = max((link["type"] for link in gpu_facts.get("links") or []), key=link_rank, default="PHB") \
        if has_nv else "PHB"
    for count in (2, 4, 8):
        if count <= len(gpu_facts["gpus"]):
            continue
        spec = gpu_facts_from_spec({"count": count, "name": g0.get("name"), "memory_mib": g0["memory_total_mib"],
                                    "link": link})
        kw = dict(inputs)
        kw.pop("tensor_parallel_size", None)
        kw.pop("replicas", None)
        try:
            r = P.plan(spec, profile, alternatives=None, _suggest=False, **kw)
        except PlanError:
            r = None
        if r and r["fits"]:
            out.append({"set": {"gpus": count},
                        "text": "Use %d GPUs like these (%s, %s): fits as %s."
                                % (count, g0.get("name") or "same memory", "NVLink" if has_nv else "PCIe",
                                   r["layout"])})
            break
    return out


def _more_hosts(gpu_facts, profile, inputs):
    """'Use 2 hosts like this one (...)': the fewest identical hosts that hold the model, re-planned."""
    from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import planner as P
    from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.multinode_plan import (
        SUGGESTED_HOST_COUNTS, describe_host)
    have = int(inputs.get("hosts") or 1)
    kw = dict(inputs)
    kw.pop("replicas", None)
    for count in SUGGESTED_HOST_COUNTS:
        if count <= have:
            continue
        kw["hosts"] = count
        try:
            r = P.plan(gpu_facts, profile, alternatives=None, _suggest=False, **kw)
        except PlanError:
            r = None
        if r and r["fits"] and r.get("nodes", 1) > 1:
            return [{"set": {"hosts": r["nodes"]},
                     "text": "Use %d hosts like this one (%s): fits as %s, %s KV tokens, max concurrency %.2f at %d "
                             "tokens (an inventory group of %d hosts, llmfleet_model_group)."
                             % (r["nodes"], describe_host(gpu_facts), r["layout"],
                                "{:,}".format(r["kv_cache_tokens"]), r["max_concurrency"], r["max_model_len"],
                                r["nodes"])}]
    return []
