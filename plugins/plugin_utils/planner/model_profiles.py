# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Model profiles: load and validate the data files under ``profiles/``, and turn a Hugging Face
``config.json`` (+ ``model.safetensors.index.json``) into the same normalised architecture record.

A profile file (one per checkpoint variant, file name = id with '/' replaced by '--', extension .yml):

  id: Qwen/Qwen3.5-35B-A3B            # the Hugging Face repo id; also the profile's name
  family: Qwen3.5-35B-A3B             # variants of one family are offered as alternatives by the planner
  variant: bf16                       # bf16 | fp8 | gptq-int4 | ...
  quantization: null                  # checkpoint quantisation (vLLM reads it from config.json itself)
  weights_bytes: 72000000000          # whole checkpoint on disk (safetensors total_size)
  vision_weights_bytes: 890000000     # part of weights_bytes not loaded in text-only mode (optional)
  mtp_weights_bytes: 1690000000       # part of weights_bytes loaded only with MTP speculative decoding
  config: {...}                       # the config.json fields the planner needs (HF names; nested text_config ok)
  serving:
    min_vllm_version: "0.17.0"
    features: {name: {default, args_on, args_off, requires, conflicts, note}}

A variant of another profile may hold only its differences: ``extends: Qwen/Qwen3.5-35B-A3B`` (see
load_profiles).
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import engine_memory, model_arch
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import KVSpecError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.features import VLLM_DEFAULT
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.layer_specs import attention_layers, state_layers

DTYPE_BYTES = {
    "float32": 4, "float": 4, "fp32": 4,
    "bfloat16": 2, "bf16": 2, "float16": 2, "half": 2, "fp16": 2,
    "float8": 1, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "int8": 1,
}
DEFAULT_MAX_NUM_SEQS = {"throughput": 256, "latency": 64}
OBJECTIVES = ("throughput", "latency")
FEATURE_KEYS = {"default", "args_on", "args_off", "requires", "conflicts", "note", "source"}
FEATURE_REQUIRES = {"expert_parallel", "hybrid", "mtp_layers"}
_KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class ProfileError(ValueError):
    """A profile or model config is missing something the planner needs; the message says what and where."""


class NotModelledError(ProfileError):
    """The model's architecture or a layer type is one the planner does not model (model_arch.NotModelled): it can
    still be planned with the KV cache sized by hand (manual_kv.plan_by_hand)."""


def profile_filename(model_id):
    """'Qwen/Qwen3.5-35B-A3B' -> 'Qwen--Qwen3.5-35B-A3B.yml'."""
    return model_id.replace("/", "--") + ".yml"


def _first(d, *keys, default=None):
    for k in keys:
        if k in d and d[k] is not None:
            return d[k]
    return default


def _text_config(config, where):
    if not isinstance(config, dict):
        raise ProfileError("%s: expected a mapping (config.json contents), got %s" % (where, type(config).__name__))
    return config.get("text_config") if isinstance(config.get("text_config"), dict) else config


def _serve_dtype(text, config, where):
    """The dtype vLLM serves in with --dtype auto: the config's (float32 checkpoints are served in bfloat16)."""
    dtype = str(_first(text, "dtype", "torch_dtype", default=None)
                or _first(config, "dtype", "torch_dtype", default="bfloat16"))
    if dtype not in DTYPE_BYTES:
        raise ProfileError("%s: unknown dtype %r" % (where, dtype))
    return "bfloat16" if DTYPE_BYTES[dtype] == 4 else dtype


def _gdn_dims(text, where, linear):
    try:
        return {
            "num_key_heads": int(text["linear_num_key_heads"]),
            "num_value_heads": int(text["linear_num_value_heads"]),
            "key_head_dim": int(text["linear_key_head_dim"]),
            "value_head_dim": int(text["linear_value_head_dim"]),
            "conv_kernel": int(text["linear_conv_kernel_dim"]),
            "ssm_dtype": str(_first(text, "mamba_ssm_dtype", default="float32")),
            "ssm_dtype_bytes": DTYPE_BYTES[str(_first(text, "mamba_ssm_dtype", default="float32"))],
        }
    except KeyError as e:
        raise ProfileError("%s: %d linear-attention layers but %s is missing" % (where, linear, e.args[0]))


