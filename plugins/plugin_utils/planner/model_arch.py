# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A model's layer kinds, read from its config.json the way vLLM reads them; pure functions, no I/O.

``layer_kinds(text, config)`` returns one KV kind per decoder layer (kv_specs.py gives each its page and what a
request holds): ``full``, ``sliding``, ``chunked``, ``mla``, ``mamba2``, ``gdn``, ``short_conv``, or ``None`` for a
layer that keeps no cache (Nemotron-H's MLP / MoE blocks).  The sources, per config spelling (vLLM 0.22.0):

  layer_types                  transformers' per-layer list (gpt-oss, Gemma 3 in transformers >= 4.53, Qwen3-Next,
                               Granite 4.0-H "mamba"/"attention", LFM2 "conv"/"full_attention")
  hybrid_override_pattern      Nemotron-H: M = Mamba2, * = attention, - and E = no cache
  full_attention_interval      Qwen3-Next / Qwen3.5: layer i is full attention when i % interval == interval - 1
  sliding_window_pattern       Gemma 3: layer i slides unless (i + 1) % pattern == 0
  gemma2                       every other layer slides (i even), as transformers' Gemma2Config builds it
  sliding_window (+ use_sliding_window not false)   every layer slides (Mistral v0.1)
  attention_chunk_size         Llama 4: chunked local attention except the no-RoPE layers (no_rope_layers[i] == 0)
  kv_lora_rank                 MLA (DeepSeek-V2/V3, Kimi K2): every attention layer is an MLA layer
  falcon_h1                    attention and Mamba2 in every layer (parallel hybrid)

Architectures are checked against ``ARCHITECTURES`` (vLLM class -> first vLLM release that serves it, where
known): anything else is refused, naming what is not understood and the way out.
"""

from __future__ import annotations

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import KVSpecError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.units import cdiv

# vLLM model class -> first vLLM release that serves it (None: not checked, older than anything this collection
# supports).  Sources: vLLM release notes / the vllm-project/recipes min_vllm_version of each family.
ARCHITECTURES = {
    "LlamaForCausalLM": None, "MistralForCausalLM": None, "Qwen2ForCausalLM": None, "Qwen3ForCausalLM": "0.8.5",
    "Qwen2MoeForCausalLM": None, "Qwen3MoeForCausalLM": "0.8.5", "MixtralForCausalLM": None,
    "Phi3ForCausalLM": None, "GemmaForCausalLM": None, "Gemma2ForCausalLM": None, "Gemma3ForCausalLM": "0.8.0",
    "Gemma3ForConditionalGeneration": "0.8.0", "GptOssForCausalLM": "0.10.1", "DeepseekV2ForCausalLM": None,
    "DeepseekV3ForCausalLM": "0.7.0", "Qwen3NextForCausalLM": "0.10.2", "Qwen3_5MoeForConditionalGeneration": "0.17.0",
    "NemotronHForCausalLM": "0.9.0", "FalconH1ForCausalLM": "0.9.2", "GraniteMoeHybridForCausalLM": "0.10.0",
    "Lfm2ForCausalLM": "0.10.2", "Llama4ForConditionalGeneration": "0.8.3", "Glm4MoeForCausalLM": "0.10.0",
    "MistralLarge3ForCausalLM": None, "Ministral3ForCausalLM": None, "OlmoForCausalLM": None,
    "Olmo2ForCausalLM": None, "InternLM2ForCausalLM": None, "Starcoder2ForCausalLM": None,
}


# The classes that implement vLLM's SupportsMambaPrefixCaching (vllm/model_executor/models, 0.22.0): with prefix
# caching they run mamba cache mode 'all'; every other hybrid runs 'align' (MambaModelConfig).
MAMBA_PREFIX_CACHING_ALL = frozenset((
    "BambaForCausalLM", "FalconH1ForCausalLM", "GraniteMoeHybridForCausalLM", "JambaForCausalLM",
    "MambaForCausalLM", "Mamba2ForCausalLM", "NemotronHForCausalLM", "Zamba2ForCausalLM"))


def mamba_chunk_size(text):
    """ModelConfig.get_mamba_chunk_size: mamba_chunk_size (Bamba, Falcon-H1, Granite), chunk_size (Mamba2,
    Nemotron-H, Zamba), else 2048."""
    return int(_first(text, "mamba_chunk_size", "chunk_size") or 2048)


class NotModelled(KVSpecError):
    """An architecture or layer type the planner does not model (the message names it and the way out); a plan
    with the KV cache sized by hand (manual_kv.py) is still possible."""


_LAYER_TYPE_KIND = {
    "full_attention": "full", "attention": "full", "sliding_attention": "sliding", "chunked_attention": "chunked",
    "linear_attention": "gdn", "gated_deltanet": "gdn", "mamba": "mamba2", "conv": "short_conv",
}
_PATTERN_KIND = {"M": "mamba2", "*": "full", "-": None, "E": None}
WAY_OUT = ("the planner will not guess its KV cache: set kv_cache_memory_bytes (llmfleet_kv_cache_memory_bytes in "
           "site.yml, vLLM's --kv-cache-memory-bytes per GPU) to plan it with the KV cache sized by hand and the "
           "weights from its safetensors index (a plan marked not verified), or add the architecture and its layer "
           "kinds to plugins/plugin_utils/planner/model_arch.py")


def check_architecture(config, text, where):
    """The model's vLLM class and its minimum vLLM version; refuses classes the planner does not model."""
    archs = list(config.get("architectures") or text.get("architectures") or [])
    if not archs:
        raise NotModelled("%s: config.json names no architectures; %s" % (where, WAY_OUT))
    known = [a for a in archs if a in ARCHITECTURES]
    if not known:
        raise NotModelled("%s: architecture %s is not one the planner models (it knows %s); %s"
                          % (where, ", ".join(archs), ", ".join(sorted(ARCHITECTURES)), WAY_OUT))
    return known[0], ARCHITECTURES[known[0]]


