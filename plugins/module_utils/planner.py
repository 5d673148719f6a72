# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Capacity planner: which GPU layout serves a model, how much KV cache it gets, and the vLLM flags.

Pure functions, no I/O.  Inputs are ``gpu_facts`` (topology.py) and a profile (model_profiles.py).

Memory model, per GPU of a tensor-parallel (TP) group of size t (all numbers in bytes):

  budget      = memory_total x gpu_memory_utilization                (vLLM's own budget rule)
  weights     = (checkpoint - vision tower if text-only - MTP head if MTP is off) / t
  overhead    = OVERHEAD_BASE (CUDA graphs, cuBLAS workspace, allocator slack)
                + OVERHEAD_TP if t > 1 (NCCL buffers)
                + activations: max_num_batched_tokens x hidden_size x 2 bytes x ACTIVATION_FACTOR / t
                + sampler: max_num_seqs x vocab_size x SAMPLER_BYTES (fp32 logits and probabilities)
  available   = budget - weights - overhead
  KV / token  = 2 (K and V) x full-attention layers x KV heads on this GPU x head_dim x dtype bytes
                (KV heads on a GPU = KV heads / t, at least 1: vLLM replicates KV heads when t > KV heads;
                 linear-attention layers hold no per-token KV)
  state / seq = per linear-attention (Gated DeltaNet) layer: conv state (2 x key_dim + value_dim) x
                (kernel - 1) x dtype bytes + SSM state value_heads x key_head_dim x value_head_dim x ssm bytes,
                divided by t (heads are sharded).  One state slot per running sequence, independent of length.
  kv_tokens   = (available - max_num_seqs x state) / KV per token, rounded down to whole 16-token blocks.

The overhead terms are deliberately conservative estimates (vLLM measures the real peak at start-up); they
make the plan err on the side of "does not fit" rather than an out-of-memory at start.
"""

from __future__ import annotations

import math

from ansible_collections.llmfleet.vllm.plugins.module_utils.model_profiles import DTYPE_BYTES, OBJECTIVES
from ansible_collections.llmfleet.vllm.plugins.module_utils.topology import (
    link_rank, links_from_list, nvlink_count, nvlink_domains)

MIB = 1024 ** 2
GIB = 1024 ** 3
OVERHEAD_BASE = int(1.5 * GIB)
OVERHEAD_TP = int(0.5 * GIB)
# max_num_batched_tokens the plan sets (and the activation term assumes): vLLM's OpenAI-server defaults,
# 8192 on GPUs with 70 GiB or more, 2048 on smaller ones.  Set explicitly so the estimate holds.
BATCHED_TOKENS_LARGE = 8192
BATCHED_TOKENS_SMALL = 2048
ACTIVATION_FACTOR = 24
SAMPLER_BYTES = 8
BLOCK_TOKENS = 16
DEFAULT_MAX_NUM_SEQS = {"throughput": 256, "latency": 64}
STATE_SHARE_MAX = 0.5  # linear-attention states may take at most half of the free memory by default
DEFAULT_UTILIZATION = 0.9
TP_SIZES = (1, 2, 4, 8, 16)

TABLE_HEADER = ("| hardware | model | fits | layout | KV cache (tokens/replica) | max concurrency @ context "
                "| max_num_seqs |\n|---|---|---|---|---|---|---|")


class PlanError(ValueError):
    """Input the planner cannot work with; the message says what to change."""


def gib(n):
    return "%.1f GiB" % (n / GIB)


def kv_bytes_per_token(arch, dtype_bytes=None, tp=1, extra_layers=0):
    """KV cache bytes one token occupies on one GPU of a TP group of size ``tp`` (tp=1: the whole model)."""
    heads = arch["num_kv_heads"] if tp == 1 else max(1, arch["num_kv_heads"] // tp)
    b = dtype_bytes or arch["dtype_bytes"]
    return 2 * (arch["full_attention_layers"] + extra_layers) * heads * arch["head_dim"] * b


def state_bytes_per_sequence(arch, tp=1):
    """Linear-attention (Gated DeltaNet / Mamba-style) state of one sequence on one GPU (0 for plain attention)."""
    lin = arch.get("linear_attention")
    if not lin or not arch["linear_attention_layers"]:
        return 0
    key_dim = lin["num_key_heads"] * lin["key_head_dim"]
    value_dim = lin["num_value_heads"] * lin["value_head_dim"]
    conv = (2 * key_dim + value_dim) * (lin["conv_kernel"] - 1) * arch["dtype_bytes"]
    ssm = lin["num_value_heads"] * lin["key_head_dim"] * lin["value_head_dim"] * DTYPE_BYTES[lin["ssm_dtype"]]
    return arch["linear_attention_layers"] * (conv + ssm) // tp


def tp_allowed(arch, t):
    """(ok, why-not) for a TP size: it must divide the attention heads; KV heads must divide by t or t by them;
    linear-attention heads and experts (when EP is on) are checked by the caller."""
    if arch["num_attention_heads"] % t:
        return False, "TP %d does not divide the %d attention heads" % (t, arch["num_attention_heads"])
    kvh = arch["num_kv_heads"]
    if kvh % t and t % kvh:
        return False, "TP %d and the %d KV heads do not divide one another" % (t, kvh)
    lin = arch.get("linear_attention")
    if lin and (lin["num_key_heads"] % t or lin["num_value_heads"] % t):
        return False, "TP %d does not divide the linear-attention heads (%d key, %d value)" % (
            t, lin["num_key_heads"], lin["num_value_heads"])
    return True, ""


def default_batched_tokens(memory_bytes):
    return BATCHED_TOKENS_LARGE if memory_bytes >= 70 * GIB else BATCHED_TOKENS_SMALL


def overhead_bytes(arch, tp, max_num_seqs, batched_tokens=BATCHED_TOKENS_LARGE):
    """Conservative non-weight, non-KV memory on one GPU (see the module docstring)."""
    act = batched_tokens * arch["hidden_size"] * 2 * ACTIVATION_FACTOR // tp
    sampler = max_num_seqs * arch["vocab_size"] * SAMPLER_BYTES
    return OVERHEAD_BASE + (OVERHEAD_TP if tp > 1 else 0) + act + sampler


# ---------------------------------------------------------------------------------------------------------
# Features (profile data) -> enabled set
# ---------------------------------------------------------------------------------------------------------

def resolve_features(profile, objective, requested, context, strict=True):
    """Decide which profile features are on.

    ``requested``: {feature: bool or None} from the user (None = profile default for the objective).
    ``context``: {expert_parallel: bool, hybrid: bool, mtp_layers: int} (what ``requires`` can name).
    Returns (enabled {name: bool}, reasons [str]).  Raises PlanError on contradictions the user asked for.
    """
    feats = profile["serving"].get("features") or {}
    requested = {k: v for k, v in (requested or {}).items() if v is not None}
    unknown = sorted(set(requested) - set(feats))
    if unknown:
        raise PlanError("feature(s) %s are not defined for %s; its features: %s"
                        % (", ".join(unknown), profile["id"], ", ".join(sorted(feats)) or "none"))
    reasons = []
    enabled = {}
    explicit = {}
    for name, f in feats.items():
        d = f.get("default", False)
        if isinstance(d, dict):
            d = d[objective]
        explicit[name] = name in requested
        enabled[name] = bool(requested.get(name, d))
    for name, f in feats.items():
        if not enabled[name]:
            continue
        for req in f.get("requires") or []:
            ok = bool(context.get(req))
            if not ok:
                if explicit[name] and strict:
                    raise PlanError("feature %s needs %s, which this plan does not have (%s)"
                                    % (name, req, _REQUIRE_TEXT[req]))
                enabled[name] = False
                if explicit[name]:
                    reasons.append("%s is off: it needs %s, which this plan does not have." % (name, req))
    for name, f in feats.items():
        for c in f.get("conflicts") or []:
            other = c["feature"]
            if not (enabled[name] and enabled.get(other)):
                continue
            if explicit[name] and explicit[other]:
                raise PlanError("features %s and %s were both requested but conflict: %s Turn one of them off."
                                % (name, other, c["reason"]))
            loser = other if explicit[name] or not explicit[other] else name
            winner = name if loser == other else other
            enabled[loser] = False
            reasons.append("%s is off because %s is on: %s" % (loser, winner, " ".join(c["reason"].split())))
    return enabled, reasons


_REQUIRE_TEXT = {
    "expert_parallel": "expert parallelism is planned only for a TP group of 2+ GPUs inside one NVLink domain",
    "hybrid": "only hybrid linear-attention models have it",
    "mtp_layers": "the model config has no MTP layers",
}


def feature_args(profile, enabled):
    """vLLM args contributed by the profile's features: args_on when on, args_off when off."""
    args = {}
    for name, f in (profile["serving"].get("features") or {}).items():
        part = f.get("args_on") if enabled.get(name) else f.get("args_off")
        for k, v in (part or {}).items():
            args[k] = v
    return args


# ---------------------------------------------------------------------------------------------------------
# Layout
# ---------------------------------------------------------------------------------------------------------

def _pack_nvlink(domains, usable, t):
    groups = []
    for dom in domains:
        members = [g for g in dom if g in usable]
        for i in range(0, len(members) - t + 1, t):
            groups.append(members[i:i + t])
    return groups


def _pack_pcie(gpus, links, usable, t):
    """Groups of t GPUs that cross PCIe: keep NUMA nodes together, pair by best link first."""
    left = sorted(usable, key=lambda i: (gpus[i].get("numa_node") if gpus[i].get("numa_node") is not None else 0, i))
    groups = []
    while len(left) >= t:
        g = [left.pop(0)]
        while len(g) < t:
            best = max(left, key=lambda j: (min(link_rank(links.get((k, j), "SYS")) for k in g), -left.index(j)))
            g.append(best)
            left.remove(best)
        groups.append(sorted(g))
    return groups


def _worst_link(group, links):
    if len(group) < 2:
        return None
    pairs = [links.get((a, b), "SYS") for a in group for b in group if a < b]
    return min(pairs, key=link_rank)


def _memory_for(arch, profile, group, gpus, t, util, max_model_len, max_num_seqs, objective, mtp_on,
                text_only, kv_dtype_bytes, batched_tokens=None):
    """Evaluate one TP group.  Returns a dict with fits, kv_tokens, chosen max_num_seqs, and the terms."""
    mem = min(gpus[i]["memory_total_mib"] for i in group) * MIB
    budget = int(mem * util)
    w = profile["weights_bytes"]
    if text_only:
        w -= profile.get("vision_weights_bytes", 0)
    if not mtp_on:
        w -= profile.get("mtp_weights_bytes", 0)
    w_rank = int(math.ceil(w / t))
    seq_cap_default = max_num_seqs or DEFAULT_MAX_NUM_SEQS[objective]
    batched = batched_tokens or default_batched_tokens(mem)
    over = overhead_bytes(arch, t, seq_cap_default, batched)
    avail = budget - w_rank - over
    extra = arch["mtp_layers"] if mtp_on else 0
    kv_rank = kv_bytes_per_token(arch, kv_dtype_bytes, tp=t, extra_layers=extra)
    st_rank = state_bytes_per_sequence(arch, tp=t)
    return _kv_from_available(avail, kv_rank, st_rank, max_model_len, max_num_seqs, objective, dict(
        memory_bytes=mem, budget_bytes=budget, weights_bytes=w, weights_bytes_per_gpu=w_rank,
        overhead_bytes_per_gpu=over, max_num_batched_tokens=batched))


def _kv_from_available(avail, kv_rank, st_rank, max_model_len, max_num_seqs, objective, terms):
    r = dict(terms)
    r.update(available_bytes_per_gpu=avail, kv_bytes_per_token_per_gpu=kv_rank, state_bytes_per_gpu=st_rank,
             fits=False, kv_tokens=0, max_num_seqs=max_num_seqs or 0, problem=None)
    if avail <= 0:
        r["problem"] = "weights and overhead exceed the memory budget"
        return r
    if st_rank:
        cap_state = (avail - max_model_len * kv_rank) // st_rank
        if max_num_seqs:
            seqs = max_num_seqs
            if seqs > cap_state:
                r["problem"] = ("the linear-attention state of %d sequences plus one %d-token sequence does not fit"
                                % (seqs, max_model_len))
                r["state_slots"] = max(0, cap_state)
                return r
        else:
            cap_half = int(avail * STATE_SHARE_MAX) // st_rank
            seqs = min(DEFAULT_MAX_NUM_SEQS[objective], cap_state, cap_half)
            if seqs >= 16:
                seqs -= seqs % 8
            if seqs < 1:
                r["problem"] = "no room for one sequence's state beside one %d-token sequence" % max_model_len
                return r
        r["state_slots"] = cap_state
    else:
        seqs = max_num_seqs or DEFAULT_MAX_NUM_SEQS[objective]
        r["state_slots"] = None
    tokens = (avail - seqs * st_rank) // kv_rank
    tokens -= tokens % BLOCK_TOKENS
    r["max_num_seqs"] = seqs
    r["kv_tokens"] = max(0, tokens)
    if tokens < max_model_len:
        r["problem"] = "the KV cache holds %d tokens, less than one %d-token sequence" % (max(0, tokens), max_model_len)
        return r
    r["fits"] = True
    return r


def _check_version(have, need):
    def t(v):
        return tuple(int(x) for x in str(v).split("+", maxsplit=1)[0].split(".")[:3] if x.isdigit())
    return t(have) >= t(need)


def plan(gpu_facts, profile, objective="throughput", max_model_len=None, max_num_seqs=None,
         gpu_memory_utilization=None, accelerator="gpu", kv_cache_memory_bytes=None, features=None,
         tensor_parallel_size=None, enable_expert_parallel=None, kv_cache_dtype="auto", vllm_version=None,
         max_num_batched_tokens=None, alternatives=None, _suggest=True):
    """Plan a vLLM deployment.  See the module docstring for the memory model; returns the ``plan`` dict."""
    if objective not in OBJECTIVES:
        raise PlanError("objective must be one of %s, got %r" % (", ".join(OBJECTIVES), objective))
    arch = profile["arch"]
    if max_model_len is None:
        max_model_len = arch["max_position_embeddings"]
    max_model_len = int(max_model_len)
    if max_model_len < 1:
        raise PlanError("max_model_len must be a positive number of tokens")
    if max_num_seqs is not None and int(max_num_seqs) < 1:
        raise PlanError("max_num_seqs must be at least 1")
    if kv_cache_dtype not in ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "float16"):
        raise PlanError("kv_cache_dtype must be auto, fp8, fp8_e4m3, fp8_e5m2, bfloat16 or float16")
    kv_dtype_bytes = arch["dtype_bytes"] if kv_cache_dtype == "auto" else DTYPE_BYTES[kv_cache_dtype]
    util = DEFAULT_UTILIZATION if gpu_memory_utilization is None else float(gpu_memory_utilization)
    if accelerator == "gpu" and not 0.05 <= util <= 0.99:
        raise PlanError("gpu_memory_utilization must be between 0.05 and 0.99, got %s" % util)
    hybrid = arch["linear_attention_layers"] > 0
    reasons = []
    kv_full = kv_bytes_per_token(arch, kv_dtype_bytes)
    state_full = state_bytes_per_sequence(arch)
    reasons.append(
        "KV cache per token: 2 (K, V) x %d full-attention layers x %d KV heads x %d head_dim x %d bytes = %d bytes"
        " (%.1f KiB)%s." % (arch["full_attention_layers"], arch["num_kv_heads"], arch["head_dim"], kv_dtype_bytes,
                            kv_full, kv_full / 1024.0,
                            "; the %d linear-attention layers keep no per-token KV" % arch["linear_attention_layers"]
                            if hybrid else ""))
    if hybrid:
        reasons.append("Linear-attention state: %.1f MiB per running sequence whatever its length; it caps "
                       "max_num_seqs." % (state_full / MIB))
    if max_model_len > arch["max_position_embeddings"]:
        raise PlanError("max_model_len %d exceeds the model's context of %d tokens (max_position_embeddings); "
                        "use at most %d" % (max_model_len, arch["max_position_embeddings"],
                                            arch["max_position_embeddings"]))
    if kv_dtype_bytes < arch["dtype_bytes"]:
        reasons.append("KV cache dtype %s halves KV memory but FP8 KV without calibrated scales has degraded "
                       "output on this model family; keep auto unless you measured quality." % kv_cache_dtype)

    base = dict(model=profile["id"], profile=profile["id"], family=profile["family"], variant=profile["variant"],
                quantization=profile.get("quantization"), objective=objective, accelerator=accelerator,
                max_model_len=max_model_len, kv_cache_dtype=kv_cache_dtype,
                kv_cache_bytes_per_token=kv_full, state_bytes_per_sequence=state_full,
                min_vllm_version=str(profile["serving"]["min_vllm_version"]))
    if vllm_version is not None:
        ok = _check_version(vllm_version, base["min_vllm_version"])
        base["vllm_version_ok"] = ok
        if not ok:
            reasons.append("vLLM %s is older than %s, the first release that serves %s: pin a newer image."
                           % (vllm_version, base["min_vllm_version"], profile["id"]))

    # Features that change memory (MTP, text-only) are settled first; expert-parallel-dependent ones later.
    pre, _unused = resolve_features(profile, objective, features,
                                    {"expert_parallel": True, "hybrid": hybrid, "mtp_layers": arch["mtp_layers"]})
    mtp_on = pre.get("mtp", False)
    text_only = pre.get("text_only", False)

    if accelerator == "cpu":
        result = _plan_cpu(arch, profile, objective, max_model_len, max_num_seqs, kv_cache_memory_bytes,
                           kv_dtype_bytes, mtp_on, features, hybrid, reasons, base)
    elif accelerator == "gpu":
        result = _plan_gpu(arch, profile, objective, max_model_len, max_num_seqs, util, gpu_facts, features,
                           tensor_parallel_size, enable_expert_parallel, kv_dtype_bytes, kv_cache_dtype, mtp_on,
                           text_only, hybrid, reasons, base, max_num_batched_tokens)
    else:
        raise PlanError("accelerator must be gpu or cpu, got %r" % accelerator)
    if vllm_version is not None and not base["vllm_version_ok"]:
        result["fits"] = False
    result["suggestions"] = []
    if not result["fits"] and _suggest:
        result["suggestions"] = suggest(gpu_facts, profile, dict(
            objective=objective, max_model_len=max_model_len, max_num_seqs=max_num_seqs,
            gpu_memory_utilization=util, accelerator=accelerator, kv_cache_memory_bytes=kv_cache_memory_bytes,
            features=features, tensor_parallel_size=tensor_parallel_size,
            enable_expert_parallel=enable_expert_parallel, kv_cache_dtype=kv_cache_dtype,
            vllm_version=vllm_version, max_num_batched_tokens=max_num_batched_tokens), result, alternatives or [])
    result["summary"] = _summary(result)
    return result


