# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Capacity planner: which GPU layout serves a model, how much KV cache it gets, and the vLLM flags.

Pure functions, no I/O.  Inputs are ``gpu_facts`` (topology.py) and a profile (model_profiles.py).

The capacity is vLLM's own arithmetic (vLLM 0.22.0, measured on an H200; the same formulas in 0.28.0, the
release the collection's image pins; docs/PLANNER.md names the source files), so every number can be read
beside vLLM's boot log line by line:

The memory profile of one GPU and the KV cache capacity it leaves: capacity.py (with the formulas).
"""

from __future__ import annotations

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.capacity import (
    _capacity_eval, _memory_for, kv_bytes_per_token, kv_layout, state_bytes_per_sequence)
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import multinode_plan as MN
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import suggestions as plan_suggestions
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.layout_search import (
    _candidates, _check_forced, _choose_layout, _expert_parallel, _fmt_num, _usable_gpus, _worst_link)
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.model_profiles import DTYPE_BYTES, OBJECTIVES
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.units import MIB
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.vllm_versions import version_at_least
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.reasons import _layout_reason, _memory_reasons
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.features import (
    _eager, _prefix_caching_on, _speculative_tokens, feature_args, feature_context, prefix_caching_reason,
    resolve_features)

DEFAULT_UTILIZATION = 0.9

TABLE_HEADER = ("| hardware | model | fits | layout | KV cache (tokens/replica) | max concurrency @ context "
                "| max_num_seqs |\n|---|---|---|---|---|---|---|")


def plan(gpu_facts, profile, objective="throughput", max_model_len=None, max_num_seqs=None,
         gpu_memory_utilization=None, accelerator="gpu", kv_cache_memory_bytes=None, features=None,
         tensor_parallel_size=None, enable_expert_parallel=None, kv_cache_dtype="auto", vllm_version=None,
         max_num_batched_tokens=None, alternatives=None, replicas=None, hosts=None, hybrid_manager=None,
         _suggest=True):
    """Plan a vLLM deployment.  See the module docstring for the memory model; returns the ``plan`` dict.

    ``gpu_facts`` is one host's gpu_facts, with ``hosts`` identical hosts (default 1), or a list of several hosts'
    gpu_facts (node-rank order).  A model that fits one host is planned on one host (``nodes`` 1); one that does
    not is planned across the fewest hosts that hold it: TP inside a host, PP across hosts (multinode_plan.py).
    ``hybrid_manager``: vLLM's hybrid KV cache manager on / off (None: vLLM's default, kv_specs)."""
    arch = profile["arch"]
    max_model_len, kv_dtype_bytes, util = _checked_inputs(arch, objective, max_model_len, max_num_seqs, replicas,
                                                          kv_cache_dtype, gpu_memory_utilization, accelerator)
    hybrid = arch["linear_attention_layers"] > 0
    kv_full = kv_bytes_per_token(arch, kv_dtype_bytes)
    state_full = state_bytes_per_sequence(arch)
    reasons = _kv_reasons(arch, kv_dtype_bytes, kv_full, hybrid, kv_cache_dtype)

    base = _base(profile, dict(objective=objective, accelerator=accelerator, max_model_len=max_model_len,
                               kv_cache_dtype=kv_cache_dtype, kv_cache_bytes_per_token=kv_full,
                               state_bytes_per_sequence=state_full), vllm_version, reasons)

    # Features that change memory or the KV layout (MTP, text-only, prefix caching, eager) are settled first;
    # expert-parallel-dependent ones later.
    opts = _layout_options(profile, objective, features, kv_dtype_bytes, vllm_version)
    opts.update(hybrid_manager=hybrid_manager, vllm_version=vllm_version)
    reasons.insert(0, prefix_caching_reason(profile, objective, features, opts["prefix_caching"], arch, vllm_version))

    if accelerator == "cpu":
        result = _plan_cpu(arch, profile, objective, max_model_len, max_num_seqs, kv_cache_memory_bytes,
                           opts, features, hybrid, reasons, base)
    elif accelerator == "gpu":
        result = _plan_on_gpus(MN.host_facts(gpu_facts, hosts), arch, profile, objective, max_model_len, max_num_seqs,
                               util, features, tensor_parallel_size, enable_expert_parallel, kv_cache_dtype, opts,
                               hybrid, reasons, base, max_num_batched_tokens, replicas)
    else:
        raise PlanError("accelerator must be gpu or cpu, got %r" % accelerator)
    if vllm_version is not None and not base["vllm_version_ok"]:
        result["fits"] = False
    result["suggestions"] = []
    if not result["fits"] and _suggest:
        result["suggestions"] = plan_suggestions.suggest(gpu_facts, profile, dict(
            objective=objective, max_model_len=max_model_len, max_num_seqs=max_num_seqs,
            gpu_memory_utilization=util, accelerator=accelerator, kv_cache_memory_bytes=kv_cache_memory_bytes,
            features=features, tensor_parallel_size=tensor_parallel_size,
            enable_expert_parallel=enable_expert_parallel, kv_cache_dtype=kv_cache_dtype,
            vllm_version=vllm_version, max_num_batched_tokens=max_num_batched_tokens, replicas=replicas,
            hosts=hosts, hybrid_manager=hybrid_manager), result, alternatives or [])
    result["summary"] = _summary(result)
    return result


def _base(profile, keys, vllm_version, reasons):
    """The plan's keys every layout shares; a vLLM older than the profile's minimum is said in the reasons."""
    base = dict(model=profile["id"], profile=profile["id"], family=profile["family"], variant=profile["variant"],
                quantization=profile.get("quantization"), min_vllm_version=str(profile["serving"]["min_vllm_version"]),
                **keys)
    if vllm_version is not None:
        ok = version_at_least(vllm_version, base["min_vllm_version"])
        base["vllm_version_ok"] = ok
        if not ok:
            reasons.append("vLLM %s is older than %s, the first release that serves %s: pin a newer image."
                           % (vllm_version, base["min_vllm_version"], profile["id"]))
    return base


def _plan_on_gpus(host_list, arch, profile, objective, max_model_len, max_num_seqs, util, features, tp_forced,
                  ep_forced, kv_cache_dtype, opts, hybrid, reasons, base, batched_tokens, replicas):
    """One host's layout (the smallest host of a group); across the group's hosts when one host does not hold it."""
    # hosts.py imports this module: imported here, once this module is whole.
    from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.hosts import _host_memory, _plan_hosts
    one = min(host_list, key=_host_memory) if len(host_list) > 1 else host_list[0]
    result = _plan_gpu(arch, profile, objective, max_model_len, max_num_seqs, util, one, features, tp_forced,
                       ep_forced, kv_cache_dtype, opts, hybrid, list(reasons), base, batched_tokens, replicas)
    result.update(nodes=1, pipeline_parallel_size=1, hosts=len(host_list), stages=None)
    if len(host_list) == 1:
        return result
    if result["fits"]:
        result["reasons"].append(
            "One host holds the model, so no host group is needed: each of the %d hosts serves its own %s "
            "behind the load balancer (leave llmfleet_model_group unset); pipeline parallelism across hosts "
            "would only add inter-host traffic." % (len(host_list), result["layout"]))
        return result
    return _plan_hosts(arch, profile, objective, max_model_len, max_num_seqs, util, host_list, features, tp_forced,
                       ep_forced, kv_cache_dtype, opts, hybrid, reasons, base, batched_tokens, replicas, result)


def _checked_inputs(arch, objective, max_model_len, max_num_seqs, replicas, kv_cache_dtype, gpu_memory_utilization,
                    accelerator):
    """(max_model_len, KV dtype bytes, gpu_memory_utilization) of a plan's inputs; PlanError for a bad one."""
    if objective not in OBJECTIVES:
        raise PlanError("objective must be one of %s, got %r" % (", ".join(OBJECTIVES), objective))
    if max_model_len is None:
        max_model_len = arch["max_position_embeddings"]
    max_model_len = int(max_model_len)
    if max_model_len < 1:
        raise PlanError("max_model_len must be a positive number of tokens")
    if max_num_seqs is not None and int(max_num_seqs) < 1:
        raise PlanError("max_num_seqs must be at least 1")
    if replicas is not None and int(replicas) < 1:
        raise PlanError("replicas must be at least 1")
    if kv_cache_dtype not in ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "float16"):
        raise PlanError("kv_cache_dtype must be auto, fp8, fp8_e4m3, fp8_e5m2, bfloat16 or float16")
    kv_dtype_bytes = arch["dtype_bytes"] if kv_cache_dtype == "auto" else DTYPE_BYTES[kv_cache_dtype]
    util = DEFAULT_UTILIZATION if gpu_memory_utilization is None else float(gpu_memory_utilization)
    if accelerator == "gpu" and not 0.05 <= util <= 0.99:
        raise PlanError("gpu_memory_utilization must be between 0.05 and 0.99, got %s" % util)
    if max_model_len > arch["max_position_embeddings"]:
        raise PlanError("max_model_len %d exceeds the model's context of %d tokens (max_position_embeddings); "
                        "use at most %d" % (max_model_len, arch["max_position_embeddings"],
                                            arch["max_position_embeddings"]))
    return max_model_len, kv_dtype_bytes, util


