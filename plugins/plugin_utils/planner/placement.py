# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Placement: all of one host's models on its GPUs in one plan, before anything starts (issue #39 item 2).

Pure functions, no I/O.  Every instance is planned by ``planner.plan`` (the memory arithmetic is the planner's, never
re-derived here) on the GPUs it is given, with the memory share it is given:

- Whole GPUs first, largest model first: an entry with ``gpus`` gets those (checked: on the host, free, a TP group
  inside one NVLink island when the host has one that size); an entry without gets the smallest tensor-parallel size
  that fits (its own ``tensor_parallel_size`` when set) on the free GPUs, grouped by the planner's layout search
  (NVLink islands first, then NUMA nodes over PCIe).
- Shares next: an entry with ``gpu_share`` (one GPU, TP 1) takes that fraction of a GPU's budget (its pinned GPU, a
  GPU already shared with room, else a free one).
- Packing last: a model that found no free GPU and fits one GPU (TP 1) goes beside another model, with the smallest
  share (in steps of SHARE_STEP) at which it fits; the tenant it joins is re-planned with the rest of the GPU.  The
  GPU chosen is the one whose incumbents lose least (a GPU already shared with room, then the one with the fewest
  weights on it).

A GPU's budget is its CUDA memory x ``budget`` (llmfleet_gpu_memory_utilization, 0.9 by default).  An instance alone
on its GPUs plans with the whole budget, as a one-model host does today.  Instances that share a GPU each plan with
gpu_memory_utilization = share x budget less CUDA_CONTEXT_HEADROOM_BYTES, so the shares of a GPU never exceed its
budget; every instance of a many-model host gets ``kv_cache_memory_bytes`` (vLLM's --kv-cache-memory-bytes, per
GPU) from its plan, because vLLM's start-up profiling counts the other processes' memory as its own.  Co-tenants
start one after another (``start_after``), each once the one before is healthy.

One entry that sets neither gpus nor gpu_share (the one-model shorthand) is planned exactly as a one-model host is
planned today: one planner call over the whole host.
"""

from __future__ import annotations

import math

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.model_list import instance_name
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import planner as P
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import capacity as CAP
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import lora, pooling
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.layout_search import TP_SIZES
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.units import GIB
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.topology import links_from_list

# Memory a vLLM process holds on each GPU outside its --gpu-memory-utilization share: the CUDA context and what the
# driver maps for it.  vllm #19125: one Qwen2.5-0.5B instance at utilisation 0.4 of an 8188 MiB GPU (3275 MiB) held
# 3578 MiB, ~300 MiB beyond its share; vllm #10533 / #55827: profiling counts the other tenants.  1 GiB per process per
# shared GPU is kept: several hundred MiB more than observed, for NCCL buffers and driver growth.
CUDA_CONTEXT_HEADROOM_BYTES = 1 * GIB
# Packing tries shares in these steps (the smallest that fits is taken).
SHARE_STEP = 0.05
# planner.plan refuses a gpu_memory_utilization below this.
MIN_UTILIZATION = 0.05


def sub_facts(gpu_facts, indexes):
    """gpu_facts of some of a host's GPUs, their own indexes kept (links and NVLink islands among them)."""
    keep = set(indexes)
    out = dict(gpu_facts)
    out["gpus"] = [g for g in gpu_facts["gpus"] if g["index"] in keep]
    out["gpu_count"] = len(out["gpus"])
    out["links"] = [link for link in gpu_facts.get("links") or [] if set(link["gpus"]) <= keep]
    domains = [[i for i in d if i in keep] for d in gpu_facts.get("nvlink_domains") or []]
    out["nvlink_domains"] = [d for d in domains if d]
    return out


