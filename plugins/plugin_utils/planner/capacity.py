# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The memory of one GPU of a layout, and the KV cache capacity it leaves: vLLM's own arithmetic (vLLM 0.22.0,
measured on an H200; the same formulas in 0.28.0; docs/PLANNER.md names the source files), so every number can be
read beside vLLM's boot log line by line.  Pure functions, no I/O; planner.py chooses the layout with them.

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
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.model_profiles import DEFAULT_MAX_NUM_SEQS
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.units import GIB, MIB

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