def _kv_reasons(arch, kv_dtype_bytes, kv_full, hybrid, kv_cache_dtype):
    """The plan's first reasons: the KV cache per token, and the FP8 KV caveat."""
    reasons = []
    if arch.get("mla"):
        reasons.append("KV cache per token (MLA): %d layers x (kv_lora_rank %d + rope %d) x %d bytes = %d bytes, one "
                       "latent per token, the same on every GPU of a TP group." % (
                           arch["full_attention_layers"], arch["mla"]["kv_lora_rank"],
                           arch["mla"]["qk_rope_head_dim"], kv_dtype_bytes, kv_full))
    else:
        reasons.append(
            "KV cache per token: 2 (K, V) x %d full-attention layers x %d KV heads x %d head_dim x %d bytes = %d bytes"
            " (%.1f KiB)%s." % (arch["full_attention_layers"], arch["num_kv_heads"], arch["head_dim"], kv_dtype_bytes,
                                kv_full, kv_full / 1024.0,
                                "; the %d linear-attention layers keep no per-token KV" % arch["linear_attention_layers"]
                                if hybrid else ""))
    if kv_dtype_bytes < arch["dtype_bytes"]:
        reasons.append("KV cache dtype %s halves KV memory but FP8 KV without calibrated scales has degraded "
                       "output on this model family; keep auto unless you measured quality." % kv_cache_dtype)
    return reasons


