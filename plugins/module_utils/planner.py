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
  activation  = max_num_batched_tokens x hidden x 2 B x ACTIVATION_FACTOR
                + max_num_seqs x vocab x SAMPLER_BYTES (the profiling run's dummy sampler over max_num_seqs rows)
  CUDA graphs = CUDAGRAPH_BYTES (0 with enforce-eager)

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

from ansible_collections.llmfleet.vllm.plugins.module_utils import engine_memory as EM
from ansible_collections.llmfleet.vllm.plugins.module_utils import kv_specs as K
from ansible_collections.llmfleet.vllm.plugins.module_utils import plan_multinode as MN
from ansible_collections.llmfleet.vllm.plugins.module_utils import plan_suggestions
from ansible_collections.llmfleet.vllm.plugins.module_utils.layout_search import (  # pylint: disable=unused-import
    _candidates, _check_forced, _choose_layout, _expert_parallel, _fmt_num, _pack_nvlink, _pack_pcie, _usable_gpus,
    _worst_link, tp_allowed)
from ansible_collections.llmfleet.vllm.plugins.module_utils.model_profiles import DTYPE_BYTES, OBJECTIVES
from ansible_collections.llmfleet.vllm.plugins.module_utils.plan_common import DEFAULT_MAX_NUM_SEQS, TP_SIZES, PlanError
from ansible_collections.llmfleet.vllm.plugins.module_utils.plan_features import (
    _eager, _prefix_caching_on, _speculative_tokens, feature_args, resolve_features)

MIB = 1024 ** 2
GIB = 1024 ** 3
# The memory-profile terms, measured with vLLM 0.22.0 on 1 x H200 (tests/fixtures/vllm-h200, the PROBE lines):
# non-torch 252-256 MiB at TP1; activation peak 1,627,212,800 B at 8192 batched tokens / 256 sequences (BF16
# and FP8 alike) and 4,874,938,368 B at 16384 / 1024 (eager): the two terms below reproduce both within 2%;
# CUDA-graph estimate 0.57 GiB (BF16) / 0.70 GiB (FP8).  The TP>1 term is not measured: a conservative guess.
NON_TORCH_BYTES = 256 * MIB
NON_TORCH_TP_BYTES = 512 * MIB
ACTIVATION_FACTOR = 26
SAMPLER_BYTES = 12
CUDAGRAPH_BYTES = int(0.7 * GIB)
# nvidia-smi's memory.total includes what the driver reserves: CUDA sees total - reserved.  The H200 capture
# (tests/fixtures/gpu/device-h200x1-2026-11-30, nvidia-smi -q: total 143771 MiB, reserved 616 MiB; torch
# total_memory 139.8 GiB in the vLLM log) is the one measured here; the catalogue carries published ones (0.4% to
# 1.4% of the total: RTX 4090 355 of 24564 MiB).  GPUs without a number assume this fraction, rounded up.
DEFAULT_RESERVED_FRACTION = 0.01
# max_num_batched_tokens the plan sets (the activation term assumes it): vLLM's OpenAI-server defaults,
# 8192 on GPUs with 70 GiB or more, 2048 on smaller ones.  Set explicitly so the estimate holds.
BATCHED_TOKENS_LARGE = 8192
BATCHED_TOKENS_SMALL = 2048
# vLLM's attention kernels take blocks in multiples of 16 tokens (FlashAttention MultipleOf(16); with fp32
# mamba state [16, 32, 64], of which the smallest is taken); CacheConfig.DEFAULT_BLOCK_SIZE is 16.
KERNEL_BLOCK_ALIGNMENT = 16
DEFAULT_BLOCK_SIZE = 16
GROUP_SIZE_SLACK = 1.5
BLOCK_TOKENS = DEFAULT_BLOCK_SIZE
DEFAULT_UTILIZATION = 0.9

TABLE_HEADER = ("| hardware | model | fits | layout | KV cache (tokens/replica) | max concurrency @ context "
                "| max_num_seqs |\n|---|---|---|---|---|---|---|")


def gib(n):
    return "%.1f GiB" % (n / GIB)


def cdiv(a, b):
    return -(-a // b)


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
              block_size=None):
    """vLLM's KV cache layout for one GPU of a TP group (kv_specs.build_layout).  ``mtp_layers``: extra
    full-attention layers of an MTP drafter (when MTP is on).  ``block_size``: "cpu" for the CPU engine's."""
    return K.build_layout(arch, tp, kv_dtype_bytes, mtp_layers, num_speculative_tokens, prefix_caching, block_size)


def blocks_per_request(layout, max_model_len, batched_tokens=None):
    """Blocks one request of max_model_len tokens takes from the shared pool (all groups together); sliding and
    chunked groups hold at most their window plus one batch of ``batched_tokens``."""
    return K.blocks_per_request(layout, max_model_len, batched_tokens)


def capacity(layout, available_bytes, max_model_len, batched_tokens=None):
    """What ``available_bytes`` of KV cache memory on each GPU holds: vLLM's num_blocks, its "Maximum
    concurrency" (float) and its "GPU KV cache size" (tokens), and how many short sequences fit at once."""
    num_blocks = max(0, int(available_bytes) // layout["page_bytes"] // layout["group_size"])
    per_req = blocks_per_request(layout, max_model_len, batched_tokens)
    conc = num_blocks / per_req
    smallest = K.smallest_request_blocks(layout, batched_tokens)
    return dict(num_blocks=num_blocks, blocks_per_request=per_req, max_concurrency=conc,
                kv_tokens=int(conc * max_model_len), short_sequence_capacity=num_blocks // smallest)


def default_batched_tokens(memory_bytes):
    return BATCHED_TOKENS_LARGE if memory_bytes >= 70 * GIB else BATCHED_TOKENS_SMALL


def overhead_bytes(arch, tp, max_num_seqs, batched_tokens=BATCHED_TOKENS_LARGE, enforce_eager=False):
    """vLLM's non-weight, non-KV memory on one GPU: non-torch + activation peak + CUDA-graph estimate."""
    return sum(overhead_terms(arch, tp, max_num_seqs, batched_tokens, enforce_eager).values())


def overhead_terms(arch, tp, max_num_seqs, batched_tokens=BATCHED_TOKENS_LARGE, enforce_eager=False):
    """non-torch + activation peak + CUDA-graph estimate on one GPU.  Gated DeltaNet hybrids keep the terms
    measured on Qwen3.5 (ACTIVATION_FACTOR, SAMPLER_BYTES, CUDAGRAPH_BYTES); every other model gets
    engine_memory's, from its own sizes."""
    non_torch = NON_TORCH_BYTES + (NON_TORCH_TP_BYTES if tp > 1 else 0)
    if arch.get("linear_attention") and arch["linear_attention_layers"]:
        return dict(non_torch=non_torch,
                    activation=batched_tokens * arch["hidden_size"] * 2 * ACTIVATION_FACTOR
                    + max_num_seqs * arch["vocab_size"] * SAMPLER_BYTES,
                    cudagraph=0 if enforce_eager else CUDAGRAPH_BYTES)
    return dict(non_torch=non_torch,
                activation=EM.activation_bytes(arch, batched_tokens, max_num_seqs, enforce_eager),
                cudagraph=EM.cudagraph_bytes(max_num_seqs, enforce_eager))


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
    if layout["mamba_cache_mode"] == "align" and layout["block_size"] > batched:
        if batched_tokens:
            problem = ("with prefix caching (mamba cache mode 'align') vLLM needs max_num_batched_tokens >= the "
                       "%d-token block; %d was given" % (layout["block_size"], batched))
        else:
            batched = layout["block_size"]
    seqs_for_profile = max_num_seqs or DEFAULT_MAX_NUM_SEQS[objective]
    terms = overhead_terms(arch, t, seqs_for_profile, batched, opts["enforce_eager"])
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
    hybrid = layout["state_groups"] > 0
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
                                   layout["attention_groups"] + layout["state_groups"]
                                   * layout["state_blocks_per_request"]))
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
                        "sequence takes" % (c["num_blocks"], layout["block_size"], c["blocks_per_request"],
                                            max_model_len))
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
         max_num_batched_tokens=None, alternatives=None, replicas=None, hosts=None, _suggest=True):
    """Plan a vLLM deployment.  See the module docstring for the memory model; returns the ``plan`` dict.

    ``gpu_facts`` is one host's gpu_facts, with ``hosts`` identical hosts (default 1), or a list of several hosts'
    gpu_facts (node-rank order).  A model that fits one host is planned on one host (``nodes`` 1); one that does
    not is planned across the fewest hosts that hold it: TP inside a host, PP across hosts (plan_multinode.py)."""
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
    if replicas is not None and int(replicas) < 1:
        raise PlanError("replicas must be at least 1")
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

    # Features that change memory or the KV layout (MTP, text-only, prefix caching, eager) are settled first;
    # expert-parallel-dependent ones later.
    opts = _layout_options(profile, objective, features, kv_dtype_bytes)

    if accelerator == "cpu":
        result = _plan_cpu(arch, profile, objective, max_model_len, max_num_seqs, kv_cache_memory_bytes,
                           opts, features, hybrid, reasons, base)
    elif accelerator == "gpu":
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
            hosts=hosts), result, alternatives or [])
    result["summary"] = _summary(result)
    return result


