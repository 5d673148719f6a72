# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A model one host does not hold, planned across several hosts (planner.plan calls _plan_hosts): tensor parallel
inside each host over NVLink, pipeline parallel across the hosts (one stage per host, layers split as vLLM's
get_pp_indices splits them, multinode_plan.py), each stage sized on its own host; the stage with the fewest KV
blocks sets the capacity (docs/PLANNER.md, "More than one host")."""

from __future__ import annotations

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import multinode_plan as MN
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.layout_search import (
    _expert_parallel, _pack_nvlink, _pack_pcie, _usable_gpus, _worst_link, tp_allowed)
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.layout_search import TP_SIZES
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.features import feature_context, resolve_features
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.capacity import _memory_for, _weights_loaded, kv_layout
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.planner import _full_seqs, _round_conc, engine_args
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.reasons import _layout_reason
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.units import gib


def _host_memory(facts):
    return sum(int(g["memory_total_mib"]) for g in (facts or {}).get("gpus") or [])


def _host_tp_options(arch, profile, host_list, tp_forced, reasons):
    """TP sizes a stage may use on every host of the group: allowed by the model, inside one NVLink domain of each
    host (or over PCIe when a host has no NVLink group of that size), largest first."""
    topos = []
    for i, f in enumerate(host_list):
        notes = []
        topos.append(_usable_gpus(f, notes))
        reasons.extend("%s: %s" % (MN.host_label(f, i), n) for n in notes)
    smallest = min(len(t[2]) for t in topos)
    sizes = [t for t in TP_SIZES if t <= smallest and tp_allowed(arch, t)[0]]
    if tp_forced is not None:
        ok, why = tp_allowed(arch, tp_forced) if tp_forced >= 1 else (False, "it must be at least 1")
        if not ok or tp_forced not in TP_SIZES:
            raise PlanError("tensor_parallel_size %d is not possible for %s: %s" % (
                tp_forced, profile["id"], why or "not a size this planner lays out"))
        if tp_forced > smallest:
            raise PlanError("tensor_parallel_size %d needs %d usable GPUs on every host; the smallest host of the "
                            "group has %d" % (tp_forced, tp_forced, smallest))
        sizes = [tp_forced]
    out = []
    for t in sorted(sizes, reverse=True):
        groups, nvlink = [], True
        for gpus, links, usable, domains in topos:
            nv = _pack_nvlink(domains, usable, t) if t > 1 else [[usable[0]]]
            if nv:
                groups.append(nv[0])
            else:
                nvlink = False
                groups.append(_pack_pcie(gpus, links, usable, t)[0])
        out.append(dict(t=t, groups=groups, nvlink=nvlink, topos=topos))
    return out


def _eval_stages(arch, profile, host_list, opt, n, util, max_model_len, max_num_seqs, objective, opts,
                 batched_tokens):
    """Every pipeline stage of ``n`` hosts with TP opt['t']: its layers, weights, memory and KV pool.  The stage with
    the fewest blocks sets the capacity (vLLM unifies the KV cache configs to the minimum)."""
    t = opt["t"]
    total_w = _weights_loaded(profile, opts["text_only"], opts["mtp_on"])
    stages = []
    for s in range(n):
        start, end = MN.pp_indices(arch["num_layers"], s, n)
        sa = MN.stage_arch(arch, start, end)
        mtp = opts["mtp_layers"] if s == n - 1 else 0
        layout = kv_layout(sa, t, opts["kv_dtype_bytes"], mtp, opts["num_speculative_tokens"], opts["prefix_caching"],
                           hybrid_manager=opts.get("hybrid_manager"), vllm_version=opts.get("vllm_version"))
        w = MN.stage_weight_bytes(arch, start, end, n, total_w)
        gpus = opt["topos"][s][0]
        e = _memory_for(sa, profile, opt["groups"][s], gpus, t, util, max_model_len, max_num_seqs, objective, opts,
                        layout, batched_tokens, stage_weights=w)
        e.update(stage=s, host=MN.host_label(host_list[s], s), layers=[start, end], stage_weights_bytes=w,
                 gpus=list(opt["groups"][s]))
        stages.append(e)
    worst = min(stages, key=lambda e: (e["fits"], e["num_blocks"], e["available_bytes_per_gpu"]))
    return stages, worst


def _stage_row(e, t):
    return dict(node_rank=e["stage"], host=e["host"], layers=e["layers"], num_layers=e["layers"][1] - e["layers"][0],
                gpus=e["gpus"], weights_bytes=e["stage_weights_bytes"], weights_bytes_per_gpu=e["weights_bytes_per_gpu"],
                overhead_bytes_per_gpu=e["overhead_bytes_per_gpu"],
                available_kv_cache_memory_bytes=max(0, e["available_bytes_per_gpu"]),
                kv_cache_blocks=e["num_blocks"], fits=e["fits"], problem=e["problem"], tensor_parallel_size=t)


def _plan_hosts(arch, profile, objective, max_model_len, max_num_seqs, util, host_list, features, tp_forced,
                ep_forced, kv_cache_dtype, opts, hybrid, reasons, base, batched_tokens, replicas_forced, single):
    """A model one host does not hold, across the fewest hosts of ``host_list`` that do: TP inside each host over
    NVLink, PP across hosts (one stage per host).  Returns ``single`` (the one-host miss, with the reason) when
    even all the hosts do not hold it."""
    if replicas_forced is not None:
        raise PlanError("replicas %d: a plan across hosts is one instance (one vLLM engine over the hosts of the "
                        "group); drop replicas, or plan one host" % int(replicas_forced))
    reasons = list(reasons)
    options = _host_tp_options(arch, profile, host_list, tp_forced, reasons)
    if not options:
        raise PlanError("no tensor-parallel size of %s fits the smallest host of the group" % profile["id"])
    best, tried = _fewest_hosts(options, lambda n, opt: _eval_stages(
        arch, profile, host_list, opt, n, util, max_model_len, max_num_seqs, objective, opts, batched_tokens),
        len(host_list))
    if best is None:
        n, opt, stages, worst = max(tried, key=lambda x: (x[0], x[1]["t"]))
        single["reasons"].append(
            "Across all %d hosts (TP %d inside each host, PP %d across them) it does not fit either: stage %d (%s, "
            "layers %d-%d) %s." % (len(host_list), opt["t"], n, worst["stage"], worst["host"], worst["layers"][0],
                                   worst["layers"][1] - 1, worst["problem"] or "holds no full-context sequence"))
        single["hosts"] = len(host_list)
        return single
    n, opt, stages, e = best
    t = opt["t"]
    ep = _expert_parallel(arch, dict(t=t, nvlink=opt["nvlink"]), ep_forced, reasons)
    enabled, freasons = resolve_features(profile, objective, features,
                                         feature_context(arch, ep, opts.get("vllm_version")))
    reasons.extend(freasons)
    _explain_hosts(reasons, arch, profile, single, host_list, best, max_model_len)
    args = engine_args(e, t, util, max_model_len, ep, kv_cache_dtype, profile, enabled, pp=n)
    return _hosts_plan(base, best, len(host_list), dict(ep=ep, util=util, enabled=enabled, reasons=reasons,
                                                        args=args))


def _fewest_hosts(options, evaluate, host_count):
    """The first (hosts, TP option, stages, worst stage) that fits, from 2 hosts up, and every one tried."""
    tried = []
    for n in range(2, host_count + 1):
        for opt in options:
            stages, worst = evaluate(n, opt)
            tried.append((n, opt, stages, worst))
            if worst["fits"]:
                return tried[-1], tried
    return None, tried


def _hosts_plan(base, best, host_count, chosen):
    """The plan's keys for one instance over ``best``'s hosts (TP inside each, PP across them)."""
    n, opt, stages, e = best
    t, layout, ep, util = opt["t"], e["layout"], chosen["ep"], chosen["util"]
    full = _full_seqs(e)
    heaviest = max(stages, key=lambda s: s["weights_bytes_per_gpu"])
    out = dict(base)
    out.update(
        fits=e["fits"], nodes=n, hosts=host_count, tensor_parallel_size=t, pipeline_parallel_size=n,
        data_parallel_size=1, replicas=[list(opt["groups"][0])], enable_expert_parallel=ep,
        weights_bytes=e["weights_bytes"], weights_bytes_per_gpu=heaviest["weights_bytes_per_gpu"],
        overhead_bytes_per_gpu=e["overhead_bytes_per_gpu"], overhead_terms_per_gpu=e.get("overhead_terms") or {},
        available_kv_cache_memory_bytes=max(0, e["available_bytes_per_gpu"]),
        kv_cache_memory_bytes=sum(max(0, s["available_bytes_per_gpu"]) for s in stages) * t,
        kv_cache_tokens=e["kv_tokens"], kv_cache_tokens_total=e["kv_tokens"],
        kv_cache_blocks=e["num_blocks"], kv_cache_block_size=layout.block_size, kv_cache_layout=layout.to_dict(),
        max_num_seqs=e["max_num_seqs"], max_num_batched_tokens=e["max_num_batched_tokens"],
        gpu_memory_utilization=util, max_concurrency=_round_conc(e),
        max_concurrency_at_max_model_len=full, max_concurrency_total=full, full_context_sequences_total=full,
        interconnect=("NVLink" if opt["nvlink"] else _worst_link(opt["groups"][0], opt["topos"][0][1]))
        if t > 1 else None,
        unused_gpus=[i for i in opt["topos"][0][2] if i not in opt["groups"][0]],
        features=chosen["enabled"], reasons=chosen["reasons"], vllm_args=chosen["args"],
        stages=[_stage_row(s, t) for s in stages],
        layout="1 x TP%d x PP%d%s%s over %d hosts" % (
            t, n, " EP" if ep else "", "" if t == 1 else (" NVLink" if opt["nvlink"] else " PCIe"), n),
    )
    return out


def _explain_hosts(reasons, arch, profile, single, host_list, best, max_model_len):
    """The reasons of a plan across hosts: the split, each stage's memory, the hosts left over, the capacity."""
    n, opt, stages, e = best
    t = opt["t"]
    layout = e["layout"]
    parts = MN.pp_partitions(arch["num_layers"], n)
    reasons.append(
        "One host does not hold %s (%s): planned across %d hosts as one vLLM instance, tensor parallel %d inside "
        "each host%s and pipeline parallel %d across the hosts (one stage per host). vLLM splits the %d layers "
        "%s (get_pp_indices: the remainder goes to the stages before the last, which also holds the LM head)."
        % (profile["id"], single["reasons"][-1].rstrip(".") if single.get("reasons") else "does not fit", n, t,
           " over NVLink" if opt["nvlink"] else " over PCIe", n, arch["num_layers"], " + ".join(map(str, parts))))
    if not opt["nvlink"] and t > 1:
        reasons.append("Warning: a host of the group has no NVLink group of %d GPUs: its TP group crosses PCIe." % t)
    for s in stages:
        reasons.append(
            "Stage %d on %s: layers %d-%d, %s weights (%s per GPU); %s requested - %s weights - %s overhead = %s for "
            "the KV cache: %d blocks%s." % (
                s["stage"], s["host"], s["layers"][0], s["layers"][1] - 1, gib(s["stage_weights_bytes"]),
                gib(s["weights_bytes_per_gpu"]), gib(s["budget_bytes"]), gib(s["weights_bytes_per_gpu"]),
                gib(s["overhead_bytes_per_gpu"]), gib(max(0, s["available_bytes_per_gpu"])), s["num_blocks"],
                " (the fewest: it sets the capacity)" if s is e else ""))
    reasons.append("The overhead per GPU (non-torch, activation peak with the sampler, CUDA graphs) is counted on "
                   "every stage, though only the last stage samples: a little conservative for the others.")
    if len(host_list) > n:
        reasons.append("%d of the %d hosts are enough: the other %d stay out of this instance; %s"
                       % (n, len(host_list), len(host_list) - n,
                          "make them a second group (llmfleet_model_group) for a second instance."
                          if len(host_list) >= 2 * n else "they cannot form a second instance."))
    lr = _layout_reason(layout, t)
    if lr:
        reasons.append(lr)
    if e["fits"]:
        reasons.append("KV cache of the instance: %d blocks of %d tokens; a %d-token request takes %d, so vLLM will "
                       "log 'GPU KV cache size: %s tokens' and 'Maximum concurrency for %s tokens per request: "
                       "%.2fx'; max_num_seqs %d." % (e["num_blocks"], layout.block_size, max_model_len,
                                                     e["blocks_per_request"], "{:,}".format(e["kv_tokens"]),
                                                     "{:,}".format(max_model_len), e["max_concurrency"],
                                                     e["max_num_seqs"]))
        if e.get("seq_warning"):
            reasons.append("Warning: %s." % e["seq_warning"])