def _layout_options(profile, objective, features, kv_dtype_bytes, vllm_version=None):
    """The feature-dependent inputs of the memory model and the KV layout (MTP, text-only, eager, prefix
    caching), settled before expert parallelism is known."""
    arch = profile["arch"]
    context = feature_context(arch, True, vllm_version)
    pre, _unused = resolve_features(profile, objective, features, context)
    mtp_on = pre.get("mtp", False)
    return dict(mtp_on=mtp_on, text_only=pre.get("text_only", False), enforce_eager=_eager(profile, pre),
                prefix_caching=_prefix_caching_on(profile, pre, context["vllm_defaults"]["prefix_caching"]),
                num_speculative_tokens=_speculative_tokens(profile, pre) if mtp_on else 0,
                mtp_layers=arch["mtp_layers"] if mtp_on else 0, kv_dtype_bytes=kv_dtype_bytes)


def layout_for(profile, tensor_parallel_size=1, features=None, kv_cache_dtype="auto", objective="throughput",
               hybrid_manager=None, vllm_version=None, block_size=None):
    """The KV layout (kv_layout) of a profile served with these settings, without any memory model: what the
    boot-log replay needs to turn vLLM's logged available memory into blocks and concurrency, and the CPU
    suggestion its pool size (``block_size`` "cpu")."""
    arch = profile["arch"]
    kvb = arch["dtype_bytes"] if kv_cache_dtype == "auto" else DTYPE_BYTES[kv_cache_dtype]
    o = _layout_options(profile, objective, features, kvb, vllm_version)
    return kv_layout(arch, tensor_parallel_size, kvb, o["mtp_layers"], o["num_speculative_tokens"],
                     o["prefix_caching"], block_size=block_size, hybrid_manager=hybrid_manager,
                     vllm_version=vllm_version)


