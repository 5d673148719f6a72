# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Layout search: which TP sizes the model allows, how GPUs are grouped into replicas (inside NVLink domains
first), how each candidate layout is scored for the objective, and expert parallelism.  Pure functions; the memory
of each candidate is evaluated by the caller (planner.py)."""

from __future__ import annotations

import math

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.topology import link_rank, links_from_list, nvlink_domains

# The tensor-parallel sizes a layout may use.
TP_SIZES = (1, 2, 4, 8, 16)
# Layout scoring (objective throughput): full-context sequences served, discounted for the all-reduce traffic
# of a TP group, per doubling of the TP size.  An assumption, not a measurement: NVLink TP costs some of each
# decode step; a TP group over PCIe costs a lot (a 2-GPU PCIe TP deployment of this MoE was measured slower
# than one GPU: the seed's benchmark).
TP_EFFICIENCY = {"nvlink": 0.8, "pcie": 0.5}


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
    mamba = arch.get("mamba2")
    if mamba and mamba["num_heads"] % t:
        return False, "TP %d does not divide the %d Mamba2 heads" % (t, mamba["num_heads"])
    return True, ""


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


def _score(c):
    """Throughput score of a candidate layout: full-context sequences over all replicas, discounted for TP."""
    e = c["eval"]
    if not e["fits"]:
        return 0.0
    served = len(c["groups"]) * min(e["max_concurrency"], e["max_num_seqs"])
    return served * _tp_factor(c)


def _tp_factor(c):
    return TP_EFFICIENCY["nvlink" if c["nvlink"] else "pcie"] ** int(math.log2(c["t"]))


def _describe(c):
    e = c["eval"]
    n = len(c["groups"])
    name = "%d x TP%d%s" % (n, c["t"], "" if c["t"] == 1 else (" NVLink" if c["nvlink"] else " PCIe"))
    if not e["fits"]:
        return "%s does not fit (%s)" % (name, e["problem"])
    return "%s holds %s full-context sequences (%d x %.2f, max_num_seqs %d)" % (
        name, _fmt_num(n * min(e["max_concurrency"], e["max_num_seqs"])), n, e["max_concurrency"],
        e["max_num_seqs"])


def _fmt_num(x):
    return ("%.1f" % x).rstrip("0").rstrip(".")


def _usable_gpus(gpu_facts, reasons):
    """The GPUs a plan may use (MIG-enabled ones are left out), their links and NVLink domains."""
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
    return gpus, links, usable, domains


def _check_forced(arch, profile, tp_forced, replicas_forced, n):
    """Say why a forced TP size or replica count is impossible before looking for layouts: a size that does not
    divide the heads (e.g. 3) is never a candidate, and "needs 3 GPUs" would send the user after the wrong fix."""
    if tp_forced is not None:
        ok, why = tp_allowed(arch, tp_forced) if tp_forced >= 1 else (False, "it must be at least 1")
        if not ok:
            raise PlanError("tensor_parallel_size %d is not possible for %s: %s; use one of %s" % (
                tp_forced, profile["id"], why,
                ", ".join(str(t) for t in TP_SIZES if t <= max(n, 1) and tp_allowed(arch, t)[0]) or "none"))
        if tp_forced not in TP_SIZES:
            raise PlanError("tensor_parallel_size %d is not a size this planner lays out (%s)"
                            % (tp_forced, ", ".join(map(str, TP_SIZES))))
    if replicas_forced is not None and int(replicas_forced) > n:
        raise PlanError("replicas %d needs at least %d usable GPUs; this host has %d"
                        % (replicas_forced, replicas_forced, n))


def _candidates(arch, profile, topo, tp_forced, replicas_forced, evaluate):
    """Every TP size the model allows on these GPUs: its replica groups (packed inside NVLink domains when they
    hold one, else over PCIe), and the worst group's evaluation (``evaluate(t, group, layout)``)."""
    gpus, links, usable, domains = topo
    candidates = []
    for t in TP_SIZES:
        if t > len(usable):
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
        if replicas_forced is not None:
            if len(groups) < replicas_forced:
                continue
            groups = groups[:int(replicas_forced)]
        evals = [evaluate(t, g) for g in groups]
        worst = min(evals, key=lambda e: (e["fits"], e["max_concurrency"]))
        candidates.append(dict(t=t, groups=groups, nvlink=nvlink, eval=worst))
    return candidates


