# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pooling models (embedding, classification, score) planned as vLLM runs them (issue #39 item 5); pure functions.

What vLLM 0.32.0 does (vllm/config/model.py ModelConfig.attn_type, is_chunked_prefill_supported,
is_prefix_caching_supported; vllm/engine/arg_utils.py _set_default_chunked_prefill_and_prefix_caching_args;
vllm/v1/kv_cache_interface.py EncoderOnlyAttentionSpec):

- A pooling model's attention is ``encoder_only`` when its class pools the CLS token by default or is bidirectional
  (BertModel, RobertaModel, XLMRobertaModel, ModernBertModel, the GTE / Nomic BERTs, their *ForSequenceClassification
  rerankers), or when its config says ``is_causal: false``; otherwise (a *ForCausalLM converted to embed or classify,
  e.g. the Qwen3-Embedding and Qwen3-Reranker models) it is a ``decoder``.
- Encoder-only layers keep no KV cache (EncoderOnlyAttentionSpec.max_memory_usage_bytes is 0): the engine needs its
  weights and one forward pass's activations, and no chunked prefill or prefix caching.
- A decoder pooled on its LAST token keeps a KV cache as a generator does, with chunked prefill and prefix caching on
  by default; pooled with MEAN or CLS it has neither.
- Releases before 0.10.0 (``--task``, the V0 engine) ran pooling models without chunked prefill or prefix caching.

encoder_memory() is the planner's memory for an encoder-only model: weights + activation peak of a forward pass over
max_num_batched_tokens (the residual stream and the MLP, as engine_memory counts them for a generator, no sampler:
a pooling runner profiles its pooler instead) + vLLM's non-torch memory; no KV cache.  Not yet checked against a GPU
capture (the CPU engine logs no profile for it).
"""

from __future__ import annotations

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.capacity import NON_TORCH_BYTES
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.vllm_versions import version_at_least

# Hugging Face architecture names that vLLM 0.32 serves with bidirectional (encoder-only) attention
# (vllm/model_executor/models/registry.py -> bert.py, roberta.py, modernbert.py, bert_with_rope.py).
ENCODER_ONLY_ARCHITECTURES = frozenset((
    "BertModel", "BertForSequenceClassification", "BertForTokenClassification", "BertSpladeSparseEmbeddingModel",
    "RobertaModel", "RobertaForSequenceClassification", "XLMRobertaModel", "XLMRobertaForSequenceClassification",
    "ModernBertModel", "ModernBertForSequenceClassification", "NomicBertModel", "GteModel", "GteNewModel",
    "GteNewForSequenceClassification", "ColBERTModel",
))
# The pooling type a pooling model's class uses by default (vllm/model_executor/models/interfaces_base.py: LAST,
# unless the class says otherwise; the BERT family pools CLS).
DEFAULT_POOLING = "LAST"
# max_num_batched_tokens of a pooling model without chunked prefill: a whole prompt is one batch, at least vLLM's
# default budget.
POOLING_BATCHED_TOKENS = 2048
_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def _architectures(config):
    return list((config or {}).get("architectures") or [])


def pooling_attention(config):
    """``encoder_only`` or ``decoder``: how vLLM runs this config.json on its pooling runner (module docstring)."""
    if set(_architectures(config)) & ENCODER_ONLY_ARCHITECTURES or (config or {}).get("is_causal") is False:
        return "encoder_only"
    return "decoder"


def pooling_type(config):
    """The sequence pooling vLLM uses by default: CLS for the encoder-only classes, else LAST."""
    return "CLS" if set(_architectures(config)) & ENCODER_ONLY_ARCHITECTURES else DEFAULT_POOLING


def pooling_defaults(attention, seq_pooling=DEFAULT_POOLING, vllm_version=None):
    """vLLM's defaults for a pooling model: {enable_chunked_prefill, enable_prefix_caching, kv_cache}."""
    if vllm_version and not version_at_least(vllm_version, "0.10.0"):
        return {"enable_chunked_prefill": False, "enable_prefix_caching": False,
                "kv_cache": attention != "encoder_only"}
    if attention == "encoder_only":
        return {"enable_chunked_prefill": False, "enable_prefix_caching": False, "kv_cache": False}
    causal_ok = str(seq_pooling).upper() not in ("MEAN", "CLS")
    return {"enable_chunked_prefill": causal_ok, "enable_prefix_caching": causal_ok, "kv_cache": True}


def pooling_features(config, seq_pooling=None, vllm_version=None):
    """The planner features (planner.plan's ``features``) of a decoder pooling model: prefix caching as vLLM sets it
    (off for MEAN / CLS pooling). An encoder-only model is not planned by planner.plan (encoder_memory)."""
    defaults = pooling_defaults(pooling_attention(config), seq_pooling or pooling_type(config), vllm_version)
    return {"prefix_caching": defaults["enable_prefix_caching"]}


def _text(config):
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    missing = [k for k in ("hidden_size", "num_hidden_layers") if not text.get(k)]
    if missing:
        raise PlanError("the pooling model's config.json has no %s" % ", ".join(missing))
    return text