def _plan_cpu(arch, profile, objective, max_model_len, max_num_seqs, kv_budget, opts, features, hybrid, reasons,
              base):
    if not kv_budget or int(kv_budget) <= 0:
        raise PlanError("accelerator cpu needs kv_cache_memory_bytes (the vLLM CPU engine sizes its KV cache "
                        "from --kv-cache-memory-bytes), e.g. 67108864 for 64 MiB")
    kv_budget = int(kv_budget)
    enabled, freasons = resolve_features(profile, objective, features,
                                         feature_context(arch, False, opts.get("vllm_version")))
    reasons.extend(freasons)
    layout = kv_layout(arch, 1, opts["kv_dtype_bytes"], opts["mtp_layers"], opts["num_speculative_tokens"],
                       opts["prefix_caching"], block_size="cpu", hybrid_manager=opts.get("hybrid_manager"),
                       vllm_version=opts.get("vllm_version"))
    kv_tok = kv_bytes_per_token(arch, opts["kv_dtype_bytes"], extra_layers=opts["mtp_layers"])
    r = _capacity_eval(kv_budget, layout, max_model_len, max_num_seqs, objective,
                       dict(weights_bytes=profile["weights_bytes"], weights_bytes_per_gpu=0,
                            overhead_bytes_per_gpu=0, budget_bytes=kv_budget, memory_bytes=None))
    lr = _layout_reason(layout, 1)
    if lr:
        reasons.append(lr)
    reasons.append("CPU engine: the KV cache budget is --kv-cache-memory-bytes %d (%.1f MiB) = %d blocks of %d "
                   "tokens = %d tokens at %d bytes per token (max concurrency %.2fx at %d tokens)."
                   % (kv_budget, kv_budget / MIB, r["num_blocks"], layout.block_size, r["kv_tokens"], kv_tok,
                      r["max_concurrency"], max_model_len))
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
        kv_cache_memory_bytes=kv_budget, available_kv_cache_memory_bytes=kv_budget,
        kv_cache_tokens=r["kv_tokens"], kv_cache_tokens_total=r["kv_tokens"],
        kv_cache_blocks=r["num_blocks"], kv_cache_block_size=layout.block_size, kv_cache_layout=layout.to_dict(),
        max_num_seqs=r["max_num_seqs"], max_num_batched_tokens=None, gpu_memory_utilization=None,
        max_concurrency=_round_conc(r), max_concurrency_at_max_model_len=_full_seqs(r),
        max_concurrency_total=_full_seqs(r), full_context_sequences_total=_full_seqs(r),
        interconnect=None, unused_gpus=[], features=enabled, reasons=reasons, vllm_args=args,
        layout="CPU engine (1 replica)", nodes=1, pipeline_parallel_size=1, hosts=1, stages=None)
    return out


def _round_conc(r):
    return round(r["max_concurrency"], 2) if r["fits"] else 0.0


def _full_seqs(r):
    """Whole full-context sequences one replica runs at once: vLLM's concurrency, bounded by max_num_seqs."""
    if not r["fits"]:
        return 0
    return min(r["max_num_seqs"], int(r["max_concurrency"]))


def _plan_gpu(arch, profile, objective, max_model_len, max_num_seqs, util, gpu_facts, features, tp_forced,
              ep_forced, kv_cache_dtype, opts, hybrid, reasons, base, batched_tokens=None, replicas_forced=None):
    gpus, links, usable, domains = _usable_gpus(gpu_facts, reasons)
    n = len(usable)
    _check_forced(arch, profile, tp_forced, replicas_forced, n)

    def evaluate(t, group):
        layout = kv_layout(arch, t, opts["kv_dtype_bytes"], opts["mtp_layers"], opts["num_speculative_tokens"],
                           opts["prefix_caching"], hybrid_manager=opts.get("hybrid_manager"),
                           vllm_version=opts.get("vllm_version"))
        return _memory_for(arch, profile, group, gpus, t, util, max_model_len, max_num_seqs, objective, opts,
                           layout, batched_tokens)

    candidates = _candidates(arch, profile, (gpus, links, usable, domains), tp_forced, replicas_forced, evaluate)

    chosen = _choose_layout(candidates, arch, objective, tp_forced, replicas_forced, links, n, reasons)

    t = chosen["t"]
    e = chosen["eval"]
    groups = chosen["groups"]
    layout = e["layout"]
    ep = _expert_parallel(arch, chosen, ep_forced, reasons)

    enabled, freasons = resolve_features(profile, objective, features,
                                         feature_context(arch, ep, opts.get("vllm_version")))
    reasons.extend(freasons)

    used = sorted(i for g in groups for i in g)
    unused = [i for i in usable if i not in used]
    _gpu_layout_reasons(groups, unused, replicas_forced, t, reasons)
    _memory_reasons(e, profile, opts, util, t, hybrid, [gpus[i] for i in used], reasons)
    _capacity_reasons(e, layout, max_model_len, reasons)

    args = engine_args(e, t, util, max_model_len, ep, kv_cache_dtype, profile, enabled)
    full = _full_seqs(e)
    out = dict(base)
    out.update(
        fits=e["fits"], tensor_parallel_size=t, data_parallel_size=len(groups), replicas=groups,
        enable_expert_parallel=ep, weights_bytes=e["weights_bytes"],
        weights_bytes_per_gpu=e["weights_bytes_per_gpu"], overhead_bytes_per_gpu=e["overhead_bytes_per_gpu"],
        overhead_terms_per_gpu=e.get("overhead_terms") or {},
        available_kv_cache_memory_bytes=max(0, e["available_bytes_per_gpu"]),
        kv_cache_memory_bytes=max(0, e["available_bytes_per_gpu"]) * t,
        kv_cache_tokens=e["kv_tokens"], kv_cache_tokens_total=e["kv_tokens"] * len(groups),
        kv_cache_blocks=e["num_blocks"], kv_cache_block_size=layout.block_size, kv_cache_layout=layout.to_dict(),
        max_num_seqs=e["max_num_seqs"], max_num_batched_tokens=e["max_num_batched_tokens"],
        gpu_memory_utilization=util, max_concurrency=_round_conc(e),
        max_concurrency_at_max_model_len=full, max_concurrency_total=full * len(groups),
        full_context_sequences_total=full * len(groups),
        interconnect=("NVLink" if chosen["nvlink"] else _worst_link(groups[0], links)) if t > 1 else None,
        unused_gpus=unused, features=enabled, reasons=reasons, vllm_args=args,
        layout="%d x TP%d%s%s" % (len(groups), t, " EP" if ep else "",
                                  "" if t == 1 else (" NVLink" if chosen["nvlink"] else " PCIe")),
    )
    return out


