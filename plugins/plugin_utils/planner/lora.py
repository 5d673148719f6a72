# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPU memory of LoRA serving (issue #39 item 6); pure functions.

With --enable-lora vLLM wraps every linear layer it supports and allocates, before its memory profile, the stacked
LoRA weights of --max-loras slots at --max-lora-rank, whatever the adapters target (vllm/lora/layers/*:
create_lora_weights; the profile run loads dummy adapters of that rank into every slot):
  A (max_loras, rank, input) and B (max_loras, output, rank) per linear, in the model's dtype;
  column-parallel layers (qkv_proj, gate_up_proj) split B's output over the TP group, row-parallel ones (o_proj,
  down_proj) split A's input; fused MoE experts (FusedMoEWithLoRA) carry w13 and w2 pairs per expert.
That memory is taken before the KV cache: lora_memory_bytes() is subtracted from what a plan gives the KV cache.
And the CUDA graphs: with adapters vLLM 0.22 captures every graph twice, without and with active LoRA
(compilation_config.cudagraph_specialize_lora, on by default: the dispatcher's LoRA cases [0, max_loras + 1]), and
its estimate counts them all: Llama-3.1-8B, 1 x H100, --max-loras 1 captured PIECEWISE=102, FULL=70 instead of 51 and
35, and estimated 0.86 GiB against 0.50 GiB without adapters (tests/fixtures/gpu/many-models-h100-0.22.0-2026-12-05,
the LoRA set).  lora_cudagraph_bytes() plans the second set's driver memory, the per-graph bound of engine_memory.
"""

from __future__ import annotations

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import engine_memory as EM
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError

# vLLM's --max-lora-rank default (vllm/config/lora.py, 0.22-0.32).
DEFAULT_MAX_LORA_RANK = 16


def _dims(config):
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    try:
        h, layers, heads = int(text["hidden_size"]), int(text["num_hidden_layers"]), int(text["num_attention_heads"])
    except (KeyError, TypeError, ValueError):
        raise PlanError("LoRA memory needs hidden_size, num_hidden_layers and num_attention_heads in config.json")
    head_dim = int(text.get("head_dim") or h // heads)
    experts = int(text.get("num_experts") or text.get("n_routed_experts") or 0)
    return dict(h=h, layers=layers, q=heads * head_dim, kv=int(text.get("num_key_value_heads") or heads) * head_dim,
                inter=int(text.get("intermediate_size") or 4 * h), experts=experts,
                moe_inter=int(text.get("moe_intermediate_size") or 0),
                shared=int(text.get("shared_expert_intermediate_size") or 0))


def lora_slot_parts(config, rank, tp=1):
    """Elements of one LoRA slot at ``rank`` on one GPU of a TP group of ``tp``, over every layer: ``attention``
    (q, k, v, o) and ``mlp`` (the dense MLP's gate, up, down, or a MoE's experts and shared expert)."""
    d = _dims(config)
    h = d["h"]
    attention = 3 * rank * h + (d["q"] + 2 * d["kv"]) * rank // tp + rank * d["q"] // tp + h * rank
    if d["experts"] and d["moe_inter"]:
        mlp = d["experts"] * (2 * rank * h + 2 * d["moe_inter"] * rank // tp + rank * d["moe_inter"] // tp + h * rank)
        if d["shared"]:
            mlp += 2 * rank * h + 2 * d["shared"] * rank // tp + rank * d["shared"] // tp + h * rank
    else:
        mlp = 2 * rank * h + 2 * d["inter"] * rank // tp + rank * d["inter"] // tp + h * rank
    return {"attention": d["layers"] * attention, "mlp": d["layers"] * mlp}


def lora_slot_elements(config, rank, tp=1):
    """Elements of one LoRA slot (every linear layer vLLM wraps), see lora_slot_parts."""
    return sum(lora_slot_parts(config, rank, tp).values())


def lora_memory_bytes(config, max_loras, max_lora_rank=DEFAULT_MAX_LORA_RANK, dtype_bytes=2, tp=1):
    """Bytes vLLM allocates on each GPU for --max-loras slots at --max-lora-rank (module docstring)."""
    if int(max_loras) < 1 or int(max_lora_rank) < 1:
        raise PlanError("max_loras and max_lora_rank must be at least 1, got %r and %r" % (max_loras, max_lora_rank))
    return int(max_loras) * lora_slot_elements(config, int(max_lora_rank), tp) * int(dtype_bytes)


def profile_config(profile):
    """The config.json sizes of a planner profile (its ``config``, else its normalised ``arch``)."""
    if profile.get("config"):
        return profile["config"]
    arch = profile["arch"]
    sizes = arch.get("moe_sizes") or {}
    return {"hidden_size": arch["hidden_size"], "num_hidden_layers": arch["num_layers"],
            "num_attention_heads": arch["num_attention_heads"], "num_key_value_heads": arch.get("num_kv_heads"),
            "head_dim": arch.get("head_dim"), "intermediate_size": arch.get("intermediate_size"),
            "num_experts": (arch.get("moe") or {}).get("num_experts"), "moe_intermediate_size":
                sizes.get("intermediate_size"), "shared_expert_intermediate_size": sizes.get("shared_intermediate_size")}


def planned_lora(adapters):
    """The LoRA slots an entry's ``adapters`` are planned with before they are fetched: {max_loras, max_lora_rank},
    the rank each adapter declares (``rank``) or vLLM's default; None without adapters.  The serve stage refuses an
    adapter whose own rank is above it (serve_list.entry_adapters): its slots would eat KV cache the plan promised."""
    if not adapters:
        return None
    ranks = [int((a.get("rank") if isinstance(a, dict) else None) or DEFAULT_MAX_LORA_RANK) for a in adapters]
    return {"max_loras": len(adapters), "max_lora_rank": max(ranks)}


def with_lora(plan, lora_bytes):
    """``plan`` with ``lora_bytes`` per GPU taken from its KV cache (vLLM allocates the LoRA slots before it sizes the
    KV cache): the KV bytes, tokens and concurrency shrink in proportion; it no longer fits when what is left does
    not hold one request of max_model_len."""
    out = dict(plan, lora_memory_bytes=int(lora_bytes))
    kv = int(plan["available_kv_cache_memory_bytes"])
    left = kv - int(lora_bytes)
    scale = max(left, 0) / float(kv) if kv > 0 else 0.0
    out.update(available_kv_cache_memory_bytes=max(left, 0), kv_cache_tokens=int(plan["kv_cache_tokens"] * scale),
               max_concurrency=round(plan["max_concurrency"] * scale, 2))
    if plan["fits"] and out["kv_cache_tokens"] < plan["max_model_len"]:
        out["fits"] = False
        out["reasons"] = list(plan.get("reasons") or []) + [
            "Does not fit: the LoRA slots take %d bytes per GPU, leaving %d bytes of KV cache (%d tokens), less than "
            "one request of %d tokens; lower max_loras or the adapters' rank." % (
                lora_bytes, out["available_kv_cache_memory_bytes"], out["kv_cache_tokens"], plan["max_model_len"])]
    return out


def lora_cudagraph_bytes(arch, plan, vllm_version=None):
    """The driver memory of the CUDA graphs vLLM captures a second time for active LoRA (module docstring): one graph
    per capture size and mode at engine_memory's per-graph bound; 0 where the plan captures no graphs."""
    args = plan.get("vllm_args") or {}
    seqs, batched = int(plan["max_num_seqs"]), args.get("max-num-batched-tokens")
    if not EM.cudagraph_bytes(arch, seqs, bool(args.get("enforce-eager")), batched, vllm_version):
        return 0
    piecewise = EM.capture_sizes(seqs, batched, arch.get("architecture"))
    full = [s for s in piecewise if s <= seqs]
    return (len(piecewise) + len(full)) * EM.cudagraph_bytes_per_graph(arch)


def plan_less_lora(given, plan, tp):
    """A placement instance's plan less the LoRA slots of its entry's adapters (placement inputs' ``lora``:
    {max_loras, max_lora_rank}); the plan unchanged without adapters or when it does not fit anyway."""
    if not given.get("lora") or not plan.get("fits"):
        return plan
    profile = given["profile"]
    taken = lora_memory_bytes(profile_config(profile), dtype_bytes=profile["arch"]["dtype_bytes"], tp=tp,
                              **given["lora"])
    graphs = lora_cudagraph_bytes(profile["arch"], plan, (given.get("plan_args") or {}).get("vllm_version"))
    return with_lora(plan, taken + graphs)
