# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The engine arguments a replica gets beyond the plan's own (vllm_server_args_extra, vllm_server_env) that change
vLLM's memory or KV layout, read as plan inputs: the plan is made for the engine as it will run, not for the flags
the plan would have chosen.  Pure functions, no I/O.

  flag (args_extra)                        plan input
  max-model-len, max-num-seqs,             the plan inputs of the same name (the flag wins: it is what the
  max-num-batched-tokens,                  container's argv ends with)
  gpu-memory-utilization, kv-cache-dtype,
  tensor-parallel-size, kv-cache-memory-bytes
  enable-prefix-caching / no-enable-...    feature prefix_caching (when the model's features have it)
  enforce-eager                            feature enforce_eager (likewise)
  disable-hybrid-kv-cache-manager          vLLM's hybrid KV cache manager off (kv_specs.unify_without_hybrid_manager)

  env VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1: the hybrid manager on for chunked local attention.
"""

from __future__ import annotations

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_args import VllmArgsError, flag_name

PLAN_INPUTS = {
    "max-model-len": ("max_model_len", int), "max-num-seqs": ("max_num_seqs", int),
    "max-num-batched-tokens": ("max_num_batched_tokens", int),
    "gpu-memory-utilization": ("gpu_memory_utilization", float), "kv-cache-dtype": ("kv_cache_dtype", str),
    "tensor-parallel-size": ("tensor_parallel_size", int), "kv-cache-memory-bytes": ("kv_cache_memory_bytes", int),
}
FEATURE_FLAGS = {"enable-prefix-caching": "prefix_caching", "enforce-eager": "enforce_eager"}
CHUNKED_HYBRID_ENV = "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE"
_TRUE = ("1", "true", "yes", "on")
_KIND_WORDS = {int: "a whole number", float: "a number", str: "a string"}


def _on(value):
    """A flag's boolean value as args_extra spells it (true, "true", 1; None / false: off)."""
    if isinstance(value, str):
        return value.strip().lower() in _TRUE
    return bool(value)


def _flags(engine_args):
    """(flag name, value) of each key that is a flag name (vllm_args.flag_name); input_check refuses the others."""
    for key, value in (engine_args or {}).items():
        try:
            yield flag_name(key), value
        except VllmArgsError:
            continue


def _value(flag, value, kind, var):
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise PlanError("%s: --%s must be %s, got %r" % (var, flag, _KIND_WORDS[kind], value))


def engine_overrides(engine_args, engine_env=None, feature_names=(), var="vllm_server_args_extra"):
    """What the engine arguments change in the plan: (inputs {plan input: value}, features {name: bool},
    hybrid_manager True / False / None (vLLM's default), notes [str], one per flag that was read)."""
    inputs, features, notes = {}, {}, []
    hybrid = None
    for flag, value in sorted(_flags(engine_args), key=lambda fv: fv[0]):
        if flag in PLAN_INPUTS and value is not None:
            name, kind = PLAN_INPUTS[flag]
            inputs[name] = _value(flag, value, kind, var)
            notes.append("--%s %s" % (flag, inputs[name]))
        elif flag.startswith("no-") and flag[3:] in FEATURE_FLAGS and FEATURE_FLAGS[flag[3:]] in feature_names:
            features[FEATURE_FLAGS[flag[3:]]] = not _on(value)
            notes.append("--%s" % flag)
        elif flag in FEATURE_FLAGS and FEATURE_FLAGS[flag] in feature_names and value is not None:
            features[FEATURE_FLAGS[flag]] = _on(value)
            notes.append("--%s %s" % (flag, str(_on(value)).lower()))
        elif flag == "disable-hybrid-kv-cache-manager" and _on(value):
            hybrid = False
            notes.append("--%s" % flag)
    if hybrid is None and _on((engine_env or {}).get(CHUNKED_HYBRID_ENV)):
        hybrid = True
        notes.append("%s=1" % CHUNKED_HYBRID_ENV)
    return inputs, features, hybrid, notes