def _gpu_layout_reasons(groups, unused, replicas_forced, t, reasons):
    """Why this many replicas, and why some GPUs stay unused."""
    if len(groups) > 1:
        reasons.append("%d replicas (GPUs %s): the serve role runs one vLLM container per replica behind the load "
                       "balancer; vLLM-internal data parallelism is not planned, because independent replicas "
                       "share nothing and need no cross-GPU traffic." % (
                           len(groups), "; ".join(",".join(map(str, g)) for g in groups)))
    if unused:
        reasons.append("GPU %s stay unused: %s." % (
            ", ".join(map(str, unused)), "the user set %d replicas" % replicas_forced if replicas_forced is not None
            else "they do not make a further group of %d NVLink-connected GPUs" % t))


def _capacity_reasons(e, layout, max_model_len, reasons):
    """What vLLM will log for the KV cache, or why the layout does not fit."""
    if e["fits"]:
        reasons.append("KV cache per replica: %d blocks of %d tokens; a %d-token request takes %d, so vLLM will log "
                       "'GPU KV cache size: %s tokens' and 'Maximum concurrency for %s tokens per request: %.2fx'; "
                       "max_num_seqs %d." % (e["num_blocks"], layout.block_size, max_model_len,
                                             e["blocks_per_request"], "{:,}".format(e["kv_tokens"]),
                                             "{:,}".format(max_model_len), e["max_concurrency"], e["max_num_seqs"]))
        if e.get("seq_warning"):
            reasons.append("Warning: %s." % e["seq_warning"])
    else:
        reasons.append("Does not fit: %s." % e["problem"])


def engine_args(e, t, util, max_model_len, ep, kv_cache_dtype, profile, enabled, pp=None):
    """The vLLM flags of a planned replica (``e``: its capacity evaluation), features included."""
    args = {
        "tensor-parallel-size": t,
        "gpu-memory-utilization": util,
        "max-model-len": max_model_len,
        "max-num-seqs": e["max_num_seqs"] or None,
        "max-num-batched-tokens": e["max_num_batched_tokens"],
        "enable-expert-parallel": True if ep else None,
        "kv-cache-dtype": None if kv_cache_dtype == "auto" else kv_cache_dtype,
    }
    if pp:
        args = dict(list(args.items())[:1] + [("pipeline-parallel-size", pp)] + list(args.items())[1:])
    args.update(feature_args(profile, enabled))
    return args


def _summary(p):
    """One row of the plan table (plan.yml) as a dict.  Concurrency is vLLM's 'Maximum concurrency' per replica
    (and its sum over replicas), KV cache its 'GPU KV cache size' of one replica."""
    if p["fits"]:
        n = p["data_parallel_size"]
        conc = "%d x %.2f = %s" % (n, p["max_concurrency"], _fmt_num(n * p["max_concurrency"])) if n > 1 else \
            "%.2f" % p["max_concurrency"]
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