def _layout_options(profile, objective, features, kv_dtype_bytes):
    """The feature-dependent inputs of the memory model and the KV layout (MTP, text-only, eager, prefix
    caching), settled before expert parallelism is known."""
    arch = profile["arch"]
    pre, _unused = resolve_features(profile, objective, features,
                                    {"expert_parallel": True, "hybrid": arch["linear_attention_layers"] > 0,
                                     "mtp_layers": arch["mtp_layers"]})
    mtp_on = pre.get("mtp", False)
    return dict(mtp_on=mtp_on, text_only=pre.get("text_only", False), enforce_eager=_eager(profile, pre),
                prefix_caching=_prefix_caching_on(profile, pre),
                num_speculative_tokens=_speculative_tokens(profile, pre) if mtp_on else 0,
                mtp_layers=arch["mtp_layers"] if mtp_on else 0, kv_dtype_bytes=kv_dtype_bytes)


def layout_for(profile, tensor_parallel_size=1, features=None, kv_cache_dtype="auto", objective="throughput"):
    """The KV layout (kv_layout) of a profile served with these settings, without any memory model: what the
    boot-log replay needs to turn vLLM's logged available memory into blocks and concurrency."""
    arch = profile["arch"]
    kvb = arch["dtype_bytes"] if kv_cache_dtype == "auto" else DTYPE_BYTES[kv_cache_dtype]
    o = _layout_options(profile, objective, features, kvb)
    return kv_layout(arch, tensor_parallel_size, kvb, o["mtp_layers"], o["num_speculative_tokens"],
                     o["prefix_caching"])