class _Host:
    """The host being filled: its GPUs, the instances placed so far, and the tenants of each GPU."""

    def __init__(self, gpu_facts, inputs, budget, headroom):
        self.facts, self.inputs, self.budget, self.headroom = gpu_facts, inputs, float(budget), int(headroom)
        self.gpus = {g["index"]: g for g in gpu_facts["gpus"]}
        self.instances = []
        self.tenants = {i: [] for i in self.gpus}
        # The planner's last refusal (PlanError) of each model: part of the message when it cannot be placed.
        self.errors = {}

    def free(self):
        return [i for i in sorted(self.gpus) if not self.tenants[i]]

    def room(self, gpu):
        """The share of ``gpu``'s budget its tenants leave (1.0 for a free GPU)."""
        return 1.0 - sum(inst["share"] for inst in self.tenants[gpu])

    def utilization(self, gpus, share, shared):
        """gpu_memory_utilization of an instance with ``share`` of the budget on ``gpus`` (less the CUDA context
        headroom when it shares them)."""
        total = min(CAP.cuda_total_bytes(self.gpus[i]) for i in gpus)
        return share * self.budget - (self.headroom / float(total) if shared else 0.0)

    def plan(self, entry, gpus, tp, share=1.0, shared=False, alternatives=False):
        """planner.plan of one instance of ``entry`` on ``gpus`` (TP ``tp``) with ``share`` of their budget."""
        # rounded down: the shares of a GPU never add up to more than its budget
        util = math.floor(self.utilization(gpus, share, shared) * 10000) / 10000.0
        given = self.inputs[entry["name"]]
        if util < (0.001 if given.get("encoder") else MIN_UTILIZATION):   # the planner's floor; not the encoder's
            return None
        try:
            if given.get("encoder"):
                return self._encoder_plan(given, gpus, tp, util)
            plan = P.plan(sub_facts(self.facts, gpus), given["profile"], gpu_memory_utilization=util,
                          tensor_parallel_size=tp, replicas=1,
                          alternatives=given.get("alternatives") if alternatives else None,
                          _suggest=alternatives, **given.get("plan_args", {}))
        except PlanError as exc:
            self.errors[entry["name"]] = str(exc)
            return None
        return lora.plan_less_lora(given, plan, tp)

    def _encoder_plan(self, given, gpus, tp, util):
        total = min(CAP.cuda_total_bytes(self.gpus[i]) for i in gpus)
        return pooling.encoder_plan_for(given, total, list(gpus)[:tp], util)

    def add(self, entry, index, gpus, plan, share, shared):
        inst = dict(model=entry["name"], entry=entry, index=index, gpus=list(gpus), plan=plan, share=share,
                    shared=shared, instance=instance_name(entry, index))
        self.instances.append(inst)
        for i in gpus:
            self.tenants[i].append(inst)
        return inst


def _replicas(entry):
    return int(entry.get("replicas") or 1)


def _weights(host, entry):
    given = host.inputs[entry["name"]]
    return pooling.encoder_weights(given["encoder"]) if given.get("encoder") else given["profile"]["weights_bytes"]


def _island_problem(host, entry, group):
    """A pinned TP group that crosses NVLink islands while one island could hold it."""
    islands = host.facts.get("nvlink_domains") or []
    if len(group) < 2 or any(set(group) <= set(d) for d in islands):
        return None
    if any(len(d) >= len(group) for d in islands if len(d) > 1):
        return ("%s: gpus %s cross NVLink islands (%s); pin a TP group inside one island."
                % (entry["name"], group, "; ".join(",".join(map(str, d)) for d in islands)))
    links = links_from_list(host.facts.get("links"))
    numa = {host.gpus[i].get("numa_node") for i in group}
    if len(numa) > 1 and any(links.get((a, b)) == "SYS" for a in group for b in group if a != b):
        return ("%s: gpus %s span NUMA nodes (SYS links); pin a TP group inside one NUMA node." % (entry["name"], group))
    return None