def _plan_cpu(arch, profile, objective, max_model_len, max_num_seqs, kv_budget, kv_dtype_bytes, mtp_on,
              features, hybrid, reasons, base):
    if not kv_budget or int(kv_budget) <= 0:
        raise PlanError("accelerator cpu needs kv_cache_memory_bytes (the vLLM CPU engine sizes its KV cache "
                        "from --kv-cache-memory-bytes), e.g. 67108864 for 64 MiB")
    kv_budget = int(kv_budget)
    enabled, freasons = resolve_features(profile, objective, features,
                                         {"expert_parallel": False, "hybrid": hybrid,
                                          "mtp_layers": arch["mtp_layers"]})
    reasons.extend(freasons)
    kv_tok = kv_bytes_per_token(arch, kv_dtype_bytes, extra_layers=arch["mtp_layers"] if mtp_on else 0)
    st = state_bytes_per_sequence(arch)
    r = _kv_from_available(kv_budget, kv_tok, st, max_model_len, max_num_seqs, objective,
                           dict(weights_bytes=profile["weights_bytes"], weights_bytes_per_gpu=0,
                                overhead_bytes_per_gpu=0, budget_bytes=kv_budget, memory_bytes=None))
    reasons.append("CPU engine: the KV cache budget is --kv-cache-memory-bytes %d (%.1f MiB) = %d tokens at %d "
                   "bytes per token%s." % (kv_budget, kv_budget / MIB, r["kv_tokens"], kv_tok,
                                           " after %d state slots" % r["max_num_seqs"] if st else ""))
    if r["problem"]:
        reasons.append("Does not fit: %s." % r["problem"])
    args = {"kv-cache-memory-bytes": kv_budget, "max-model-len": max_model_len,
            "max-num-seqs": r["max_num_seqs"] or None}
    fargs = feature_args(profile, enabled)
    args.update(fargs)
    out = dict(base)
    out.update(
        fits=r["fits"], tensor_parallel_size=1, data_parallel_size=1, replicas=[[]], enable_expert_parallel=False,
        weights_bytes=profile["weights_bytes"], weights_bytes_per_gpu=0, overhead_bytes_per_gpu=0,
        kv_cache_memory_bytes=kv_budget, kv_cache_tokens=r["kv_tokens"], kv_cache_tokens_total=r["kv_tokens"],
        max_num_seqs=r["max_num_seqs"], max_num_batched_tokens=None, gpu_memory_utilization=None,
        max_concurrency_at_max_model_len=_concurrency(r, max_model_len),
        max_concurrency_total=_concurrency(r, max_model_len),
        interconnect=None, unused_gpus=[], features=enabled, reasons=reasons, vllm_args=args,
        layout="CPU engine (1 replica)")
    return out