_STATE_NAMES = {"gdn": "Gated DeltaNet", "mamba2": "Mamba2", "short_conv": "short-conv"}


def _layout_reason(layout, t):
    parts = [_window_reason(layout)] if layout.get("windows") else []
    if layout["state_groups"]:
        kind = next((_STATE_NAMES[k] for k in layout["kind_groups"] if k in _STATE_NAMES), "state")
        parts.append(
            "KV cache layout (vLLM's hybrid arithmetic, per GPU of TP%d): one %s state page is %d "
            "bytes per layer, so the attention block is raised to %d tokens (%d bytes per layer, the state page "
            "padded %.2f%% to equal it); the %d attention + %d linear-attention layers form %d + %d groups of %d "
            "sharing one block pool; a request takes ceil(max_model_len / %d) attention blocks plus %d state "
            "block%s per linear-attention group (mamba cache mode '%s'); nothing is reserved up front."
            % (t, kind, layout["state_page_bytes"], layout["block_size"], layout["page_bytes"],
               layout["state_padding_pct"], layout["attention_layers"], layout["state_layers"],
               layout["attention_groups"], layout["state_groups"], layout["group_size"], layout["block_size"],
               layout["state_blocks_per_request"], "s" if layout["state_blocks_per_request"] > 1 else "",
               layout["mamba_cache_mode"]))
    return " ".join(parts) or None