def _moe(text):
    experts = _first(text, "num_experts", "n_routed_experts", "num_local_experts")
    if not experts:
        return None
    per_token = _first(text, "num_experts_per_tok", "experts_per_token", default=1)
    return {"num_experts": int(experts), "experts_per_token": int(per_token)}


def _moe_sizes(text):
    """The MoE widths the memory model needs (engine_memory.py); None for dense models."""
    if not _first(text, "num_experts", "n_routed_experts", "num_local_experts"):
        return None
    inter = _first(text, "moe_intermediate_size", "intermediate_size", default=0)
    shared = _first(text, "shared_expert_intermediate_size", default=None)
    if shared is None:
        shared = int(_first(text, "n_shared_experts", default=0) or 0) * int(inter)
    return {"intermediate_size": int(inter), "shared_intermediate_size": int(shared or 0),
            "dense_layers": int(_first(text, "first_k_dense_replace", default=0) or 0)}


def _state_dims(text, counts, hidden, dtype, model_type, where):
    """The state layers' dimensions (GDN, Mamba2, short conv), each None when the model has none."""
    gdn = _gdn_dims(text, where, counts["gdn"]) if counts.get("gdn") else None
    mamba = None
    if counts.get("mamba2"):
        default = "float32" if model_type == "nemotron_h" else dtype
        ssm = str(_first(text, "mamba_ssm_cache_dtype", "mamba_ssm_dtype", default=default))
        mamba = model_arch.mamba2_dims(text, hidden, DTYPE_BYTES[dtype], DTYPE_BYTES.get(ssm, 4), where)
    conv = model_arch.short_conv_dims(text, hidden) if counts.get("short_conv") else None
    return gdn, mamba, conv


def normalize_config(config, where="config"):
    """Reduce a Hugging Face config to what the planner needs (see _normalize); a config the KV model does not
    understand raises ProfileError with kv_specs' message."""
    try:
        return _normalize(config, where)
    except model_arch.NotModelled as e:
        raise NotModelledError(str(e))
    except KVSpecError as e:
        raise ProfileError(str(e))