def _from_layer_types(types, where):
    kinds = []
    for t in types:
        if t not in _LAYER_TYPE_KIND:
            raise NotModelled("%s: layer type %r is not one the planner models (it knows %s); %s"
                              % (where, t, ", ".join(sorted(_LAYER_TYPE_KIND)), WAY_OUT))
        kinds.append(_LAYER_TYPE_KIND[t])
    return kinds


def _from_pattern(pattern, where):
    unknown = sorted(set(pattern) - set(_PATTERN_KIND))
    if unknown:
        raise NotModelled("%s: hybrid_override_pattern has block type(s) %s the planner does not model; %s"
                          % (where, ", ".join(unknown), WAY_OUT))
    return [_PATTERN_KIND[c] for c in pattern]


def _sliding_everywhere(text):
    return bool(text.get("sliding_window")) and text.get("use_sliding_window", True) is not False


def layer_kinds(text, config, layers, where="config"):
    """One KV kind per decoder layer (see the module docstring), before MLA is applied."""
    model_type = str(config.get("model_type") or text.get("model_type") or "")
    types = text.get("layer_types")
    if isinstance(types, list) and types:
        if len(types) != layers:
            raise KVSpecError("%s: layer_types has %d entries for num_hidden_layers %d" % (where, len(types), layers))
        return _from_layer_types(types, where)
    if text.get("hybrid_override_pattern"):
        return _from_pattern(str(text["hybrid_override_pattern"]), where)
    if model_type.startswith("lfm2"):
        return _lfm2_kinds(text, layers, where)
    if text.get("full_attention_interval"):
        n = int(text["full_attention_interval"])
        return ["full" if i % n == n - 1 else "gdn" for i in range(layers)]
    if model_type.startswith("gemma3") and text.get("sliding_window"):
        n = int(text.get("sliding_window_pattern") or 6)
        return ["sliding" if (i + 1) % n else "full" for i in range(layers)]
    if model_type == "gemma2" and text.get("sliding_window"):
        return ["sliding" if i % 2 == 0 else "full" for i in range(layers)]
    if text.get("attention_chunk_size"):
        nope = text.get("no_rope_layers") or [1] * layers
        return ["chunked" if nope[i] else "full" for i in range(layers)]
    if model_type.startswith("qwen2") and text.get("use_sliding_window"):
        raise NotModelled("%s: use_sliding_window with max_window_layers (Qwen2) is not modelled; %s" % (where, WAY_OUT))
    return ["sliding" if _sliding_everywhere(text) else "full"] * layers


def _lfm2_kinds(text, layers, where):
    """LFM2 v1 configs name their attention layers in ``full_attn_idxs`` (transformers' Lfm2Config turns it into
    layer_types, the others being short-conv); a config with neither is refused rather than guessed."""
    idxs = text.get("full_attn_idxs")
    if not isinstance(idxs, list):
        raise NotModelled("%s: an LFM2 config with neither layer_types nor full_attn_idxs; %s" % (where, WAY_OUT))
    return ["full" if i in idxs else "short_conv" for i in range(layers)]