def _expert_parallel(arch, chosen, ep_forced, reasons):
    """Expert parallelism: only for MoE models with a TP group of 2+ GPUs inside one NVLink domain."""
    t = chosen["t"]
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
    return ep


def _choose_for_throughput(candidates, pool, replicas_forced, links, reasons):
    """Objective throughput: the layout that serves the most full-context sequences, discounted for TP traffic."""
    # Score every layout by what it serves (full-context sequences over all replicas), not by replica count.
    chosen = max(pool, key=lambda c: (_score(c), -c["t"]))
    others = [c for c in candidates if c is not chosen]
    reasons.append(
        "Objective throughput: each layout is scored by the full-context sequences it serves at once (replicas "
        "x min(vLLM's max concurrency, max_num_seqs)), x %.1f per doubling of a TP group over NVLink and x %.1f "
        "over PCIe (all-reduce traffic on every layer; an estimate). Chosen: %s. Others: %s." % (
            TP_EFFICIENCY["nvlink"], TP_EFFICIENCY["pcie"], _describe(chosen),
            "; ".join(_describe(c) for c in others) or "none"))
    if replicas_forced is not None:
        reasons.append("The number of replicas (%d) was set by the user." % replicas_forced)
    tp2 = [c for c in candidates if c["t"] == 2 and c["eval"]["fits"]]
    if tp2 and chosen["t"] != 2:
        def held(c):
            return len(c["groups"]) * min(c["eval"]["max_concurrency"], c["eval"]["max_num_seqs"])
        if held(chosen) < held(tp2[0]):
            reasons.append("%s holds fewer full-context sequences than %s, but scores higher: the TP2 layout "
                           "holds only %.0f%% more sequences and would pay the all-reduce discount (x %.2f) "
                           "on every step." % (_describe(chosen).split(" holds")[0],
                                               _describe(tp2[0]).split(" holds")[0],
                                               100.0 * (held(tp2[0]) / held(chosen) - 1), _tp_factor(tp2[0])))
    if not chosen["nvlink"] and chosen["t"] > 1:
        reasons.append(
            "No NVLink domain holds a replica: the model needs TP %d, so the TP group crosses PCIe (%s). "
            "Expect it to be slower per GPU than a single larger GPU: every layer all-reduces over PCIe, and "
            "a 2-GPU PCIe TP deployment of a MoE model has been measured slower than one GPU."
            % (chosen["t"], _worst_link(chosen["groups"][0], links)))
    return chosen


def _choose_layout(candidates, arch, objective, tp_forced, replicas_forced, links, n, reasons):
    """The candidate the plan takes (forced by the user, the best for the objective, or the closest miss)."""
    if tp_forced is not None and not any(c["t"] == tp_forced for c in candidates):
        if replicas_forced is not None and tp_forced <= n:
            raise PlanError("%d replicas of TP%d need %d GPUs in groups of %d; this host has %d usable GPUs and "
                            "makes %d such groups" % (replicas_forced, tp_forced, replicas_forced * tp_forced,
                                                      tp_forced, n, n // tp_forced))
        raise PlanError("tensor_parallel_size %d needs %d usable GPUs; this host has %d" % (tp_forced, tp_forced, n))
    if not candidates:
        raise PlanError("replicas %d: no TP size makes that many groups of GPUs on this host" % replicas_forced)

    fit_nv = [c for c in candidates if c["nvlink"] and c["eval"]["fits"]]
    fit_any = [c for c in candidates if c["eval"]["fits"]]
    if tp_forced is not None:
        chosen = next(c for c in candidates if c["t"] == tp_forced)
        if not chosen["nvlink"] and fit_nv:
            raise PlanError("tensor_parallel_size %d would put a TP group across GPUs without NVLink between them, "
                            "while TP %d fits inside one NVLink domain; leave tensor_parallel_size unset"
                            % (tp_forced, fit_nv[0]["t"]))
        reasons.append("Tensor parallel size %d was set by the user%s." % (
            tp_forced, " (and %d replicas)" % replicas_forced if replicas_forced is not None else ""))
    elif objective == "throughput" and fit_any:
        chosen = _choose_for_throughput(candidates, fit_nv or fit_any, replicas_forced, links, reasons)
    elif fit_nv:
        t_min = fit_nv[0]["t"]
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
        chosen = max(candidates, key=lambda c: (c["eval"]["max_concurrency"], c["eval"]["available_bytes_per_gpu"]))
    return chosen
