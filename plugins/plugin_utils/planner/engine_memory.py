# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""vLLM's memory before the KV cache, from a model's own sizes: weights per GPU and the profile's activation
peak and CUDA-graph estimate (``gpu_worker.determine_available_memory``).  Pure functions, no I/O.

Measured with vLLM 0.22.0 on 1 x H200 (tests/fixtures/gpu/vllm-h200-arch-2026-12-02, PROBE_JSON lines, 13 runs of
eight public architectures):

  weights      the checkpoint's safetensors total (model.safetensors.index.json) when known; else counted from
               config.json: embeddings (+ lm_head unless tied), attention (GQA or MLA), dense MLP / MoE experts /
               Mamba2 / GDN mixers; BF16 2 B, FP8 1 B, MXFP4 and int4 experts 0.53 B per parameter
  activation   MoE workspace + max(forward, sampler): the profiling run pushes max_num_batched_tokens B tokens
               through the model, then samples max_num_seqs S rows (whichever peaks higher; the hidden states and the
               fused-MoE workspace, which vLLM keeps, stay alive in between)
                 workspace = B x top-k x (6 x expert width + 2 x hidden) bytes (none for MXFP4 experts)
                 forward   = B x (8 x hidden + 6 x widest dense MLP) bytes, eager; x COMPILED_FACTOR compiled
                 sampler  = min(S, B) x vocab x SAMPLER_BYTES + B x hidden x 2
               Gated DeltaNet hybrids keep the term measured on Qwen3.5 (planner.py ACTIVATION_FACTOR)
  CUDA graphs  CUDAGRAPH_BYTES_PER_SIZE x the number of capture sizes (0 with --enforce-eager)
"""

from __future__ import annotations

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.units import MIB

# Sampler: 1024 rows x vocab at 14.7-15.2 bytes an element where the sampler peaks (gemma-3-1b at 2048 and 16384
# batched tokens, gpt-oss-20b at 4096 and 16384, gemma-2-9b): bf16 logits, their fp32 copy, the top-k/top-p sort
# (values and int64 indices).
SAMPLER_BYTES = 14.7
# vLLM 0.22.0 runs some architectures on its V2 model runner ("Using V2 Model Runner" in the log): Qwen3-1.7B did,
# and its profiled sampler peaked at 6.3 bytes an element (1.04 GB at 1024 x 151936).  One run: other V2
# architectures are not measured; the set lists only what was seen.
V2_RUNNER_ARCHITECTURES = ("Qwen3ForCausalLM",)
SAMPLER_BYTES_V2 = 6.3
# torch.compile's fused graph peaks at about half the eager forward (Llama-3.1-8B-class dense layers, measured
# through Qwen1.5-MoE's compiled run: 1.56 vs 3.01 GB).
COMPILED_FACTOR = 0.52
# CUDA-graph estimate per capture size: 533 MB / 51 sizes (Llama-3.1-8B), 619 MB / 51 (gpt-oss-20b), 258 MB / 19
# (Qwen1.5-MoE, max_num_seqs 64): ~10.4-13.6 MB each.
CUDAGRAPH_BYTES_PER_SIZE = 12 * MIB
MAX_CAPTURE_SIZE = 512
QUANT_BYTES = {"fp8": 1.0, "fbgemm_fp8": 1.0, "compressed-tensors": 1.0, "modelopt": 1.0,
               "mxfp4": 0.53125, "gptq": 0.53125, "awq": 0.53125, "gptq_marlin": 0.53125, "awq_marlin": 0.53125}


def capture_sizes(max_num_seqs):
    """vLLM's default CUDA-graph capture sizes: 1, 2, 4, 8..248 step 8, 256.. step 16, up to
    min(2 x max_num_seqs, 512)."""
    top = min(2 * max_num_seqs, MAX_CAPTURE_SIZE)
    sizes = [s for s in (1, 2, 4) if s <= top] + list(range(8, min(top, 255) + 1, 8)) + list(range(256, top + 1, 16))
    return len(sizes)


def cudagraph_bytes(max_num_seqs, enforce_eager=False):
    return 0 if enforce_eager else capture_sizes(max_num_seqs) * CUDAGRAPH_BYTES_PER_SIZE


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
        return int(dense * arch["dtype_bytes"] + experts * per)
    embeddings = arch["vocab_size"] * arch["hidden_size"] * (1 if arch.get("tie_word_embeddings") else 2)
    return int(embeddings * arch["dtype_bytes"] + (dense - embeddings + experts) * per)


def moe_workspace_bytes_per_token(arch):
    """The fused-MoE kernel's workspace per batched token: top-k x (gate_up 2I + activation I + output H) x 2 bytes.
    vLLM keeps it allocated, so it adds to whichever of forward and sampler peaks (Mixtral-8x7B: 3.09 GB planned,
    3.59 GB measured in all at 16384 tokens).  MXFP4 experts (gpt-oss) run another kernel: no such workspace seen."""
    moe, sizes = arch.get("moe"), arch.get("moe_sizes")
    if not (moe and sizes) or arch.get("quant_method") == "mxfp4":
        return 0
    return moe["experts_per_token"] * (6 * sizes["intermediate_size"] + 2 * arch["hidden_size"])


def forward_bytes_per_token(arch):
    """The eager forward pass's peak per batched token outside the MoE workspace: the residual stream and the widest
    dense MLP (a MoE model's shared expert or its dense first layers)."""
    h = arch["hidden_size"]
    sizes = arch.get("moe_sizes")
    widest = arch.get("intermediate_size") or 0
    if arch.get("moe") and sizes:
        widest = max(sizes["shared_intermediate_size"], widest if sizes["dense_layers"] else 0)
    return 8 * h + 6 * widest


def activation_bytes(arch, batched_tokens, max_num_seqs, enforce_eager=False):
    """vLLM's profiled activation peak (the model's own sizes; not for GDN hybrids, see the module docstring)."""
    forward = batched_tokens * forward_bytes_per_token(arch) * (1 if enforce_eager else COMPILED_FACTOR)
    per = SAMPLER_BYTES_V2 if arch.get("architecture") in V2_RUNNER_ARCHITECTURES else SAMPLER_BYTES
    sampler = min(max_num_seqs, batched_tokens) * arch["vocab_size"] * per
    sampler += batched_tokens * arch["hidden_size"] * 2
    return int(batched_tokens * moe_workspace_bytes_per_token(arch) + max(forward, sampler))