def dense_intermediate(text):
    """The dense MLP width vLLM builds: ``intermediate_size`` (LFM2 v1: ``block_ff_dim``), which LFM2 shrinks to
    2/3, scales by ``block_ffn_dim_multiplier`` and rounds up to ``block_multiple_of`` when
    ``block_auto_adjust_ff_dim`` is set (vllm/model_executor/models/lfm2.py, Lfm2MLP)."""
    width = int(_first(text, "intermediate_size", "block_ff_dim") or 0)
    if not (width and text.get("block_auto_adjust_ff_dim")):
        return width
    width = int(2 * width / 3)
    if text.get("block_ffn_dim_multiplier") is not None:
        width = int(float(text["block_ffn_dim_multiplier"]) * width)
    multiple = int(text.get("block_multiple_of") or 1)
    return multiple * cdiv(width, multiple)


def mlp_blocks(text, layers):
    """(layers with a dense MLP, layers with a MoE block, projections per dense MLP).  Most decoders put an MLP (or a
    MoE block) in every layer; Nemotron-H's layers are single blocks (``hybrid_override_pattern``: ``-`` an MLP,
    ``E`` a MoE block, ``M`` and ``*`` none), and its MLP is ungated (relu2: up and down, no gate)."""
    pattern = text.get("hybrid_override_pattern")
    act = str(text.get("mlp_hidden_act") or text.get("hidden_act") or "silu")
    projections = 2 if act == "relu2" else 3
    if pattern:
        return str(pattern).count("-"), str(pattern).count("E"), projections
    return layers, None, projections


def count_kinds(kinds, mla=False, parallel_mamba=False):
    """{kind: layers}; MLA models turn every attention layer into an MLA layer; Falcon-H1 adds a Mamba2 mixer to
    every layer."""
    counts = {}
    for k in kinds:
        if k is None:
            continue
        if mla and k == "full":
            k = "mla"
        counts[k] = counts.get(k, 0) + 1
    if parallel_mamba:
        counts["mamba2"] = len(kinds)
    return counts


def windows(text, counts):
    """The window of each windowed kind (sliding: sliding_window; chunked: attention_chunk_size)."""
    out = {}
    if counts.get("sliding"):
        out["sliding"] = int(text["sliding_window"])
    if counts.get("chunked"):
        out["chunked"] = int(text["attention_chunk_size"])
    return out


def mla_dims(text):
    if not text.get("kv_lora_rank"):
        return None
    return {"kv_lora_rank": int(text["kv_lora_rank"]), "qk_rope_head_dim": int(text.get("qk_rope_head_dim") or 64),
            "qk_nope_head_dim": int(text.get("qk_nope_head_dim") or 128),
            "v_head_dim": int(text.get("v_head_dim") or 128),
            "q_lora_rank": int(text["q_lora_rank"]) if text.get("q_lora_rank") else None}


def _first(d, *keys):
    for k in keys:
        if d.get(k) is not None:
            return d[k]
    return None


def mamba2_dims(text, hidden, dtype_bytes, ssm_dtype_bytes, where):
    """Mamba2 mixer sizes under the Nemotron-H / Falcon-H1 / Granite 4.0-H spellings."""
    heads = _first(text, "mamba_num_heads", "mamba_n_heads")
    head_dim = _first(text, "mamba_head_dim", "mamba_d_head")
    state = _first(text, "ssm_state_size", "mamba_d_state")
    if None in (heads, head_dim, state):
        raise KVSpecError("%s: Mamba2 layers but no mamba_num_heads / mamba_head_dim / ssm_state_size; %s"
                          % (where, WAY_OUT))
    inner = _first(text, "mamba_d_ssm") or int(heads) * int(head_dim)
    return {"num_heads": int(heads), "head_dim": int(head_dim), "state_size": int(state),
            "n_groups": int(_first(text, "n_groups", "mamba_n_groups", "mamba_num_groups") or 1),
            "conv_kernel": int(_first(text, "conv_kernel", "mamba_d_conv") or 4), "intermediate_size": int(inner),
            "ssm_dtype_bytes": ssm_dtype_bytes, "dtype_bytes": dtype_bytes}


def short_conv_dims(text, hidden):
    """Short-conv state sizes: the conv width (``conv_dim``, the hidden size when absent) and its cache length."""
    return {"conv_dim": int(_first(text, "conv_dim") or hidden),
            "l_cache": int(_first(text, "conv_L_cache", "conv_l_cache") or 3)}