def encoder_weights_bytes(config):
    """Weights of a BERT-style encoder from its config.json, in its dtype: embeddings (vocabulary, positions, token
    types) + per layer the attention (4 h x h) and the MLP (2 h x I) with their biases and two LayerNorms."""
    text = _text(config)
    h, layers = int(text["hidden_size"]), int(text["num_hidden_layers"])
    inter = int(text.get("intermediate_size") or 4 * h)
    embeddings = (int(text.get("vocab_size") or 0) + int(text.get("max_position_embeddings") or 0)
                  + int(text.get("type_vocab_size") or 0)) * h + 2 * h
    per_layer = 4 * h * h + 4 * h + 2 * h * inter + inter + h + 4 * h
    return (embeddings + layers * per_layer) * dtype_bytes(config)


def dtype_bytes(config):
    """Bytes per parameter as vLLM loads the model: its dtype, float32 served as float16 (vLLM's auto dtype)."""
    dtype = str((config or {}).get("torch_dtype") or (config or {}).get("dtype") or "float32")
    return 2 if dtype == "float32" else _DTYPE_BYTES.get(dtype, 2)


def encoder_memory(config, weights_bytes=None, batched_tokens=POOLING_BATCHED_TOKENS, max_model_len=None, tp=1):
    """The memory (bytes, per GPU of a TP group of ``tp``) vLLM needs for an encoder-only pooling model: weights,
    activation peak, non-torch; kv_cache 0.  ``weights_bytes``: from the safetensors index (else from the config)."""
    text = _text(config)
    h = int(text["hidden_size"])
    inter = int(text.get("intermediate_size") or 4 * h)
    tokens = max(int(batched_tokens), int(max_model_len or text.get("max_position_embeddings") or 0))
    weights = int(weights_bytes if weights_bytes is not None else encoder_weights_bytes(config)) // tp
    activation = tokens * (8 * h + 6 * inter // tp) + tokens * h * 2
    total = weights + activation + NON_TORCH_BYTES
    return {"weights": weights, "activation": activation, "non_torch": NON_TORCH_BYTES, "kv_cache": 0,
            "total": total, "batched_tokens": tokens}


def encoder_plan(config, gpu_total_bytes, gpu_memory_utilization, weights_bytes=None, max_model_len=None, tp=1,
                 max_num_seqs=None):
    """A plan for an encoder-only pooling model on a GPU share: the keys placement reads from planner.plan
    (fits, gpu_memory_utilization, available_kv_cache_memory_bytes 0, weights_bytes_per_gpu, kv_cache_tokens 0,
    max_concurrency, max_num_seqs, max_model_len, vllm_args, suggestions) and its memory terms."""
    text = _text(config)
    max_model_len = int(max_model_len or text.get("max_position_embeddings") or 512)
    memory = encoder_memory(config, weights_bytes, max_model_len=max_model_len, tp=tp)
    budget = int(gpu_total_bytes * gpu_memory_utilization)
    seqs = int(max_num_seqs or max(1, memory["batched_tokens"] // max_model_len))
    return {"fits": memory["total"] <= budget, "encoder_only": True, "gpu_memory_utilization": gpu_memory_utilization,
            "available_kv_cache_memory_bytes": 0, "weights_bytes_per_gpu": memory["weights"], "kv_cache_tokens": 0,
            "max_concurrency": float(seqs), "max_num_seqs": seqs, "max_model_len": max_model_len,
            "memory": memory, "budget_bytes": budget, "suggestions": [],
            "vllm_args": {"max-model-len": max_model_len, "gpu-memory-utilization": gpu_memory_utilization},
            "reasons": ["%s runs encoder-only on vLLM's pooling runner: no KV cache, no chunked prefill, no prefix "
                        "caching; needs weights %d + activations %d (%d batched tokens) + non-torch %d bytes of a "
                        "budget of %d." % (", ".join(_architectures(config)) or "the model", memory["weights"],
                                           memory["activation"], memory["batched_tokens"], memory["non_torch"],
                                           budget)]}


def min_share(config, gpu_total_bytes, budget, headroom_bytes, weights_bytes=None, max_model_len=None):
    """The smallest share of a GPU's budget an encoder-only model needs beside other tenants (its memory plus the
    CUDA context headroom of a shared GPU), rounded up to 0.01."""
    need = encoder_memory(config, weights_bytes, max_model_len=max_model_len)["total"] + int(headroom_bytes)
    share = need / float(gpu_total_bytes * budget)
    return min(1.0, -(-int(share * 10000) // 100) / 100.0)


def encoder_weights(encoder):
    """The weights of a placement input's ``encoder`` ({config, weights_bytes}): the index's, else the config's."""
    return encoder.get("weights_bytes") or encoder_weights_bytes(encoder["config"])


def encoder_plan_for(given, gpu_total_bytes, gpus, util):
    """encoder_plan for one placement instance on ``gpus`` (placement inputs: ``encoder`` {config, weights_bytes},
    ``plan_args``), with the ``replicas`` key the placement reads."""
    plan = encoder_plan(given["encoder"]["config"], gpu_total_bytes, util, given["encoder"].get("weights_bytes"),
                        (given.get("plan_args") or {}).get("max_model_len"), len(gpus))
    plan["replicas"] = [list(gpus)]
    return plan