def _normalize(config, where="config"):
    """Reduce a Hugging Face config (flat, or multimodal with ``text_config``) to what the planner needs.

    Returns a dict: model_type, architectures, architecture (the vLLM class), min_vllm_version, hidden_size,
    num_layers, layer_counts ({KV kind: layers}, kv_specs.py), windows, full_attention_layers (every attention
    layer), linear_attention_layers (every state layer), num_attention_heads, num_kv_heads, head_dim, vocab_size,
    max_position_embeddings, dtype, dtype_bytes, moe, mla, linear_attention (GDN), mamba2, short_conv, mtp_layers,
    quant_method, intermediate_size, mlp_blocks (model_arch.mlp_blocks), tie_word_embeddings.  Raises ProfileError (or KVSpecError) naming what is
    missing or not understood.
    """
    text = _text_config(config, where)

    def need(key, *alts):
        v = _first(text, key, *alts)
        if v is None:
            v = _first(config, key, *alts)
        if v is None:
            raise ProfileError("%s: missing %s (needed to size the KV cache)" % (where, " / ".join((key,) + alts)))
        return v

    architecture, min_version = model_arch.check_architecture(config, text, where)
    model_type = _first(config, "model_type", default=text.get("model_type"))
    layers = int(need("num_hidden_layers"))
    heads = int(need("num_attention_heads"))
    hidden = int(need("hidden_size"))
    dtype = _serve_dtype(text, config, where)
    mla = model_arch.mla_dims(text)
    kinds = model_arch.layer_kinds(text, config, layers, where)
    counts = model_arch.count_kinds(kinds, mla=bool(mla), parallel_mamba=model_type == "falcon_h1")
    gdn, mamba, conv = _state_dims(text, counts, hidden, dtype, model_type, where)
    attention = attention_layers(counts)
    qc = config.get("quantization_config") or text.get("quantization_config") or {}
    return {
        "model_type": model_type, "architectures": list(config.get("architectures") or text.get("architectures") or []),
        "architecture": architecture, "min_vllm_version": min_version,
        "hidden_size": hidden, "num_layers": layers, "layer_counts": counts,
        "windows": model_arch.windows(text, counts),
        "full_attention_layers": attention, "linear_attention_layers": state_layers(counts),
        "num_attention_heads": heads, "num_kv_heads": 1 if mla else int(_first(text, "num_key_value_heads",
                                                                               default=heads)),
        "head_dim": int(_first(text, "head_dim", default=hidden // heads)),
        "vocab_size": int(need("vocab_size")), "max_position_embeddings": int(need("max_position_embeddings")),
        "dtype": dtype, "dtype_bytes": DTYPE_BYTES[dtype], "moe": _moe(text), "moe_sizes": _moe_sizes(text), "mla": mla,
        "linear_attention": gdn, "mamba2": mamba, "short_conv": conv,
        "mtp_layers": int(_first(text, "mtp_num_hidden_layers", "num_nextn_predict_layers", default=0)),
        "quant_method": qc.get("quant_method"), "intermediate_size": model_arch.dense_intermediate(text),
        "mlp_blocks": model_arch.mlp_blocks(text, layers),
        "mamba_prefix_caching_all": architecture in model_arch.MAMBA_PREFIX_CACHING_ALL,
        "mamba_chunk_size": model_arch.mamba_chunk_size(text) if mamba else None,
        "tie_word_embeddings": _tied_embeddings(text, config, model_type),
    }


def _tied_embeddings(text, config, model_type):
    """tie_word_embeddings (LFM2 also spells it tie_embedding); the class default when the config says nothing:
    tied for Gemma and LFM2 (transformers' Gemma*Config / Lfm2Config), untied otherwise."""
    default = str(model_type).startswith(("gemma", "lfm2"))
    return bool(_first(text, "tie_word_embeddings", "tie_embedding",
                       default=_first(config, "tie_word_embeddings", "tie_embedding", default=default)))


def weights_from_index(index):
    """Total bytes from a ``model.safetensors.index.json`` (its metadata.total_size)."""
    try:
        return int(index["metadata"]["total_size"])
    except (KeyError, TypeError, ValueError):
        raise ProfileError("model.safetensors.index.json: no metadata.total_size")


def validate_profile(p, where="profile"):
    """Check a profile mapping; returns it with ``arch`` (normalize_config of its config) added."""
    if not isinstance(p, dict):
        raise ProfileError("%s: expected a mapping" % where)
    for key in ("id", "family", "variant", "weights_bytes", "config", "serving"):
        if key not in p:
            raise ProfileError("%s: missing required key %r" % (where, key))
    if not isinstance(p["weights_bytes"], int) or p["weights_bytes"] <= 0:
        raise ProfileError("%s: weights_bytes must be a positive integer (bytes)" % where)
    for key in ("vision_weights_bytes", "mtp_weights_bytes"):
        v = p.get(key, 0)
        if not isinstance(v, int) or v < 0 or v >= p["weights_bytes"]:
            raise ProfileError("%s: %s must be a non-negative integer below weights_bytes" % (where, key))
    serving = p["serving"]
    if not isinstance(serving, dict) or "min_vllm_version" not in serving:
        raise ProfileError("%s: serving.min_vllm_version is required" % where)
    if not re.match(r"^\d+\.\d+(\.\d+)?$", str(serving["min_vllm_version"])):
        raise ProfileError("%s: serving.min_vllm_version %r is not X.Y.Z" % (where, serving["min_vllm_version"]))
    feats = serving.get("features") or {}
    if not isinstance(feats, dict):
        raise ProfileError("%s: serving.features must be a mapping" % where)
    for name, f in feats.items():
        fw = "%s: serving.features.%s" % (where, name)
        if not isinstance(f, dict):
            raise ProfileError("%s: expected a mapping" % fw)
        unknown = set(f) - FEATURE_KEYS
        if unknown:
            raise ProfileError("%s: unknown keys %s" % (fw, sorted(unknown)))
        d = f.get("default", False)
        if isinstance(d, dict):
            if set(d) != set(OBJECTIVES) or not all(isinstance(v, bool) for v in d.values()):
                raise ProfileError("%s: default must be a bool or {throughput: bool, latency: bool}" % fw)
        elif d == VLLM_DEFAULT and name != "prefix_caching":
            raise ProfileError("%s: default %r (vLLM's own) exists for prefix_caching only" % (fw, VLLM_DEFAULT))
        elif not isinstance(d, bool) and d != VLLM_DEFAULT:
            raise ProfileError("%s: default must be a bool, {throughput: bool, latency: bool} or %r (vLLM's own)"
                               % (fw, VLLM_DEFAULT))
        for key in ("args_on", "args_off"):
            args = f.get(key) or {}
            if not isinstance(args, dict):
                raise ProfileError("%s: %s must be a mapping of vLLM flags" % (fw, key))
            for flag in args:
                if not _KEBAB.match(str(flag)):
                    raise ProfileError("%s: %s flag %r is not kebab-case without dashes" % (fw, key, flag))
        for req in f.get("requires") or []:
            if req not in FEATURE_REQUIRES:
                raise ProfileError("%s: requires %r is not one of %s" % (fw, req, sorted(FEATURE_REQUIRES)))
        for c in f.get("conflicts") or []:
            if not isinstance(c, dict) or c.get("feature") not in feats or not c.get("reason"):
                raise ProfileError("%s: conflicts entries need feature (another feature) and reason" % fw)
    out = dict(p)
    out["arch"] = normalize_config(p["config"], where="%s: config" % where)
    return out


def merge_profile(base, child):
    """``child`` over ``base``: mappings merge key by key (recursively), anything else is replaced; the base's
    id and path are not inherited."""
    out = {k: v for k, v in base.items() if k not in ("id", "path", "extends", "arch")}
    for k, v in child.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge_profile(out[k], v)
        else:
            out[k] = v
    return out


def _resolve_extends(raw, where, seen=(), bases=None):
    """raw: {id: (data, path)}; returns the data of ``where`` with its ``extends`` chain merged in.  A parent not
    in ``raw`` is looked up in ``bases`` (profiles loaded before, e.g. the collection's own)."""
    data, path = raw[where]
    parent = data.get("extends")
    if parent is None:
        return data
    if parent in seen or parent == where:
        raise ProfileError("%s: extends %s, which extends it back" % (path, parent))
    if parent not in raw:
        if bases and parent in bases:
            base = bases[parent]
        else:
            raise ProfileError("%s: extends %r, which is not a profile in %s (known: %s)"
                               % (path, parent, os.path.dirname(path), ", ".join(sorted(set(raw) | set(bases or {})))))
    else:
        base = _resolve_extends(raw, parent, seen + (where,), bases)
    merged = merge_profile(base, {k: v for k, v in data.items() if k != "extends"})
    merged["extends"] = parent
    return merged


def load_profiles(directory, bases=None):
    """Load every ``*.yml`` profile in ``directory``; returns {id: profile}.  File name must match the id.

    A profile may say ``extends: <another profile id in the same directory>``: it then holds only what differs
    from that profile (e.g. the FP8 checkpoint of a BF16 model: its weight sizes and quantization_config), and
    everything else (architecture, serving features) is the other profile's, merged key by key.  ``bases``
    ({id: profile}, e.g. the collection's own) may be extended too."""
    import yaml  # controller-side only

    raw = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith((".yml", ".yaml")):
            continue
        path = os.path.join(directory, name)
        with open(path) as fh:
            data = yaml.safe_load(fh)
        if not isinstance(data, dict) or "id" not in data:
            raise ProfileError("%s: a profile is a mapping with an id" % path)
        if profile_filename(data["id"]) != name:
            raise ProfileError("%s: file name must be %s (the id with '/' as '--')"
                               % (path, profile_filename(data["id"])))
        if data["id"] in raw:
            raise ProfileError("%s: duplicate profile id %s" % (path, data["id"]))
        raw[data["id"]] = (data, path)
    profiles = {}
    for pid, (_unused, path) in raw.items():
        p = validate_profile(_resolve_extends(raw, pid, bases=bases), where=path)
        p["path"] = path
        profiles[pid] = p
    return profiles


def generic_features():
    """The engine options vLLM offers every model, as profile features: what a repo id without a profile file is
    planned with.  Prefix caching follows vLLM's own default for the model and the vLLM version
    (plan_features.vllm_prefix_caching_default) unless the user sets it; enforce-eager is a debug switch.  A profile
    adds what only a person knows (parsers, MTP, chat-template fixes)."""
    return {
        "prefix_caching": {"default": VLLM_DEFAULT, "args_on": {"enable-prefix-caching": True},
                           "args_off": {"enable-prefix-caching": False}},
        "enforce_eager": {"default": False, "args_on": {"enforce-eager": True}},
    }


def profile_from_model_dir(config, index=None, weights_bytes=None, name="local model", like=None,
                           count_weights=False):
    """Profile for a model given as files: ``config`` (config.json contents), ``index`` (safetensors index
    contents) or ``weights_bytes``.  ``like`` (a profile) lends its serving features when its model_type and
    quantisation match; otherwise the engine options every model has (generic_features).  ``count_weights``: without
    an index or weights_bytes, count the weights from config.json (engine_memory.weights_from_config) instead of
    refusing.
    """
    arch = normalize_config(config, where="%s: config.json" % name)
    weights_source = "given"
    if weights_bytes is None and index is not None:
        weights_bytes, weights_source = weights_from_index(index), "model.safetensors.index.json"
    if weights_bytes is None and count_weights:
        weights_bytes, weights_source = engine_memory.weights_from_config(arch), "counted from config.json"
    if weights_bytes is None:
        raise ProfileError("%s: give weights_bytes or model.safetensors.index.json (metadata.total_size) "
                           "so the planner knows the weight size" % name)
    serving = {"min_vllm_version": arch.get("min_vllm_version") or "0.0.0", "features": generic_features()}
    borrowed = None
    if like is not None:
        serving = like["serving"]
        borrowed = like["id"]
    p = {
        "id": name, "family": like["family"] if like else name, "variant": arch["quant_method"] or arch["dtype"],
        "quantization": arch["quant_method"], "weights_bytes": int(weights_bytes),
        "vision_weights_bytes": 0, "mtp_weights_bytes": 0, "config": config, "serving": serving,
        "features_from": borrowed, "arch": arch, "weights_source": weights_source,
    }
    return p


def match_profile(profiles, arch):
    """The profile whose config has the same model_type and quantisation as ``arch`` (None when none does)."""
    for p in profiles.values():
        if p["arch"]["model_type"] == arch["model_type"] and p["arch"]["quant_method"] == arch["quant_method"]:
            return p
    return None


def read_model_dir(path):
    """Read config.json (+ model.safetensors.index.json when present) from a directory or a config.json path.
    Returns (config, index or None, weights_bytes or None).  Without an index, the *.safetensors sizes are summed.
    """
    cfg_path = path if os.path.basename(path) == "config.json" else os.path.join(path, "config.json")
    d = os.path.dirname(cfg_path)
    if not os.path.isfile(cfg_path):
        raise ProfileError("%s: no config.json there (model must be a profile name, a model directory or a "
                           "config.json path)" % path)
    with open(cfg_path) as fh:
        config = json.load(fh)
    index = None
    idx_path = os.path.join(d, "model.safetensors.index.json")
    if os.path.isfile(idx_path):
        with open(idx_path) as fh:
            index = json.load(fh)
        return config, index, None
    shards = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".safetensors")]
    if shards:
        return config, None, sum(os.path.getsize(s) for s in shards)
    return config, None, None
