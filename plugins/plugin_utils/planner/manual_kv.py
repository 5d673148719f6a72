# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A plan for a model whose architecture or layer types the planner does not understand, with the KV cache sized
by hand; pure functions, no I/O.

The planner refuses such a model (model_arch.py: it will not guess a KV cache).  The way out it names is to size
vLLM's KV cache by hand: ``kv_cache_memory_bytes`` (vLLM's ``--kv-cache-memory-bytes``, "Size of KV Cache per GPU
in bytes ... ignores gpu_memory_utilization", vLLM 0.22.0 and 0.32.0 ``vllm serve --help``).  With it, the model
is planned from what is still known for sure:

* the weights: the safetensors index's ``metadata.total_size`` (or ``weights_bytes`` given by the user), split
  over the tensor-parallel group;
* the KV cache: the given bytes per GPU (per CPU engine), passed to vLLM as they are;
* the context: ``max_model_len``, else config.json's ``max_position_embeddings``.

What is NOT known is said in the plan, never silently: ``verified: false``, ``not_understood`` (the planner's own
refusal) and ``warnings``: the KV tokens and the concurrency are vLLM's to report (the plan leaves them empty, so the
health gate compares only the KV memory), activation and CUDA-graph memory are not planned, tensor parallelism is
not checked against the heads, and the features beyond prefix caching / eager cannot be planned.
"""

from __future__ import annotations

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.capacity import cuda_total_bytes

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.layout_search import TP_SIZES
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.units import GIB
# Features an unverified plan can still render (vLLM flags every model has); anything a profile adds needs a model
# the planner understands.
GENERIC_FEATURES = {
    "prefix_caching": ("enable-prefix-caching", True, False),
    "enforce_eager": ("enforce-eager", True, None),
}


def _text(config):
    text = config.get("text_config")
    return text if isinstance(text, dict) else config


def context_length(config):
    """config.json's max_position_embeddings (the text model's, for a multimodal wrapper); None when absent."""
    for d in (_text(config), config):
        for key in ("max_position_embeddings", "max_sequence_length", "seq_length", "n_positions"):
            if isinstance(d.get(key), int) and d[key] > 0:
                return d[key]
    return None


def _features(features, name):
    """The vLLM flags of the generic features the user set explicitly; the rest stay vLLM's own defaults."""
    args = {}
    for feat, value in sorted((features or {}).items()):
        if value is None:
            continue
        if feat not in GENERIC_FEATURES:
            raise PlanError("feature %s cannot be planned for %s, whose architecture the planner does not "
                            "understand (only %s: vLLM flags every model has); drop it from features"
                            % (feat, name, ", ".join(sorted(GENERIC_FEATURES))))
        flag, on, off = GENERIC_FEATURES[feat]
        v = on if value else off
        if v is not None:
            args[flag] = v
    return args


def _gpu_budget(gpu, util):
    """What vLLM may use on one GPU: the memory CUDA can use (the planner's cuda_total_bytes: nvidia-smi's total
    less the driver's reserve), times gpu_memory_utilization."""
    return int(cuda_total_bytes(gpu) * util)