def _concurrency(r, max_model_len):
    """Sequences of the full context that fit at once (bounded by max_num_seqs)."""
    if not r["fits"]:
        return 0
    return min(r["max_num_seqs"], r["kv_tokens"] // max_model_len)


def _plan_gpu(arch, profile, objective, max_model_len, max_num_seqs, util, gpu_facts, features, tp_forced,
              ep_forced, kv_dtype_bytes, kv_cache_dtype, mtp_on, text_only, hybrid, reasons, base,
              batched_tokens=None):
    if not gpu_facts or not gpu_facts.get("gpus"):
        raise PlanError("gpu_facts lists no GPUs: run llmfleet.vllm.gpu_facts on a GPU host first, describe the "
                        "hardware, or plan with accelerator: cpu")
    gpus = {g["index"]: g for g in gpu_facts["gpus"]}
    links = links_from_list(gpu_facts.get("links"))
    usable = [i for i in sorted(gpus) if (gpus[i].get("mig_mode") or "").lower() != "enabled"]
    mig = [i for i in sorted(gpus) if i not in usable]
    if mig:
        reasons.append("GPU %s: MIG is enabled; MIG slices are left out of this plan (disable MIG to use the "
                       "whole GPU)." % ", ".join(map(str, mig)))
    if not usable:
        raise PlanError("no usable GPU: every GPU has MIG enabled")
    domains = gpu_facts.get("nvlink_domains") or nvlink_domains(sorted(gpus), links)
    n = len(usable)
    if tp_forced is not None:
        # Say why a forced size is impossible before looking for layouts: a size that does not divide the heads
        # (e.g. 3) is never a candidate, and "needs 3 GPUs" would send the user after the wrong fix.
        ok, why = tp_allowed(arch, tp_forced) if tp_forced >= 1 else (False, "it must be at least 1")
        if not ok:
            raise PlanError("tensor_parallel_size %d is not possible for %s: %s; use one of %s" % (
                tp_forced, profile["id"], why,
                ", ".join(str(t) for t in TP_SIZES if t <= max(n, 1) and tp_allowed(arch, t)[0]) or "none"))
        if tp_forced not in TP_SIZES:
            raise PlanError("tensor_parallel_size %d is not a size this planner lays out (%s)"
                            % (tp_forced, ", ".join(map(str, TP_SIZES))))

    candidates = []
    for t in TP_SIZES:
        if t > n:
            break
        ok, why = tp_allowed(arch, t)
        if not ok:
            if tp_forced == t:
                raise PlanError("tensor_parallel_size %d is not possible for %s: %s" % (t, profile["id"], why))
            continue
        nv_groups = _pack_nvlink(domains, usable, t) if t > 1 else [[i] for i in usable]
        if nv_groups:
            groups, nvlink = nv_groups, True
        else:
            groups, nvlink = _pack_pcie(gpus, links, usable, t), False
        evals = [_memory_for(arch, profile, g, gpus, t, util, max_model_len, max_num_seqs, objective, mtp_on,
                             text_only, kv_dtype_bytes, batched_tokens) for g in groups]
        worst = min(evals, key=lambda e: (e["fits"], e["kv_tokens"]))
        candidates.append(dict(t=t, groups=groups, nvlink=nvlink, eval=worst))

    if tp_forced is not None and not any(c["t"] == tp_forced for c in candidates):
        raise PlanError("tensor_parallel_size %d needs %d usable GPUs; this host has %d" % (tp_forced, tp_forced, n))

    fit_nv = [c for c in candidates if c["nvlink"] and c["eval"]["fits"]]
    fit_any = [c for c in candidates if c["eval"]["fits"]]
    if tp_forced is not None:
        chosen = next(c for c in candidates if c["t"] == tp_forced)
        if not chosen["nvlink"] and fit_nv:
            raise PlanError("tensor_parallel_size %d would put a TP group across GPUs without NVLink between them, "
                            "while TP %d fits inside one NVLink domain; leave tensor_parallel_size unset"
                            % (tp_forced, fit_nv[0]["t"]))
        reasons.append("Tensor parallel size %d was set by the user." % tp_forced)
    elif fit_nv:
        t_min = fit_nv[0]["t"]
        if objective == "throughput":
            chosen = fit_nv[0]
            if t_min == 1:
                reasons.append("Objective throughput: one replica fits one GPU, so every GPU serves its own replica "
                               "(no tensor parallelism, no cross-GPU traffic).")
            else:
                reasons.append("Objective throughput: the smallest TP group that fits is %d GPUs inside one NVLink "
                               "domain; each such group is one replica." % t_min)
        else:
            cap = max(t_min, arch["num_kv_heads"])
            options = [c for c in fit_nv if c["t"] <= cap]
            chosen = options[-1]
            reasons.append("Objective latency: TP %d over NVLink splits each token's weight reads across GPUs; TP "
                           "stops at %d because beyond the %d KV heads every GPU would hold a replicated copy of "
                           "the KV cache." % (chosen["t"], cap, arch["num_kv_heads"]))
    elif fit_any:
        chosen = fit_any[0]
        if chosen["t"] > 1:
            reasons.append(
                "No NVLink domain holds a replica: the model needs TP %d, so the TP group crosses PCIe (%s). "
                "Expect it to be slower per GPU than a single larger GPU: every layer all-reduces over PCIe, and "
                "a 2-GPU PCIe TP deployment of a MoE model has been measured slower than one GPU."
                % (chosen["t"], _worst_link(chosen["groups"][0], links)))
    else:
        chosen = max(candidates, key=lambda c: (c["eval"]["kv_tokens"], c["eval"]["available_bytes_per_gpu"]))

    t = chosen["t"]
    e = chosen["eval"]
    groups = chosen["groups"]
    moe = arch.get("moe")
    ep_possible = bool(moe) and t > 1 and chosen["nvlink"] and moe["num_experts"] % t == 0
    if ep_forced is True and not ep_possible:
        raise PlanError("enable_expert_parallel is true but expert parallelism needs a MoE model and a TP group of "
                        "2+ GPUs inside one NVLink domain (this plan: TP %d, %s)"
                        % (t, "NVLink" if chosen["nvlink"] else "PCIe"))
    ep = ep_possible if ep_forced is None else bool(ep_forced)
    if ep:
        reasons.append("Expert parallelism on: the %d experts are spread over the %d NVLink-connected GPUs of each "
                       "replica instead of slicing every expert." % (moe["num_experts"], t))
    elif moe and t > 1 and not chosen["nvlink"]:
        reasons.append("Expert parallelism off: its all-to-all traffic would cross PCIe.")

    enabled, freasons = resolve_features(profile, objective, features,
                                         {"expert_parallel": ep, "hybrid": hybrid, "mtp_layers": arch["mtp_layers"]})
    reasons.extend(freasons)

    used = sorted(i for g in groups for i in g)
    unused = [i for i in usable if i not in used]
    if len(groups) > 1:
        reasons.append("%d replicas (GPUs %s): the serve role runs one vLLM container per replica behind the load "
                       "balancer; vLLM-internal data parallelism is not planned, because independent replicas "
                       "share nothing and need no cross-GPU traffic." % (
                           len(groups), "; ".join(",".join(map(str, g)) for g in groups)))
    if unused:
        reasons.append("GPU %s stay unused: they do not make a further group of %d NVLink-connected GPUs."
                       % (", ".join(map(str, unused)), t))
    reasons.append(
        "Memory per GPU: %s budget (%.2f x %s) - %s weights%s - %s overhead (CUDA graphs, NCCL, activations, "
        "sampler; conservative) = %s for KV cache%s." % (
            gib(e["budget_bytes"]), util, gib(e["memory_bytes"]), gib(e["weights_bytes_per_gpu"]),
            " (1/%d of %s)" % (t, gib(e["weights_bytes"])) if t > 1 else "",
            gib(e["overhead_bytes_per_gpu"]), gib(max(0, e["available_bytes_per_gpu"])),
            " and state" if hybrid else ""))
    if text_only and profile.get("vision_weights_bytes"):
        reasons.append("Text-only mode: the vision tower (%s) is not loaded." % gib(profile["vision_weights_bytes"]))
    if not mtp_on and profile.get("mtp_weights_bytes"):
        reasons.append("MTP speculative decoding is off: its head (%s) is not loaded." % gib(profile["mtp_weights_bytes"]))
    if e["fits"]:
        reasons.append("KV cache: %d tokens per replica = %d concurrent sequences at the full %d-token context "
                       "(max_num_seqs %d)." % (e["kv_tokens"], min(e["max_num_seqs"], e["kv_tokens"] // max_model_len),
                                               max_model_len, e["max_num_seqs"]))
    else:
        reasons.append("Does not fit: %s." % e["problem"])

    args = {
        "tensor-parallel-size": t,
        "gpu-memory-utilization": util,
        "max-model-len": max_model_len,
        "max-num-seqs": e["max_num_seqs"] or None,
        "max-num-batched-tokens": e["max_num_batched_tokens"],
        "enable-expert-parallel": True if ep else None,
        "kv-cache-dtype": None if kv_cache_dtype == "auto" else kv_cache_dtype,
    }
    args.update(feature_args(profile, enabled))
    conc = _concurrency(e, max_model_len)
    out = dict(base)
    out.update(
        fits=e["fits"], tensor_parallel_size=t, data_parallel_size=len(groups), replicas=groups,
        enable_expert_parallel=ep, weights_bytes=e["weights_bytes"],
        weights_bytes_per_gpu=e["weights_bytes_per_gpu"], overhead_bytes_per_gpu=e["overhead_bytes_per_gpu"],
        kv_cache_memory_bytes=max(0, e["available_bytes_per_gpu"]) * t,
        kv_cache_tokens=e["kv_tokens"], kv_cache_tokens_total=e["kv_tokens"] * len(groups),
        max_num_seqs=e["max_num_seqs"], max_num_batched_tokens=e["max_num_batched_tokens"],
        gpu_memory_utilization=util, max_concurrency_at_max_model_len=conc, max_concurrency_total=conc * len(groups),
        interconnect=("NVLink" if chosen["nvlink"] else _worst_link(groups[0], links)) if t > 1 else None,
        unused_gpus=unused, features=enabled, reasons=reasons, vllm_args=args,
        layout="%d x TP%d%s%s" % (len(groups), t, " EP" if ep else "",
                                  "" if t == 1 else (" NVLink" if chosen["nvlink"] else " PCIe")),
    )
    return out


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


def suggest(gpu_facts, profile, inputs, failed, alternatives):
    """The smallest changes that make a failed plan fit.  Each: {'set': {input: value}, 'text': sentence}."""
    out = []

    def attempt(p=profile, **changes):
        kw = dict(inputs)
        kw.update(changes)
        try:
            return plan(gpu_facts, p, alternatives=None, _suggest=False, **kw)
        except PlanError:
            return None

    if inputs.get("vllm_version") is not None and failed.get("vllm_version_ok") is False:
        out.append({"set": {"vllm_version": failed["min_vllm_version"]},
                    "text": "Use vLLM %s or newer." % failed["min_vllm_version"]})
        return out
    # 1. a shorter context
    ctx, best = _largest_context(attempt, inputs["max_model_len"])
    if best:
        out.append({"set": {"max_model_len": ctx},
                    "text": "Lower max_model_len to %d (KV cache then %d tokens per replica, layout %s)."
                            % (ctx, best["kv_cache_tokens"], best["layout"])})
    # 2. fewer sequences in flight
    current = inputs.get("max_num_seqs") or DEFAULT_MAX_NUM_SEQS[inputs["objective"]]
    for s_ in (64, 32, 16, 8, 4, 1):
        if s_ < current:
            r = attempt(max_num_seqs=s_)
            if r and r["fits"]:
                out.append({"set": {"max_num_seqs": s_}, "text": "Lower max_num_seqs to %d." % s_})
                break
    # 3. more of the memory
    if inputs["accelerator"] == "gpu":
        for u in (0.92, 0.95):
            if u > inputs["gpu_memory_utilization"]:
                r = attempt(gpu_memory_utilization=u)
                if r and r["fits"]:
                    out.append({"set": {"gpu_memory_utilization": u},
                                "text": "Raise gpu_memory_utilization to %.2f (less headroom for other processes on "
                                        "the GPU)." % u})
                    break
    else:
        need = failed["kv_cache_bytes_per_token"] * inputs["max_model_len"] + failed["state_bytes_per_sequence"]
        out.append({"set": {"kv_cache_memory_bytes": need},
                    "text": "Give the CPU engine at least %d bytes of KV cache (--kv-cache-memory-bytes)." % need})
    # 4. when no single knob is enough: all of them at once
    if not out and inputs["accelerator"] == "gpu":
        for s_ in (16, 4, 1):
            ctx, best = _largest_context(attempt, inputs["max_model_len"], max_num_seqs=s_,
                                         gpu_memory_utilization=max(0.95, inputs["gpu_memory_utilization"]))
            if best:
                out.append({"set": {"max_model_len": ctx, "max_num_seqs": s_,
                                    "gpu_memory_utilization": best["gpu_memory_utilization"]},
                            "text": "Squeeze it in: max_model_len %d, max_num_seqs %d, gpu_memory_utilization %.2f "
                                    "(KV cache %d tokens; little room to spare)."
                                    % (ctx, s_, best["gpu_memory_utilization"], best["kv_cache_tokens"])})
                break
    # 5. a smaller checkpoint of the same family
    for alt in sorted(alternatives, key=lambda a: a["weights_bytes"], reverse=True):
        if alt["id"] == profile["id"] or alt["family"] != profile["family"] or \
                alt["weights_bytes"] >= profile["weights_bytes"]:
            continue
        r = attempt(p=alt)
        if r and r["fits"]:
            out.append({"set": {"model": alt["id"]},
                        "text": "Serve %s instead (%s weights): fits as %s with %d KV tokens per replica."
                                % (alt["id"], gib(alt["weights_bytes"]), r["layout"], r["kv_cache_tokens"])})
            break
    # 6. feature trade-offs that free memory
    feats = inputs.get("features") or {}
    if failed.get("features", {}).get("mtp"):
        r = attempt(features=dict(feats, mtp=False))
        if r and r["fits"]:
            out.append({"set": {"features": {"mtp": False}}, "text": "Turn MTP speculative decoding off."})
    if "text_only" in failed.get("features", {}) and not failed["features"]["text_only"]:
        r = attempt(features=dict(feats, text_only=True))
        if r and r["fits"]:
            out.append({"set": {"features": {"text_only": True}}, "text": "Serve text only (--language-model-only)."})
    # 7. more GPUs like these (NVLink-connected only if these have NVLink)
    if inputs["accelerator"] == "gpu" and gpu_facts and gpu_facts.get("gpus"):
        from ansible_collections.llmfleet.vllm.plugins.module_utils.topology import gpu_facts_from_spec
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
            try:
                r = plan(spec, profile, alternatives=None, _suggest=False, **kw)
            except PlanError:
                r = None
            if r and r["fits"]:
                out.append({"set": {"gpus": count},
                            "text": "Use %d GPUs like these (%s, %s): fits as %s."
                                    % (count, g0.get("name") or "same memory", "NVLink" if has_nv else "PCIe",
                                       r["layout"])})
                break
    return out


def _summary(p):
    """One row of the plan table (plan.yml) as a dict and a Markdown line."""
    if p["fits"]:
        conc = "%d x %d = %d" % (p["data_parallel_size"], p["max_concurrency_at_max_model_len"],
                                 p["max_concurrency_total"]) if p["data_parallel_size"] > 1 else \
            "%d" % p["max_concurrency_at_max_model_len"]
        kv = "{:,}".format(p["kv_cache_tokens"])
    else:
        conc = "-"
        kv = "-"
    row = {"model": p["model"], "fits": "yes" if p["fits"] else "no", "layout": p["layout"],
           "kv_cache_tokens": kv, "max_concurrency": "%s @ %d" % (conc, p["max_model_len"]),
           "max_num_seqs": p["max_num_seqs"] if p["fits"] else "-"}
    return row


def table_row(hardware, p):
    s = p["summary"]
    fits = s["fits"]
    if not p["fits"] and p.get("suggestions"):
        fits = "no: " + p["suggestions"][0]["text"]
    return "| %s | %s | %s | %s | %s | %s | %s |" % (hardware, s["model"], fits, s["layout"], s["kv_cache_tokens"],
                                                     s["max_concurrency"], s["max_num_seqs"])