def _window_reason(layout):
    """Sliding-window / chunked layers hold their window plus one batch, not the whole context."""
    text = []
    for kind, w in sorted(layout["windows"].items()):
        text.append("%d %s layers (window %d tokens) in %d group%s of %d: a request holds at most "
                    "cdiv(min(%s + max_num_batched_tokens, max_model_len), %d)%s blocks in each"
                    % (layout["kind_layers"][kind], "sliding-window" if kind == "sliding" else "chunked local-attention",
                       w, layout["kind_groups"][kind], "s" if layout["kind_groups"][kind] > 1 else "",
                       layout["group_size"], "window - 1" if kind == "sliding" else "chunk", layout["block_size"],
                       " + 1" if kind == "sliding" else ""))
    return "KV cache layout (vLLM's hybrid allocator): %s; the other layers hold the whole context." % "; ".join(text)


def _plan_cpu(arch, profile, objective, max_model_len, max_num_seqs, kv_budget, opts, features, hybrid, reasons,
              base):
    if not kv_budget or int(kv_budget) <= 0:
        raise PlanError("accelerator cpu needs kv_cache_memory_bytes (the vLLM CPU engine sizes its KV cache "
                        "from --kv-cache-memory-bytes), e.g. 67108864 for 64 MiB")
    kv_budget = int(kv_budget)
    enabled, freasons = resolve_features(profile, objective, features,
                                         {"expert_parallel": False, "hybrid": hybrid,
                                          "mtp_layers": arch["mtp_layers"]})
    reasons.extend(freasons)
    layout = kv_layout(arch, 1, opts["kv_dtype_bytes"], opts["mtp_layers"], opts["num_speculative_tokens"],
                       opts["prefix_caching"], block_size="cpu")
    kv_tok = kv_bytes_per_token(arch, opts["kv_dtype_bytes"], extra_layers=opts["mtp_layers"])
    r = _capacity_eval(kv_budget, layout, max_model_len, max_num_seqs, objective,
                       dict(weights_bytes=profile["weights_bytes"], weights_bytes_per_gpu=0,
                            overhead_bytes_per_gpu=0, budget_bytes=kv_budget, memory_bytes=None))
    lr = _layout_reason(layout, 1)
    if lr:
        reasons.append(lr)
    reasons.append("CPU engine: the KV cache budget is --kv-cache-memory-bytes %d (%.1f MiB) = %d blocks of %d "
                   "tokens = %d tokens at %d bytes per token (max concurrency %.2fx at %d tokens)."
                   % (kv_budget, kv_budget / MIB, r["num_blocks"], layout["block_size"], r["kv_tokens"], kv_tok,
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
        kv_cache_blocks=r["num_blocks"], kv_cache_block_size=layout["block_size"], kv_cache_layout=layout,
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


def _has_fp8(gpu):
    if gpu.get("fp8") is not None:
        return bool(gpu["fp8"])
    cc = str(gpu.get("compute_capability") or "")
    try:
        return tuple(int(x) for x in cc.split(".")[:2]) >= (8, 9)
    except ValueError:
        return True  # unknown: say nothing


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


def _plan_gpu(arch, profile, objective, max_model_len, max_num_seqs, util, gpu_facts, features, tp_forced,
              ep_forced, kv_cache_dtype, opts, hybrid, reasons, base, batched_tokens=None, replicas_forced=None):
    gpus, links, usable, domains = _usable_gpus(gpu_facts, reasons)
    n = len(usable)
    _check_forced(arch, profile, tp_forced, replicas_forced, n)

    def evaluate(t, group):
        layout = kv_layout(arch, t, opts["kv_dtype_bytes"], opts["mtp_layers"], opts["num_speculative_tokens"],
                           opts["prefix_caching"])
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
        reasons.append("GPU %s stay unused: %s." % (
            ", ".join(map(str, unused)), "the user set %d replicas" % replicas_forced if replicas_forced is not None
            else "they do not make a further group of %d NVLink-connected GPUs" % t))
    _memory_reasons(e, profile, opts, util, t, hybrid, [gpus[i] for i in used], reasons)
    if e["fits"]:
        reasons.append("KV cache per replica: %d blocks of %d tokens; a %d-token request takes %d, so vLLM will log "
                       "'GPU KV cache size: %s tokens' and 'Maximum concurrency for %s tokens per request: %.2fx'; "
                       "max_num_seqs %d." % (e["num_blocks"], layout["block_size"], max_model_len,
                                             e["blocks_per_request"], "{:,}".format(e["kv_tokens"]),
                                             "{:,}".format(max_model_len), e["max_concurrency"], e["max_num_seqs"]))
        if e.get("seq_warning"):
            reasons.append("Warning: %s." % e["seq_warning"])
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
        kv_cache_blocks=e["num_blocks"], kv_cache_block_size=layout["block_size"], kv_cache_layout=layout,
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
        layout = kv_layout(sa, t, opts["kv_dtype_bytes"], mtp, opts["num_speculative_tokens"], opts["prefix_caching"])
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
    best = None
    tried = []
    for n in range(2, len(host_list) + 1):
        for opt in options:
            stages, worst = _eval_stages(arch, profile, host_list, opt, n, util, max_model_len, max_num_seqs,
                                         objective, opts, batched_tokens)
            tried.append((n, opt, stages, worst))
            if worst["fits"]:
                best = (n, opt, stages, worst)
                break
        if best:
            break
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
    layout = e["layout"]
    ep = _expert_parallel(arch, dict(t=t, nvlink=opt["nvlink"]), ep_forced, reasons)
    enabled, freasons = resolve_features(profile, objective, features,
                                         {"expert_parallel": ep, "hybrid": hybrid, "mtp_layers": arch["mtp_layers"]})
    reasons.extend(freasons)
    _explain_hosts(reasons, arch, profile, single, host_list, best, max_model_len)
    args = {
        "tensor-parallel-size": t,
        "pipeline-parallel-size": n,
        "gpu-memory-utilization": util,
        "max-model-len": max_model_len,
        "max-num-seqs": e["max_num_seqs"] or None,
        "max-num-batched-tokens": e["max_num_batched_tokens"],
        "enable-expert-parallel": True if ep else None,
        "kv-cache-dtype": None if kv_cache_dtype == "auto" else kv_cache_dtype,
    }
    args.update(feature_args(profile, enabled))
    full = _full_seqs(e)
    heaviest = max(stages, key=lambda s: s["weights_bytes_per_gpu"])
    out = dict(base)
    out.update(
        fits=e["fits"], nodes=n, hosts=len(host_list), tensor_parallel_size=t, pipeline_parallel_size=n,
        data_parallel_size=1, replicas=[list(opt["groups"][0])], enable_expert_parallel=ep,
        weights_bytes=e["weights_bytes"], weights_bytes_per_gpu=heaviest["weights_bytes_per_gpu"],
        overhead_bytes_per_gpu=e["overhead_bytes_per_gpu"], overhead_terms_per_gpu=e.get("overhead_terms") or {},
        available_kv_cache_memory_bytes=max(0, e["available_bytes_per_gpu"]),
        kv_cache_memory_bytes=sum(max(0, s["available_bytes_per_gpu"]) for s in stages) * t,
        kv_cache_tokens=e["kv_tokens"], kv_cache_tokens_total=e["kv_tokens"],
        kv_cache_blocks=e["num_blocks"], kv_cache_block_size=layout["block_size"], kv_cache_layout=layout,
        max_num_seqs=e["max_num_seqs"], max_num_batched_tokens=e["max_num_batched_tokens"],
        gpu_memory_utilization=util, max_concurrency=_round_conc(e),
        max_concurrency_at_max_model_len=full, max_concurrency_total=full, full_context_sequences_total=full,
        interconnect=("NVLink" if opt["nvlink"] else _worst_link(opt["groups"][0], opt["topos"][0][1]))
        if t > 1 else None,
        unused_gpus=[i for i in opt["topos"][0][2] if i not in opt["groups"][0]],
        features=enabled, reasons=reasons, vllm_args=args, stages=[_stage_row(s, t) for s in stages],
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
                       "%.2fx'; max_num_seqs %d." % (e["num_blocks"], layout["block_size"], max_model_len,
                                                     e["blocks_per_request"], "{:,}".format(e["kv_tokens"]),
                                                     "{:,}".format(max_model_len), e["max_concurrency"],
                                                     e["max_num_seqs"]))
        if e.get("seq_warning"):
            reasons.append("Warning: %s." % e["seq_warning"])


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