def _gpu_layout(gpu_facts, weights, kv_bytes, util, tp_forced, replicas_forced, reasons):
    """(tp, groups, budget_per_gpu, fits): the smallest TP size whose weight share and KV bytes fit one GPU's
    budget (or the TP size given), and as many replicas of it as the GPUs hold (or the count given)."""
    gpus = [g for g in (gpu_facts or {}).get("gpus") or [] if (g.get("mig_mode") or "").lower() != "enabled"]
    if not gpus:
        raise PlanError("gpu_facts lists no usable GPU: run llmfleet.vllm.gpu_facts on a GPU host first, describe "
                        "the hardware, or plan with accelerator: cpu")
    idx = sorted(g["index"] for g in gpus)
    budget = min(_gpu_budget(g, util) for g in gpus)
    sizes = [tp_forced] if tp_forced else [t for t in TP_SIZES if t <= len(idx)]
    if tp_forced and tp_forced > len(idx):
        raise PlanError("tensor_parallel_size %d needs %d GPUs; this host has %d usable"
                        % (tp_forced, tp_forced, len(idx)))
    tp = next((t for t in sizes if -(-weights // t) + kv_bytes <= budget), sizes[-1])
    fits = -(-weights // tp) + kv_bytes <= budget
    n = replicas_forced or max(1, len(idx) // tp)
    if n * tp > len(idx):
        raise PlanError("replicas %d of TP%d need %d GPUs; this host has %d usable" % (n, tp, n * tp, len(idx)))
    groups = [idx[i * tp:(i + 1) * tp] for i in range(n)]
    reasons.append("Memory per GPU: %.2f GiB of weights (1/%d of %.2f GiB) + %.2f GiB of KV cache (set by hand) "
                   "against %.2f GiB (gpu_memory_utilization %.2f of the GPU less the driver's reserve)%s."
                   % (-(-weights // tp) / GIB, tp, weights / GIB, kv_bytes / GIB, budget / GIB, util,
                      "" if fits else ": does not fit"))
    return tp, groups, fits


def plan_by_hand(gpu_facts, name, config, weights_bytes, kv_cache_memory_bytes, not_understood,
                 accelerator="gpu", max_model_len=None, max_num_seqs=None, gpu_memory_utilization=0.9,
                 tensor_parallel_size=None, replicas=None, features=None, kv_cache_dtype="auto",
                 weights_source="model.safetensors.index.json"):
    """The plan dict (the keys planner.plan returns that the roles read) of a model the planner does not
    understand, with its KV cache set by hand.  ``not_understood``: the planner's refusal (what it did not
    understand); it becomes the plan's first warning."""
    kv, weights = _sizes_given(name, weights_bytes, kv_cache_memory_bytes, not_understood)
    max_model_len = _context(name, config, max_model_len)
    warnings = [
        "not verified by the planner: %s" % not_understood,
        "the KV cache is the %d bytes set by hand (kv_cache_memory_bytes); how many tokens and requests it holds is "
        "vLLM's to say (its boot log: 'KV cache size' and 'Maximum concurrency')" % kv,
        "activation and CUDA-graph memory are not planned for this architecture: vLLM refuses to start when the "
        "weights, the KV cache set by hand and its activations do not fit",
    ]
    reasons = ["%s: the planner does not understand this model; it is planned with the KV cache set by hand (%d "
               "bytes = %.2f GiB per %s) and %.2f GiB of weights (%s), not verified." % (
                   name, kv, kv / GIB, "GPU" if accelerator == "gpu" else "CPU engine", weights / GIB,
                   weights_source)]
    args = {"kv-cache-memory-bytes": kv, "max-model-len": max_model_len,
            "max-num-seqs": int(max_num_seqs) if max_num_seqs else None,
            "kv-cache-dtype": None if kv_cache_dtype == "auto" else kv_cache_dtype}
    args.update(_features(features, name))
    tp, groups, fits, util = _layout(gpu_facts, accelerator, weights, kv, gpu_memory_utilization,
                                     tensor_parallel_size, replicas, reasons)
    if accelerator == "gpu":
        args["tensor-parallel-size"] = tp
        if tp > 1:
            warnings.append("tensor parallel size %d is not checked against the model's heads and experts" % tp)
    if not fits:
        reasons.append("Does not fit: the weights' share and the KV cache set by hand exceed one GPU; lower "
                       "kv_cache_memory_bytes or use more GPUs per replica (tensor_parallel_size).")
    plan = _plan_dict(name, config, accelerator, warnings, reasons, args, features, kv_cache_dtype, max_num_seqs,
                      dict(max_model_len=max_model_len, fits=fits, tp=tp, groups=groups, util=util, kv=kv,
                           weights=weights, not_understood=not_understood))
    plan["summary"] = {"model": name, "fits": ("yes" if fits else "no") + " (not verified)", "layout": plan["layout"],
                       "kv_cache_tokens": "? (%.2f GiB set by hand)" % (kv / GIB),
                       "max_concurrency": "? @ %d" % max_model_len,
                       "max_num_seqs": plan["max_num_seqs"] if plan["max_num_seqs"] else "vLLM's default"}
    return plan


def _sizes_given(name, weights_bytes, kv_cache_memory_bytes, not_understood):
    """(KV bytes, weight bytes), both given and positive, or the PlanError that says which is missing."""
    if not kv_cache_memory_bytes or int(kv_cache_memory_bytes) <= 0:
        raise PlanError("%s; or set kv_cache_memory_bytes to plan it with the KV cache sized by hand" % not_understood)
    if not weights_bytes or int(weights_bytes) <= 0:
        raise PlanError("%s is planned with its KV cache set by hand, but its weight size is unknown: the hub has "
                        "no model.safetensors.index.json for it; give weights_bytes" % name)
    return int(kv_cache_memory_bytes), int(weights_bytes)


def _context(name, config, max_model_len):
    """max_model_len as asked, else the model's own context; never past the model's context."""
    native = context_length(config)
    if max_model_len is None:
        if native is None:
            raise PlanError("%s: config.json has no max_position_embeddings; give max_model_len" % name)
        max_model_len = native
    max_model_len = int(max_model_len)
    if native is not None and max_model_len > native:
        raise PlanError("max_model_len %d exceeds the model's context of %d tokens (max_position_embeddings); use "
                        "at most %d" % (max_model_len, native, native))
    return max_model_len


def _layout(gpu_facts, accelerator, weights, kv, gpu_memory_utilization, tensor_parallel_size, replicas, reasons):
    """(tp, replica GPU groups, fits, utilisation) on a CPU engine (one TP1 replica) or on the host's GPUs."""
    if accelerator == "cpu":
        if tensor_parallel_size not in (None, 1) or replicas not in (None, 1):
            raise PlanError("the CPU engine runs one TP1 replica")
        return 1, [[]], True, None
    if accelerator != "gpu":
        raise PlanError("accelerator must be gpu or cpu, got %r" % accelerator)
    util = 0.9 if gpu_memory_utilization is None else float(gpu_memory_utilization)
    tp, groups, fits = _gpu_layout(gpu_facts, weights, kv, util, tensor_parallel_size, replicas, reasons)
    return tp, groups, fits, util


def _plan_dict(name, config, accelerator, warnings, reasons, args, features, kv_cache_dtype, max_num_seqs, got):
    """The plan's keys, with what a plan by hand cannot know left empty."""
    tp, groups, kv, weights = got["tp"], got["groups"], got["kv"], got["weights"]
    archs = list(config.get("architectures") or _text(config).get("architectures") or [])
    return dict(
        model=name, profile=None, family=name, variant=None, quantization=None, objective="throughput",
        accelerator=accelerator, verified=False, not_understood=got["not_understood"],
        warnings=warnings, architectures=archs, max_model_len=got["max_model_len"], kv_cache_dtype=kv_cache_dtype,
        kv_cache_bytes_per_token=None, state_bytes_per_sequence=None, min_vllm_version="0.0.0",
        fits=got["fits"], tensor_parallel_size=tp, data_parallel_size=len(groups), replicas=groups,
        enable_expert_parallel=False, weights_bytes=weights, weights_bytes_per_gpu=-(-weights // tp),
        overhead_bytes_per_gpu=None, kv_cache_memory_bytes=kv * tp, available_kv_cache_memory_bytes=kv,
        kv_cache_tokens=None, kv_cache_tokens_total=None, kv_cache_blocks=None, kv_cache_block_size=None,
        kv_cache_layout=None, max_num_seqs=int(max_num_seqs) if max_num_seqs else None,
        max_num_batched_tokens=None, gpu_memory_utilization=got["util"], max_concurrency=None,
        max_concurrency_at_max_model_len=None, max_concurrency_total=None, full_context_sequences_total=None,
        interconnect=None, unused_gpus=[], features={k: bool(v) for k, v in (features or {}).items() if v is not None},
        reasons=reasons + ["Warning: %s." % w for w in warnings], vllm_args=args, suggestions=[],
        layout="%s (not verified: KV cache set by hand)" % (
            "CPU engine (1 replica)" if accelerator == "cpu" else "%d x TP%d" % (len(groups), tp)),
    )
