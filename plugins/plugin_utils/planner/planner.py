# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Capacity planner: which GPU layout serves a model, how much KV cache it gets, and the vLLM flags.

Pure functions, no I/O.  Inputs are ``gpu_facts`` (topology.py) and a profile (model_profiles.py).

The capacity is vLLM's own arithmetic (vLLM 0.22.0, measured on an H200; the same formulas in 0.28.0, the
release the collection's image pins; docs/PLANNER.md names the source files), so every number can be read
beside vLLM's boot log line by line:

Memory profile, per GPU of a tensor-parallel (TP) group of t GPUs (vLLM's ``determine_available_memory``):

  requested   = CUDA total memory x gpu_memory_utilization   (CUDA total = nvidia-smi total - driver reserve)
  available   = requested - weights / t - non-torch memory - activation peak - CUDA-graph estimate
                ("Available KV cache memory" in the log)
  non-torch   = NON_TORCH_BYTES (+ NON_TORCH_TP_BYTES when t > 1: NCCL and custom all-reduce buffers)
  activation  = the profile run's peak from the model's own sizes (engine_memory.activation_bytes: the dummy
                forward over max_num_batched_tokens, the dummy sampler over max_num_seqs rows, the MoE workspace)
  CUDA graphs = vLLM's CUDA-graph memory estimate (engine_memory.cudagraph_bytes; 0 with enforce-eager)

KV cache pool (vLLM's ``_align_hybrid_block_size``, ``_get_kv_cache_groups_uniform_page_size``,
``get_kv_cache_config_from_groups``, ``get_max_concurrency_for_kv_cache_config``):

  page/token  = 2 (K, V) x KV heads on this GPU (KV heads / t, at least 1) x head_dim x KV dtype bytes
  state page  = per linear-attention (Gated DeltaNet) layer: conv (2 key_dim + value_dim) / t x
                (kernel - 1 + speculative tokens) x dtype + SSM value_heads / t x key_dim x value_dim x ssm dtype
  block size  = 16 for plain attention; hybrid: the smallest multiple of 16 tokens whose attention page is
                >= the state page; the state page is padded to equal the attention page
  groups      = layers of one kind split into groups of equal size (group size = the smaller layer count,
                or the larger one when it is < 1.5 x the smaller); every group shares one pool of blocks
  num_blocks  = available // page // group size
  per request = ceil(max_model_len / block) per attention group + per state group 1 block (prefix caching off,
                mamba cache mode 'none') or 2 (on: mode 'align'), + the speculative tokens
  concurrency = num_blocks / per request          ("Maximum concurrency for L tokens per request: X")
  KV tokens   = int(concurrency x max_model_len)  ("GPU KV cache size: N tokens")

Nothing is reserved for linear-attention state up front: a running sequence takes its state blocks from the
same pool.  max_num_seqs may not exceed num_blocks when a hybrid model captures full CUDA graphs (vLLM refuses
to start otherwise).
"""

from __future__ import annotations

import math

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import engine_memory as EM
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import kv_specs as K
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import multinode_plan as MN
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import suggestions as plan_suggestions
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.layout_search import (  # pylint: disable=unused-import
    _candidates, _check_forced, _choose_layout, _expert_parallel, _fmt_num, _pack_nvlink, _pack_pcie, _usable_gpus,
    _worst_link, tp_allowed)
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.model_profiles import DTYPE_BYTES, OBJECTIVES
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError  # pylint: disable=unused-import
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.layout_search import TP_SIZES  # pylint: disable=unused-import
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.model_profiles import DEFAULT_MAX_NUM_SEQS
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.units import GIB, MIB, cdiv, gib  # pylint: disable=unused-import
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.vllm_versions import version_at_least
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.reasons import (  # pylint: disable=unused-import
    _has_fp8, _layout_reason, _memory_reasons, _window_reason)
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.features import (
    _eager, _prefix_caching_on, _speculative_tokens, feature_args, feature_context, prefix_caching_reason,
    resolve_features)

# torch's non-torch memory that grows during the profile (CUDA context, cuBLAS handles, loaded kernels): not derivable
# from the model; measured 0.22-0.24 GiB with vLLM 0.22.0 on 1 x H200 (tests/fixtures/gpu/arch-h200-*, PROBE lines),
# planned as 256 MiB.  The TP>1 term is not measured: a conservative guess.
NON_TORCH_BYTES = 256 * MIB
NON_TORCH_TP_BYTES = 512 * MIB
# nvidia-smi's memory.total includes what the driver reserves: CUDA sees total - reserved.  The H200 capture
# (tests/fixtures/gpu/device-h200x1-2026-11-30, nvidia-smi -q: total 143771 MiB, reserved 616 MiB; torch
# total_memory 139.8 GiB in the vLLM log) is the one measured here; the catalogue carries published ones (0.4% to
# 1.4% of the total: RTX 4090 355 of 24564 MiB).  GPUs without a number assume this fraction, rounded up.
DEFAULT_RESERVED_FRACTION = 0.01
# max_num_batched_tokens the plan sets (the activation term assumes it): vLLM's OpenAI-server defaults,
# 8192 on GPUs with 70 GiB or more, 2048 on smaller ones.  Set explicitly so the estimate holds.
BATCHED_TOKENS_LARGE = 8192
BATCHED_TOKENS_SMALL = 2048
DEFAULT_UTILIZATION = 0.9

TABLE_HEADER = ("| hardware | model | fits | layout | KV cache (tokens/replica) | max concurrency @ context "
                "| max_num_seqs |\n|---|---|---|---|---|---|---|")


def kv_heads_per_gpu(arch, tp=1):
    """vLLM's ModelConfig.get_num_kv_heads: KV heads / TP, at least 1 (replicated past the KV head count; MLA: 1)."""
    return max(1, arch["num_kv_heads"] // tp)


def kv_bytes_per_token(arch, dtype_bytes=None, tp=1, extra_layers=0):
    """KV cache bytes one token occupies on one GPU of a TP group of size ``tp`` (tp=1: the whole model), all
    attention layers (sliding-window layers counted like full ones: what a token costs while it is in the window)."""
    b = dtype_bytes or arch["dtype_bytes"]
    return (arch["full_attention_layers"] + extra_layers) * K.attention_page_per_token(arch, tp, b)


def state_page_bytes(arch, tp=1, num_speculative_tokens=0):
    """One state layer's page (conv + SSM) for one sequence on one GPU (kv_specs.state_page_bytes)."""
    if not arch["linear_attention_layers"]:
        return 0
    return K.state_page_bytes(arch, tp, num_speculative_tokens)


def state_bytes_per_sequence(arch, tp=1):
    """Linear-attention / Mamba state of one sequence on one GPU, all layers, unpadded (0 for plain attention)."""
    return arch["linear_attention_layers"] * state_page_bytes(arch, tp)


def kv_layout(arch, tp=1, kv_dtype_bytes=None, mtp_layers=0, num_speculative_tokens=0, prefix_caching=False,
              block_size=None, hybrid_manager=None, vllm_version=None):
    """vLLM's KV cache layout for one GPU of a TP group (a kv_specs.KVLayout, kv_specs.build_layout).  ``mtp_layers``: extra
    full-attention layers of an MTP drafter (when MTP is on).  ``block_size``: "cpu" for the CPU engine's.
    ``hybrid_manager``: vLLM's hybrid KV cache manager on / off (None: vLLM's default for the model)."""
    return K.build_layout(arch, tp, kv_dtype_bytes, mtp_layers, num_speculative_tokens, prefix_caching, block_size,
                          hybrid_manager, vllm_version)


def blocks_per_request(layout, max_model_len, batched_tokens=None):
    """Blocks one request of max_model_len tokens takes from the shared pool (all groups together); sliding and
    chunked groups hold at most their window plus one batch of ``batched_tokens``."""
    return layout.blocks_per_request(max_model_len, batched_tokens)


def capacity(layout, available_bytes, max_model_len, batched_tokens=None):
    """What ``available_bytes`` of KV cache memory on each GPU holds: vLLM's num_blocks, its "Maximum
    concurrency" (float) and its "GPU KV cache size" (tokens), and how many short sequences fit at once."""
    num_blocks = max(0, int(available_bytes) // layout.page_bytes // layout.group_size)
    per_req = blocks_per_request(layout, max_model_len, batched_tokens)
    conc = num_blocks / per_req
    smallest = layout.smallest_request_blocks(batched_tokens)
    return dict(num_blocks=num_blocks, blocks_per_request=per_req, max_concurrency=conc,
                kv_tokens=int(conc * max_model_len), short_sequence_capacity=num_blocks // smallest)


def default_batched_tokens(memory_bytes):
    return BATCHED_TOKENS_LARGE if memory_bytes >= 70 * GIB else BATCHED_TOKENS_SMALL


def overhead_bytes(arch, tp, max_num_seqs, batched_tokens=BATCHED_TOKENS_LARGE, enforce_eager=False,
                   vllm_version=None):
    """vLLM's non-weight, non-KV memory on one GPU: non-torch + activation peak + CUDA-graph estimate."""
    return sum(overhead_terms(arch, tp, max_num_seqs, batched_tokens, enforce_eager, vllm_version).values())


def overhead_terms(arch, tp, max_num_seqs, batched_tokens=BATCHED_TOKENS_LARGE, enforce_eager=False,
                   vllm_version=None):
    """non-torch + activation peak + CUDA-graph estimate on one GPU (engine_memory, from the model's own sizes)."""
    non_torch = NON_TORCH_BYTES + (NON_TORCH_TP_BYTES if tp > 1 else 0)
    return dict(non_torch=non_torch,
                activation=EM.activation_bytes(arch, batched_tokens, max_num_seqs, vllm_version, tp),
                cudagraph=EM.cudagraph_bytes(arch, max_num_seqs, enforce_eager, batched_tokens, vllm_version, tp))


def cuda_total_bytes(gpu):
    """Memory CUDA can use on a GPU of gpu_facts: nvidia-smi's total less the driver's reserve."""
    total = int(gpu["memory_total_mib"]) * MIB
    reserved = gpu.get("memory_reserved_mib")
    if reserved is None:
        return total - int(math.ceil(total * DEFAULT_RESERVED_FRACTION / MIB)) * MIB
    return total - int(reserved) * MIB


# ---------------------------------------------------------------------------------------------------------
# Features (profile data) -> enabled set
# ---------------------------------------------------------------------------------------------------------

# ---------------------------------------------------------------------------------------------------------
# Layout
# ---------------------------------------------------------------------------------------------------------

def _weights_loaded(profile, text_only, mtp_on):
    w = profile["weights_bytes"]
    if text_only:
        w -= profile.get("vision_weights_bytes", 0)
    if not mtp_on:
        w -= profile.get("mtp_weights_bytes", 0)
    return w


def _memory_for(arch, profile, group, gpus, t, util, max_model_len, max_num_seqs, objective, opts, layout,
                batched_tokens=None, stage_weights=None):
    """Evaluate one TP group: vLLM's memory profile, then the KV pool.  Returns the eval dict.
    ``stage_weights``: the bytes one pipeline stage loads (plan across hosts), split over its t GPUs."""
    mem_total = min(int(gpus[i]["memory_total_mib"]) * MIB for i in group)
    cuda_total = min(cuda_total_bytes(gpus[i]) for i in group)
    requested = int(cuda_total * util)
    w = _weights_loaded(profile, opts["text_only"], opts["mtp_on"])
    w_rank = int(math.ceil((w if stage_weights is None else stage_weights) / t))
    batched = batched_tokens or default_batched_tokens(mem_total)
    problem = None
    if layout.mamba_cache_mode == "align" and layout.block_size > batched:
        if batched_tokens:
            problem = ("with prefix caching (mamba cache mode 'align') vLLM needs max_num_batched_tokens >= the "
                       "%d-token block; %d was given" % (layout.block_size, batched))
        else:
            batched = layout.block_size
    seqs_for_profile = max_num_seqs or DEFAULT_MAX_NUM_SEQS[objective]
    terms = overhead_terms(arch, t, seqs_for_profile, batched, opts["enforce_eager"], opts.get("vllm_version"))
    over = sum(terms.values())
    avail = requested - w_rank - over
    r = _capacity_eval(avail, layout, max_model_len, max_num_seqs, objective, dict(
        memory_bytes=mem_total, cuda_total_bytes=cuda_total, budget_bytes=requested, weights_bytes=w,
        weights_bytes_per_gpu=w_rank, overhead_bytes_per_gpu=over, overhead_terms=terms,
        max_num_batched_tokens=batched))
    if problem and not r["problem"]:
        r["problem"], r["fits"] = problem, False
    return r


def _capacity_eval(avail, layout, max_model_len, max_num_seqs, objective, terms):
    """The KV pool that ``avail`` bytes per GPU hold, the max_num_seqs that goes with it, and whether it fits."""
    r = dict(terms)
    r.update(available_bytes_per_gpu=avail, layout=layout, fits=False, kv_tokens=0, max_concurrency=0.0,
             num_blocks=0, max_num_seqs=max_num_seqs or 0, problem=None, seq_warning=None)
    if avail <= 0:
        r["problem"] = "weights and overhead exceed the memory budget"
        return r
    c = capacity(layout, avail, max_model_len, terms.get("max_num_batched_tokens"))
    r.update(num_blocks=c["num_blocks"], kv_tokens=c["kv_tokens"], max_concurrency=c["max_concurrency"],
             blocks_per_request=c["blocks_per_request"], short_sequence_capacity=c["short_sequence_capacity"])
    hybrid = layout.state_groups > 0
    if max_num_seqs:
        seqs = max_num_seqs
        if hybrid and seqs > c["num_blocks"]:
            r["problem"] = ("max_num_seqs %d exceeds the %d blocks of the KV cache pool: every decoding sequence "
                            "needs a linear-attention state block, and vLLM refuses to capture CUDA graphs (it "
                            "does not start)" % (seqs, c["num_blocks"]))
            return r
        if hybrid and seqs > c["short_sequence_capacity"]:
            r["seq_warning"] = ("max_num_seqs %d is more than the %d sequences whose state blocks fit at once "
                                "(%d blocks per sequence); the rest wait or are preempted"
                                % (seqs, c["short_sequence_capacity"],
                                   layout.attention_groups + layout.state_groups * layout.state_blocks(max_model_len)))
    else:
        seqs = min(DEFAULT_MAX_NUM_SEQS[objective], c["short_sequence_capacity"] if hybrid else
                   DEFAULT_MAX_NUM_SEQS[objective])
        if seqs >= 16:
            seqs -= seqs % 8
    r["max_num_seqs"] = seqs
    if seqs < 1:
        r["problem"] = "the KV cache pool holds no sequence's state"
        return r
    if c["num_blocks"] < c["blocks_per_request"]:
        r["problem"] = ("the KV cache holds %d blocks of %d tokens, less than the %d blocks one %d-token "
                        "sequence takes" % (c["num_blocks"], layout.block_size, c["blocks_per_request"],
                                            max_model_len))
        return r
    r["fits"] = True
    return r


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

    base = dict(model=profile["id"], profile=profile["id"], family=profile["family"], variant=profile["variant"],
                quantization=profile.get("quantization"), objective=objective, accelerator=accelerator,
                max_model_len=max_model_len, kv_cache_dtype=kv_cache_dtype,
                kv_cache_bytes_per_token=kv_full, state_bytes_per_sequence=state_full,
                min_vllm_version=str(profile["serving"]["min_vllm_version"]))
    if vllm_version is not None:
        ok = version_at_least(vllm_version, base["min_vllm_version"])
        base["vllm_version_ok"] = ok
        if not ok:
            reasons.append("vLLM %s is older than %s, the first release that serves %s: pin a newer image."
                           % (vllm_version, base["min_vllm_version"], profile["id"]))

    # Features that change memory or the KV layout (MTP, text-only, prefix caching, eager) are settled first;
    # expert-parallel-dependent ones later.
    opts = _layout_options(profile, objective, features, kv_dtype_bytes, vllm_version)
    opts.update(hybrid_manager=hybrid_manager, vllm_version=vllm_version)
    reasons.insert(0, prefix_caching_reason(profile, objective, features, opts["prefix_caching"], arch, vllm_version))

    if accelerator == "cpu":
        result = _plan_cpu(arch, profile, objective, max_model_len, max_num_seqs, kv_cache_memory_bytes,
                           opts, features, hybrid, reasons, base)
    elif accelerator == "gpu":
        # hosts.py imports this module: imported here, once this module is whole.
        from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.hosts import _host_memory, _plan_hosts
        host_list = MN.host_facts(gpu_facts, hosts)
        one = min(host_list, key=_host_memory) if len(host_list) > 1 else host_list[0]
        single_reasons = list(reasons)
        result = _plan_gpu(arch, profile, objective, max_model_len, max_num_seqs, util, one, features,
                           tensor_parallel_size, enable_expert_parallel, kv_cache_dtype, opts, hybrid, single_reasons,
                           base, max_num_batched_tokens, replicas)
        result.update(nodes=1, pipeline_parallel_size=1, hosts=len(host_list), stages=None)
        if len(host_list) > 1:
            if result["fits"]:
                result["reasons"].append(
                    "One host holds the model, so no host group is needed: each of the %d hosts serves its own %s "
                    "behind the load balancer (leave llmfleet_model_group unset); pipeline parallelism across hosts "
                    "would only add inter-host traffic." % (len(host_list), result["layout"]))
            else:
                result = _plan_hosts(arch, profile, objective, max_model_len, max_num_seqs, util, host_list,
                                     features, tensor_parallel_size, enable_expert_parallel, kv_cache_dtype, opts,
                                     hybrid, reasons, base, max_num_batched_tokens, replicas, result)
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
    if len(groups) > 1:
        reasons.append("%d replicas (GPUs %s): the serve role runs one vLLM container per replica behind the load "
                       "balancer; vLLM-internal data parallelism is not planned, because independent replicas "
                       "share nothing and need no cross-GPU traffic." % (
                           len(groups), "; ".join(",".join(map(str, g)) for g in groups)))
    if unused:
        reasons.append("GPU %s stay unused: %s." % (
            ", ".join(map(str, unused)), "the user set %d replicas" % replicas_forced if replicas_forced is not None
            else "they do not make a further group of %d NVLink-connected GPUs" % t))
    _memory_reasons(e, profile, opts, util, t, hybrid, [gpus[i] for i in used], reasons)
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
