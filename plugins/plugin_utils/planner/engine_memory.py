# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""vLLM's memory before the KV cache, from a model's own sizes: weights per GPU and the profile run's activation
peak (``gpu_worker.determine_available_memory``).  Pure functions, no I/O.

Each term follows vLLM 0.22.0's own computation (the source lines are named where the term is built) and was checked
on 1 x H200 against the worker's terms (tests/fixtures/gpu/arch-h200-0.22.0-*, PROBE_JSON lines).  Where vLLM's
allocation cannot be derived from the model's sizes the term is an upper bound, so the plan errs on the side of less
KV cache, never more:

  weights      the checkpoint's safetensors total (model.safetensors.index.json) when known; else counted from
               config.json: embeddings (+ lm_head unless tied), attention (GQA or MLA), dense MLP / MoE experts /
               Mamba2 / GDN mixers; BF16 2 B, FP8 1 B, MXFP4 and int4 experts 0.53 B per parameter (MXFP4 experts
               with both widths rounded up to 256, the most the MoE backends pad them)
  activation   the profile run (gpu_model_runner.profile_run, 0.22.0 v1/worker/gpu_model_runner.py:6104-6177) pushes
               max_num_batched_tokens B tokens through the model (_dummy_run), then samples min(max_num_seqs, B) = S
               rows (_dummy_sampler_run, :5910-5983); the peak is the higher of the two, plus the fused-MoE workspace
               and the hidden states, which stay allocated in between:
                 workspace = B x top-k x (6 x expert width + 2 x hidden) bytes (none for MXFP4 experts)
                 forward   = B x (8 x hidden + 6 x widest dense MLP) bytes, eager and compiled alike
                 sampler   = S x vocab x (logit dtype + SAMPLER_FP32_COPIES x 4) bytes + the Triton top-k/top-p buffer
                             + B x hidden x 2 (the model runner V2 copies the logits once: dtype + 4)
                 + SAMPLER_WORKSPACE_BYTES (not derived: seen 30-52 MiB beside the sampler's tensors)
  CUDA graphs  per mode (PIECEWISE, FULL) the largest capture's activations + every graph's driver memory
               (CUDAGRAPH_BYTES_PER_GRAPH, CUDAGRAPH_BYTES_PER_GRAPH_MLA for MLA; not derived; 0 with --enforce-eager)
"""

from __future__ import annotations

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.units import MIB
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.vllm_versions import version_at_least

# The sampler's dummy run (0.22.0 v1/sample/sampler.py:91 logits.to(float32), :271 temperature in place,
# v1/sample/ops/topk_topp_sampler.py:129 softmax probs in float32, random_sample's exponential q of the same shape):
# three float32 copies of the S x vocab logits are alive at its peak beside the model-dtype logits that
# _dummy_sampler_run keeps.
SAMPLER_FP32_COPIES = 3
# The Triton top-k/top-p kernel (rows >= 8; v1/sample/ops/topk_topp_sampler.py:321) caches a float32 buffer of
# min(rows, SMs) x vocab (topk_topp_triton.py:1019-1025).  148 SMs: the most of the GPUs the catalogue names (B200);
# H100/H200 have 132.
TOPK_TOPP_MIN_ROWS = 8
SM_COUNT_BOUND = 148
# Not derived: the profile's peak sits 30-52 MiB above the sampler's tensors on every capture where the sampler
# peaks (cuBLAS / kernel workspaces); 64 MiB is planned.
SAMPLER_WORKSPACE_BYTES = 64 * MIB
# The model runner V2 (0.22.0: the default for unquantized dense Qwen3ForCausalLM, vllm/config/vllm.py:69 and
# :518-532) samples the profile run with one float32 copy of the logits (v1/worker/gpu/sample/sampler.py:133, top-k
# and top-p skipped, :576-578) and profiles no CUDA-graph memory (v1/worker/gpu/model_runner.py:620-622).
V2_RUNNER_ARCHITECTURES = ("Qwen3ForCausalLM",)
V2_SAMPLER_FP32_COPIES = 1
MXFP4_PAD = 256
QUANT_BYTES = {"fp8": 1.0, "fbgemm_fp8": 1.0, "compressed-tensors": 1.0, "modelopt": 1.0,
               "mxfp4": 0.53125, "gptq": 0.53125, "awq": 0.53125, "gptq_marlin": 0.53125, "awq_marlin": 0.53125}
# CUDA graphs.  vLLM 0.22.0 measures its estimate before it sizes the KV cache (v1/worker/gpu_worker.py:402-411,
# subtracted at :447-451 unless VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0; 0.28.0 likewise, gpu_worker.py:527-562):
# gpu_model_runner.profile_cudagraph_memory (:6265-6342) captures, per mode, the largest size and the next one and
# takes first + (graphs - 1) x second.  The default mode is FULL_AND_PIECEWISE: PIECEWISE graphs for the capture
# sizes (1, 2, 4, 8..248 step 8, 256.. step 16, up to min(2 x max_num_seqs, 512, max_num_batched_tokens);
# config/vllm.py:1646-1707; gpt-oss 1024, model_executor/models/config.py:164-168) and FULL graphs for the decode
# sizes up to max_num_seqs.  The first capture allocates the largest size's activations in a fresh pool
# (forward_bytes_per_token, the fused-MoE workspace); every further graph costs the driver memory of its kernels and
# what it keeps of the pool.  Not derived: that cost per graph, 2.0-3.9 MiB in four of the seven 0.22.0 captures on
# 1 x H200 (LFM2, gpt-oss, Llama 3.1, Nemotron-H) and 6.3-8.1 MiB in three (Qwen3.5 BF16 and FP8, Qwen1.5-MoE with
# 19 + 11 graphs); planned as CUDAGRAPH_BYTES_PER_GRAPH, which leaves those three under 0.15 GiB short (0.2% of their
# KV memory) and the rest above vLLM's estimate.
CUDAGRAPH_BYTES_PER_GRAPH = 6 * MIB
# MLA models' graphs keep more of the pool each (the MLA decode's per-batch buffers): 22.6 MiB a graph in the one
# 0.22.0 capture with CUDA graphs (DeepSeek-V2-Lite, fp8 KV, 0.85, 51 + 51 graphs, 1 x H200,
# tests/fixtures/gpu/arch-h200-0.22.0-2026-12-05), where the 6 MiB bound left the plan 1.8% above vLLM's KV memory.
# Not derived: planned at that measurement rounded up, so MLA plans err low until a derivation replaces it.
CUDAGRAPH_BYTES_PER_GRAPH_MLA = 24 * MIB
MAX_CAPTURE_SIZE = 512
LARGE_CAPTURE_ARCHITECTURES = {"GptOssForCausalLM": 1024}


def capture_sizes(max_num_seqs, batched_tokens=None, architecture=None):
    """vLLM's default CUDA-graph capture sizes (config/vllm.py:1646-1707): 1, 2, 4, 8..248 step 8, 256.. step 16, up
    to min(2 x max_num_seqs, 512, max_num_batched_tokens), max_num_batched_tokens added when it is below the top."""
    top = min(2 * max_num_seqs, LARGE_CAPTURE_ARCHITECTURES.get(architecture, MAX_CAPTURE_SIZE))
    if batched_tokens:
        top = min(top, batched_tokens)
    sizes = [s for s in (1, 2, 4) if s <= top] + list(range(8, min(top, 255) + 1, 8)) + list(range(256, top + 1, 16))
    if batched_tokens and batched_tokens <= top:
        sizes.append(batched_tokens)
    return sorted(set(sizes))


def cudagraph_bytes(arch, max_num_seqs, enforce_eager=False, batched_tokens=None, vllm_version=None, tp=1):
    """vLLM's CUDA-graph memory estimate (the comment above CUDAGRAPH_BYTES_PER_GRAPH): per mode (PIECEWISE
    over the capture sizes, FULL over the decode sizes up to max_num_seqs) the largest size's activations + the
    driver memory of every graph.  0 with --enforce-eager and on the model runner V2 of 0.22.0 (its
    profile_cudagraph_memory returns 0, v1/worker/gpu/model_runner.py:620-622)."""
    if enforce_eager or runs_v2_model_runner(arch, vllm_version):
        return 0
    piecewise = capture_sizes(max_num_seqs, batched_tokens, arch.get("architecture"))
    full = [s for s in piecewise if s <= max_num_seqs]
    per_token = forward_bytes_per_token(arch, tp) + moe_workspace_bytes_per_token(arch, tp)
    per_graph = cudagraph_bytes_per_graph(arch)
    out = 0
    for sizes in (piecewise, full):
        if sizes:
            out += max(sizes) * per_token + len(sizes) * per_graph
    return out


def cudagraph_bytes_per_graph(arch):
    """The planned driver memory of one captured graph beyond the first (a bound: see CUDAGRAPH_BYTES_PER_GRAPH)."""
    return CUDAGRAPH_BYTES_PER_GRAPH_MLA if arch.get("mla") else CUDAGRAPH_BYTES_PER_GRAPH


def _round_up(n, to):
    return -(-int(n) // to) * to


def _attention_params(arch):
    h, heads = arch["hidden_size"], arch["num_attention_heads"]
    mla = arch.get("mla")
    if mla:
        qk = mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]
        q = h * mla["q_lora_rank"] + mla["q_lora_rank"] * heads * qk if mla["q_lora_rank"] else h * heads * qk
        kv = h * (mla["kv_lora_rank"] + mla["qk_rope_head_dim"])
        kv += mla["kv_lora_rank"] * heads * (mla["qk_nope_head_dim"] + mla["v_head_dim"])
        return q + kv + heads * mla["v_head_dim"] * h
    d = arch["head_dim"]
    return h * d * (2 * heads + 2 * arch["num_kv_heads"])


def _state_params(arch):
    h = arch["hidden_size"]
    m, g = arch.get("mamba2"), arch.get("linear_attention")
    out = 0
    if m:
        inner = m["intermediate_size"]
        out += arch["layer_counts"].get("mamba2", 0) * h * (3 * inner + 2 * m["n_groups"] * m["state_size"]
                                                            + m["num_heads"])
    if g:
        key = g["num_key_heads"] * g["key_head_dim"]
        value = g["num_value_heads"] * g["value_head_dim"]
        out += arch["layer_counts"].get("gdn", 0) * h * (2 * key + 3 * value + 2 * g["num_value_heads"])
    c = arch.get("short_conv")
    if c:
        # LFM2's ShortConv: in_proj (B, C, x: 3 x conv_dim), a depthwise conv of L_cache taps, out_proj
        out += arch["layer_counts"].get("short_conv", 0) * c["conv_dim"] * (4 * h + c["l_cache"])
    return out


def param_counts(arch):
    """(parameters stored at the checkpoint dtype, MoE expert parameters) counted from config.json."""
    h, v = arch["hidden_size"], arch["vocab_size"]
    dense = v * h * (1 if arch.get("tie_word_embeddings") else 2)
    attention = arch["full_attention_layers"] * _attention_params(arch)
    mlp_layers, moe_layers, proj = arch.get("mlp_blocks") or (arch["num_layers"], None, 3)
    moe, sizes = arch.get("moe"), arch.get("moe_sizes")
    experts = 0
    if moe and sizes:
        dense_layers = sizes["dense_layers"] if moe_layers is None else mlp_layers
        moe_layers = mlp_layers - dense_layers if moe_layers is None else moe_layers
        experts = moe_layers * moe["num_experts"] * proj * h * sizes["intermediate_size"]
        dense += moe_layers * (proj * h * sizes["shared_intermediate_size"] + h * moe["num_experts"])
        dense += dense_layers * proj * h * arch["intermediate_size"]
    elif arch.get("intermediate_size"):
        dense += mlp_layers * proj * h * arch["intermediate_size"]
    return dense + attention + _state_params(arch), experts


def weights_from_config(arch, quantization=None):
    """Checkpoint bytes counted from config.json (the safetensors index's total, when known, is better)."""
    dense, experts = param_counts(arch)
    q = quantization or arch.get("quant_method")
    per = QUANT_BYTES.get(q, arch["dtype_bytes"]) if q else arch["dtype_bytes"]
    if q == "mxfp4":
        # the MXFP4 MoE backends round the expert widths up (fused_moe/oracle/mxfp4.py:657-689, 0.22.0: 64 to 256)
        h, sizes = arch["hidden_size"], arch.get("moe_sizes") or {}
        inter = sizes.get("intermediate_size") or arch.get("intermediate_size") or 1
        pad = float(_round_up(h, MXFP4_PAD) * _round_up(inter, MXFP4_PAD)) / (h * inter)
        return int(dense * arch["dtype_bytes"] + experts * per * pad)
    embeddings = arch["vocab_size"] * arch["hidden_size"] * (1 if arch.get("tie_word_embeddings") else 2)
    return int(embeddings * arch["dtype_bytes"] + (dense - embeddings + experts) * per)


def moe_workspace_bytes_per_token(arch, tp=1):
    """The fused-MoE kernel's workspace per batched token: top-k x (gate_up 2I + activation I + output H) x 2 bytes,
    the expert width I split over the t GPUs of a TP group.  vLLM keeps it allocated, so it adds to whichever of
    forward and sampler peaks (Mixtral-8x7B: 3.09 GB planned, 3.59 GB measured in all at 16384 tokens).  MXFP4
    experts (gpt-oss) run another kernel: no such workspace seen."""
    moe, sizes = arch.get("moe"), arch.get("moe_sizes")
    if not (moe and sizes) or arch.get("quant_method") == "mxfp4":
        return 0
    return moe["experts_per_token"] * (6 * sizes["intermediate_size"] // tp + 2 * arch["hidden_size"])


def forward_bytes_per_token(arch, tp=1):
    """The forward pass's peak per batched token outside the MoE workspace: the residual stream (8 x hidden bytes)
    and the widest dense MLP, whose gate_up output (2 x I x 2 B) and activation (I x 2 B) are alive together; the
    MLP is column-parallel, so a GPU of a TP group of t holds I / t of it (a MoE model's widest MLP is its shared
    expert or its dense first layers)."""
    h = arch["hidden_size"]
    sizes = arch.get("moe_sizes")
    widest = arch.get("intermediate_size") or 0
    if arch.get("moe") and sizes:
        widest = max(sizes["shared_intermediate_size"], widest if sizes["dense_layers"] else 0)
    return 8 * h + 6 * widest // tp


def runs_v2_model_runner(arch, vllm_version=None):
    """Whether vLLM runs this model on its model runner V2 with the smaller profile terms: 0.22.x only (unquantized,
    dense, a listed architecture).  Other releases list other architectures, not read here: planned on the V1
    runner's larger terms."""
    return (bool(vllm_version) and version_at_least(vllm_version, "0.22.0")
            and not version_at_least(vllm_version, "0.23.0")
            and arch.get("architecture") in V2_RUNNER_ARCHITECTURES and not arch.get("moe")
            and not arch.get("quant_method"))


def sampler_bytes(arch, rows, vllm_version=None):
    """The dummy sampler's peak over ``rows`` x vocab logits (see SAMPLER_FP32_COPIES / V2_SAMPLER_FP32_COPIES)."""
    v2 = runs_v2_model_runner(arch, vllm_version)
    per = arch["dtype_bytes"] + 4 * (V2_SAMPLER_FP32_COPIES if v2 else SAMPLER_FP32_COPIES)
    out = rows * arch["vocab_size"] * per
    if not v2 and rows >= TOPK_TOPP_MIN_ROWS:
        out += min(rows, SM_COUNT_BOUND) * arch["vocab_size"] * 4
    return out


def activation_bytes(arch, batched_tokens, max_num_seqs, vllm_version=None, tp=1):
    """vLLM's profiled activation peak (the module docstring): MoE workspace + max(forward, sampler) + the hidden
    states + SAMPLER_WORKSPACE_BYTES.  torch.compile runs the same GEMMs as eager mode, and the MLP's gate_up output
    and its activation are alive together in both, so eager and compiled runs peak alike."""
    return int(activation_terms(arch, batched_tokens, max_num_seqs, vllm_version, tp)["total"])


def activation_terms(arch, batched_tokens, max_num_seqs, vllm_version=None, tp=1):
    """The activation peak's parts on one GPU of a TP group of ``tp`` (bytes): workspace, forward, sampler (the
    full vocabulary: vLLM gathers the logits on every rank), hidden, allowance, total."""
    forward = batched_tokens * forward_bytes_per_token(arch, tp)
    sampler = sampler_bytes(arch, min(max_num_seqs, batched_tokens), vllm_version)
    hidden = batched_tokens * arch["hidden_size"] * 2
    workspace = batched_tokens * moe_workspace_bytes_per_token(arch, tp)
    total = workspace + max(forward, sampler) + hidden + SAMPLER_WORKSPACE_BYTES
    return dict(workspace=workspace, forward=forward, sampler=sampler, hidden=hidden,
                allowance=SAMPLER_WORKSPACE_BYTES, total=total)