def _place_pinned(host, entry, problems):
    gpus = entry["gpus"]
    outside = [g for g in gpus if g not in host.gpus]
    if outside:
        problems.append("%s: gpus %s are not on this host (GPUs %s)." % (entry["name"], outside, sorted(host.gpus)))
        return
    tp = int(entry.get("tensor_parallel_size") or max(1, len(gpus) // _replicas(entry)))
    for index in range(len(gpus) // tp):
        group = gpus[index * tp:(index + 1) * tp]
        taken = [g for g in group if host.tenants[g]]
        why = _island_problem(host, entry, group)
        if taken or why:
            problems.append(why or "%s: gpus %s are already taken by %s." % (
                entry["name"], taken, ", ".join(sorted({t["instance"] for g in taken for t in host.tenants[g]}))))
            continue
        plan = host.plan(entry, group, tp)
        if plan is None or not plan["fits"]:
            problems.append(_refusal(host, entry, "on its pinned gpus %s it does not fit%s" % (
                group, ": " + _why(plan) if plan else ""), None))
            continue
        host.add(entry, index, group, plan, 1.0, False)


def _why(plan):
    return " ".join(r for r in plan["reasons"] if r.startswith("Does not fit")) or plan["reasons"][-1]


def _tp_sizes(entry):
    forced = int(entry.get("tensor_parallel_size") or 0)
    return [forced] if forced else list(TP_SIZES)


def _place_whole(host, entry):
    """Whole free GPUs for each replica, the smallest TP that fits; returns the replica indexes left unplaced."""
    left = []
    for index in range(_replicas(entry)):
        placed = False
        for tp in _tp_sizes(entry):
            free = host.free()
            if tp > len(free):
                break
            plan = host.plan(entry, free, tp)
            if plan is None or not plan["fits"]:
                continue
            # the planner groups free GPUs over PCIe when no island has tp of them free: not on a host with islands
            apart = _island_problem(host, entry, plan["replicas"][0])
            if apart:
                host.errors[entry["name"]] = "the free GPUs %s make no TP%d group inside one island (%s)" % (
                    free, tp, apart)
                continue
            host.add(entry, index, plan["replicas"][0], plan, 1.0, False)
            placed = True
            break
        if not placed:
            left.append(index)
    return left


def _min_share(host, entry, gpu):
    """The smallest share (a multiple of SHARE_STEP) of ``gpu``'s budget at which one TP1 instance fits beside
    others, and its plan; (None, None) when a whole budget does not hold it (fits is monotonic in the share)."""
    lo, hi = 0, int(round(1 / SHARE_STEP))
    best = host.plan(entry, [gpu], 1, 1.0, True)
    if best is None or not best["fits"]:
        return None, None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        plan = host.plan(entry, [gpu], 1, mid * SHARE_STEP, True)
        if plan is not None and plan["fits"]:
            hi, best = mid, plan
        else:
            lo = mid
    return round(hi * SHARE_STEP, 4), best


def _pack_candidates(host):
    """GPUs to pack onto, best first: already shared with room, then the ones whose tenants hold the fewest weights
    per GPU (a small model gives up less than a large one), higher indexes first among equals."""
    def key(gpu):
        tenants = host.tenants[gpu]
        shared = any(t["shared"] for t in tenants)
        load = sum(t["plan"]["weights_bytes_per_gpu"] for t in tenants)
        return (0 if shared else 1, load, -gpu)
    return sorted(host.gpus, key=key)


def _replan_incumbents(host, gpu, need):
    """Make ``need`` of ``gpu``'s budget free: the largest tenant whose share the user did not set gives up what is
    missing and is re-planned with the rest; None when none still fits, else {id: (instance, new share, plan)}."""
    deficit = need - host.room(gpu)
    givers = sorted((t for t in host.tenants[gpu] if t["entry"].get("gpu_share") is None), key=lambda t: -t["share"])
    for inst in givers:
        rest = round(inst["share"] - deficit, 4)
        if rest < SHARE_STEP:
            continue
        plan = host.plan(inst["entry"], inst["gpus"], len(inst["gpus"]), rest, True)
        if plan is not None and plan["fits"]:
            return {id(inst): (inst, rest, plan)}
    return None


def _pack(host, entry, index, share=None):
    """One TP1 instance beside others: on the first candidate GPU where it and its re-planned incumbents fit."""
    if int(entry.get("tensor_parallel_size") or 1) != 1:
        return None
    for gpu in _pack_candidates(host):
        need, plan = (share, None) if share else _min_share(host, entry, gpu)
        if need is None:
            return None
        if host.room(gpu) >= need - 1e-9:
            plan = plan or host.plan(entry, [gpu], 1, need, True)
            changes = {}
        else:
            changes = _replan_incumbents(host, gpu, need)
            plan = plan or host.plan(entry, [gpu], 1, need, True)
        if changes is None or plan is None or not plan["fits"]:
            continue
        for inst, rest, new in changes.values():
            inst.update(share=rest, plan=new, shared=True)
        return host.add(entry, index, [gpu], plan, need, True)
    return None


def _place_share(host, entry, problems):
    """An entry with gpu_share: each replica on its pinned GPU, a shared GPU with room, or a free GPU."""
    share = float(entry["gpu_share"])
    for index in range(_replicas(entry)):
        options = entry.get("gpus") or sorted(host.gpus, key=lambda g: (0 if host.tenants[g] else 1, g))
        for gpu in options:
            if host.room(gpu) < share - 1e-9 or any(not t["shared"] for t in host.tenants[gpu]):
                continue
            plan = host.plan(entry, [gpu], 1, share, True)
            if plan is not None and plan["fits"]:
                host.add(entry, index, [gpu], plan, share, True)
                break
        else:
            problems.append(_refusal(host, entry, "no GPU%s has %s of its budget left for it, or it does not fit in "
                                     "that share" % (" of %s" % entry["gpus"] if entry.get("gpus") else "", share),
                                     index, share))


def _refusal(host, entry, why, index, room=None):
    """Which model does not fit, by how much, and what would.  ``room``: the share it may have (its gpu_share), else
    the most any GPU has left."""
    best_room = max([host.room(g) for g in host.gpus] or [0.0]) if room is None else room
    need, _plan = _min_share(host, entry, min(host.gpus)) if int(entry.get("tensor_parallel_size") or 1) == 1 \
        else (None, None)
    gpu0 = host.gpus[min(host.gpus)]
    budget = CAP.cuda_total_bytes(gpu0) * host.budget
    if need is not None:
        has = "the most any GPU has left is" if room is None else "its gpu_share is"
        short = "as a co-tenant of one GPU it needs %.1f GiB (%.2f of a GPU's budget); %s %.1f GiB: short by " \
                "%.1f GiB" % (need * budget / GIB, need, has, best_room * budget / GIB,
                              max(0.0, need - best_room) * budget / GIB)
    else:
        tp = int(entry.get("tensor_parallel_size") or 0) or _smallest_tp(host, entry)
        free = host.free()
        if tp and len(free) >= tp:
            short = "it needs %d whole GPUs of one NVLink island (or NUMA node) per replica, and the free GPUs %s make " \
                    "no such group" % (tp, free)
        else:
            short = "it needs %s whole GPUs per replica and %d %s free: short by %s" % (
                tp or "more", len(free), "is" if len(free) == 1 else "are",
                "%d GPU%s" % (tp - len(free), "" if tp - len(free) == 1 else "s") if tp else "a larger host")
    said = host.errors.get(entry["name"])
    text = "%s%s does not fit beside the other models: %s; %s%s." % (
        entry["name"], "" if index is None else " (replica %d)" % index, why, short, " (%s)" % said if said else "")
    return text + " What would fit: " + " / ".join(_suggestions(host, entry, best_room, index)) + "."


def _smallest_tp(host, entry):
    """The TP size one replica of ``entry`` takes alone on an empty host like this one (0: none holds it)."""
    alone = _Host(host.facts, host.inputs, host.budget, host.headroom)
    _place_whole(alone, dict(entry, replicas=1, gpus=None))
    return len(alone.instances[0]["gpus"]) if alone.instances else 0


def _suggestions(host, entry, room, index):
    out = []
    if room >= MIN_UTILIZATION and int(entry.get("tensor_parallel_size") or 1) == 1:
        gpu = max(host.gpus, key=host.room)
        plan = host.plan(entry, [gpu], 1, room, True, alternatives=True)
        out += [s["text"] for s in (plan or {}).get("suggestions") or []][:3]
    if index:
        out.append("replicas: %d (that many fit beside the others)" % index)
    variants = [(entry, "")]
    if entry.get("tensor_parallel_size"):
        variants.append((dict(entry, tensor_parallel_size=0), " with tensor_parallel_size unset"))
    for variant, label in variants:
        alone = _Host(host.facts, host.inputs, host.budget, host.headroom)
        if not _place_whole(alone, dict(variant, replicas=1, gpus=None)):
            out.append("a host with room: alone on a host like this one it fits as %s%s"
                       % (alone.instances[0]["plan"]["layout"], label))
            break
    return out or ["none found: serve it on a larger host"]


def _order(host, entries):
    """Pinned whole-GPU entries, then whole-GPU entries largest first, then shares (list order)."""
    pinned = [e for e in entries if e.get("gpus") and e.get("gpu_share") is None]
    whole = sorted((e for e in entries if not e.get("gpus") and e.get("gpu_share") is None),
                   key=lambda e: (-int(e.get("tensor_parallel_size") or 0), -_weights(host, e)))
    shares = [e for e in entries if e.get("gpu_share") is not None]
    return pinned, whole, shares


def place(gpu_facts, entries, inputs, budget=P.DEFAULT_UTILIZATION, headroom=CUDA_CONTEXT_HEADROOM_BYTES):
    """Place ``entries`` (model_list's normalised entries) on one host's ``gpu_facts``.  ``inputs``: per entry name,
    {profile, plan_args (planner.plan's other inputs: max_model_len, features, objective, ...), alternatives}.
    Returns {fits, instances, gpus, start_order, problems}."""
    host = _Host(gpu_facts, inputs, budget, headroom)
    problems = []
    if len(entries) == 1 and not entries[0].get("gpus") and entries[0].get("gpu_share") is None \
            and not inputs[entries[0]["name"]].get("encoder"):
        return _one_model(host, entries[0])
    pinned, whole, shares = _order(host, entries)
    for entry in pinned:
        _place_pinned(host, entry, problems)
    unplaced = [(entry, index) for entry in whole for index in _place_whole(host, entry)]
    for entry in shares:
        _place_share(host, entry, problems)
    for entry, index in unplaced:
        if _pack(host, entry, index) is None:
            free = host.free()
            problems.append(_refusal(host, entry, "%s%s" % (
                "the free GPUs %s do not hold it" % free if free else "no whole GPU is left for it",
                "" if int(entry.get("tensor_parallel_size") or 1) == 1 else
                " (tensor_parallel_size %d cannot share a GPU)" % entry["tensor_parallel_size"]), index))
    return _result(host, problems)


def _one_model(host, entry):
    """Today's one-model plan: one planner call over the whole host."""
    given = host.inputs[entry["name"]]
    try:
        plan = P.plan(host.facts, given["profile"], gpu_memory_utilization=host.budget,
                      tensor_parallel_size=entry.get("tensor_parallel_size") or None,
                      replicas=entry.get("replicas") or None, alternatives=given.get("alternatives"),
                      **given.get("plan_args", {}))
    except PlanError as exc:
        return _result(host, ["%s does not fit: %s." % (entry["name"], exc)], one_model=True)
    # vLLM allocates the adapters' LoRA slots before it sizes the KV cache, alone on a GPU as beside others
    plan = lora.plan_less_lora(given, plan, plan.get("tensor_parallel_size") or 1)
    problems = [] if plan["fits"] else ["%s does not fit: %s What would fit: %s." % (
        entry["name"], _why(plan), " / ".join(s["text"] for s in plan["suggestions"]) or "none found")]
    for index, group in enumerate(plan["replicas"] if plan["fits"] else []):
        host.add(entry, index, group, plan, 1.0, False)
    return _result(host, problems, one_model=True)


def _instance_out(inst, after, one_model):
    plan = inst["plan"]
    args = dict(plan["vllm_args"])
    # an encoder-only pooling model keeps no KV cache: nothing to size
    if not one_model and not plan.get("encoder_only"):
        args["kv-cache-memory-bytes"] = plan["available_kv_cache_memory_bytes"]
    return dict(model=inst["model"], instance=inst["instance"], gpus=inst["gpus"],
                tensor_parallel_size=len(inst["gpus"]), share=round(inst["share"], 4), shared=inst["shared"],
                gpu_memory_utilization=plan["gpu_memory_utilization"],
                kv_cache_memory_bytes=plan["available_kv_cache_memory_bytes"],
                weights_bytes_per_gpu=plan["weights_bytes_per_gpu"], kv_cache_tokens=plan["kv_cache_tokens"],
                max_concurrency=plan["max_concurrency"], max_num_seqs=plan["max_num_seqs"],
                max_model_len=plan["max_model_len"], runner=inst["entry"].get("runner", "generate"),
                start_after=after, vllm_args=args, lora_memory_bytes=plan.get("lora_memory_bytes", 0))


def _result(host, problems, one_model=False):
    instances, started = [], []
    for inst in host.instances:
        after = [o["instance"] for o in started if set(o["gpus"]) & set(inst["gpus"])]
        instances.append(_instance_out(inst, after[-1:], one_model))
        started.append(inst)
    gpus = []
    for i in sorted(host.gpus):
        budget = int(CAP.cuda_total_bytes(host.gpus[i]) * host.budget)
        tenants = [dict(instance=t["instance"], model=t["model"], share=round(t["share"], 4),
                        bytes=int(t["share"] * budget)) for t in host.tenants[i]]
        gpus.append(dict(index=i, name=host.gpus[i].get("name"), budget_bytes=budget, tenants=tenants,
                         share_used=round(sum(t["share"] for t in tenants), 4)))
    return dict(fits=not problems, instances=instances, gpus=gpus, problems=problems,
                start_order=[i["instance"] for i in instances], budget=host.budget,
                cuda_context_headroom_bytes=host.headroom)


PLACEMENT_HEADER = ("| hardware | GPUs | model | instance | share | gpu_memory_utilization | --kv-cache-memory-bytes "
                    "| KV cache (tokens) | max concurrency @ context | starts after |\n"
                    "|---|---|---|---|---|---|---|---|---|---|")


def placement_rows(hardware, result):
    """The placement as Markdown table rows (PLACEMENT_HEADER), one per instance; then one row per refusal."""
    rows = []
    for i in result["instances"]:
        rows.append("| %s | %s (TP%d) | %s%s | %s | %s | %.4f | %s (%.2f GiB) | %s | %.2f @ %d | %s |" % (
            hardware, ",".join(map(str, i["gpus"])), i["tensor_parallel_size"], i["model"],
            " (pooling)" if i["runner"] == "pooling" else "", i["instance"],
            "%.2f" % i["share"] if i["shared"] else "whole", i["gpu_memory_utilization"],
            "{:,}".format(i["kv_cache_memory_bytes"]), i["kv_cache_memory_bytes"] / float(GIB),
            "{:,}".format(i["kv_cache_tokens"]), i["max_concurrency"], i["max_model_len"],
            ", ".join(i["start_after"]) or "-"))
    for text in result["problems"]:
        rows.append("| %s | - | refused | - | - | - | - | - | - | %s |" % (hardware, text.replace("|", "/")))
    return rows
