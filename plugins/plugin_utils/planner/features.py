# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Profile features (data) -> the set that is on, and the vLLM arguments they render; pure functions."""

from __future__ import annotations

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.vllm_versions import version_at_least

# A profile feature whose default is this word takes vLLM's own default for the model and version (the generic
# prefix_caching feature of a model without a profile file: model_profiles.generic_features).
VLLM_DEFAULT = "vllm"

# vLLM's default for prefix caching when neither --enable-prefix-caching nor --no-enable-prefix-caching is given:
# EngineArgs._set_default_chunked_prefill_and_prefix_caching_args sets enable_prefix_caching to
# ModelConfig.is_prefix_caching_supported, which for a generative model reads ModelConfig.attn_type: "hybrid" when the
# model class is IsHybrid and has a non-attention layer (ModelConfig.is_hybrid), "attention_free" for IsAttentionFree
# classes (Mamba, Mamba2), else "decoder".  Read from each release's source:
#   0.22.0  vllm/engine/arg_utils.py:2369 + 2399-2400; vllm/config/model.py:1859-1864 hybrid -> False ("Hybrid models
#           do not support prefix caching since the feature is still experimental"), 1865-1870 attention_free ->
#           False, 1874-1876 decoder -> True
#   0.28.0  vllm/engine/arg_utils.py:2650 + 2680-2681; vllm/config/model.py:2072-2074 hybrid -> True ("Generative
#           hybrid models support prefix caching"), 2075-2080 attention_free -> False, 2084-2086 decoder -> True
#   0.32.0  vllm/engine/arg_utils.py:2991 + 3021-3022; vllm/config/model.py:2259-2261 hybrid -> True, 2262-2267
#           attention_free -> False, 2271-2273 decoder -> True
# Keyed by release line (major.minor): a patch release reads as its line.
PREFIX_CACHING_DEFAULTS = {
    "0.22": {"decoder": True, "hybrid": False, "attention_free": False},
    "0.28": {"decoder": True, "hybrid": True, "attention_free": False},
    "0.32": {"decoder": True, "hybrid": True, "attention_free": False},
}
_ATTN_TYPE_WORDS = {"decoder": "a decoder (attention layers only)",
                    "hybrid": "a hybrid (attention and state layers: ModelConfig.is_hybrid)",
                    "attention_free": "attention-free (state layers only)"}


def vllm_attn_type(arch):
    """vLLM's ModelConfig.attn_type of a generative model: hybrid, attention_free or decoder."""
    if not arch.get("linear_attention_layers"):
        return "decoder"
    return "hybrid" if arch.get("full_attention_layers") else "attention_free"


def _release_line(version):
    """The read release line ("0.22") that ``version`` belongs to, or None when no line of it was read."""
    for line in PREFIX_CACHING_DEFAULTS:
        major, minor = (int(x) for x in line.split("."))
        if version_at_least(version, "%d.%d.0" % (major, minor)) and \
                not version_at_least(version, "%d.%d.0" % (major, minor + 1)):
            return line
    return None


def vllm_prefix_caching_default(arch, vllm_version=None):
    """(on, why): prefix caching as vLLM turns it on or off by itself for this model and version
    (PREFIX_CACHING_DEFAULTS).  For a version whose source was not read (or none given) a model with state layers is
    planned with prefix caching on: a sequence then holds more state blocks (mamba cache mode 'align' or 'all'), so the
    plan holds no more sequences than vLLM, whichever default that version has."""
    kind = _ATTN_TYPE_WORDS[vllm_attn_type(arch)]
    line = _release_line(vllm_version) if vllm_version else None
    if line is not None:
        on = PREFIX_CACHING_DEFAULTS[line][vllm_attn_type(arch)]
        return on, "vLLM %s's default for %s (ModelConfig.is_prefix_caching_supported)" % (vllm_version, kind)
    if vllm_attn_type(arch) == "decoder":
        return True, "vLLM's default for %s in every release read (0.22, 0.28, 0.32)" % kind
    return True, ("vLLM %s: the releases read differ for %s (0.22: off; 0.28, 0.32: on); planned on, which holds more "
                  "state blocks per sequence, so the plan is not above vLLM either way"
                  % ("version not given" if not vllm_version else vllm_version + " was not read", kind))


def resolve_features(profile, objective, requested, context, strict=True):
    """Decide which profile features are on.

    ``requested``: {feature: bool or None} from the user (None = profile default for the objective).
    ``context``: {expert_parallel: bool, hybrid: bool, mtp_layers: int} (what ``requires`` can name), and
    {vllm_defaults: {feature: bool}} for features whose default is VLLM_DEFAULT (vLLM's own, for this model and version).
    Returns (enabled {name: bool}, reasons [str]).  Raises PlanError on contradictions the user asked for.
    """
    feats = profile["serving"].get("features") or {}
    requested = {k: v for k, v in (requested or {}).items() if v is not None}
    unknown = sorted(set(requested) - set(feats))
    if unknown:
        raise PlanError("feature(s) %s are not defined for %s; its features: %s"
                        % (", ".join(unknown), profile["id"], ", ".join(sorted(feats)) or "none"))
    reasons = []
    enabled = {}
    explicit = {}
    for name, f in feats.items():
        d = f.get("default", False)
        if isinstance(d, dict):
            d = d[objective]
        if d == VLLM_DEFAULT:
            d = (context.get("vllm_defaults") or {})[name]
        explicit[name] = name in requested
        enabled[name] = bool(requested.get(name, d))
    for name, f in feats.items():
        if not enabled[name]:
            continue
        for req in f.get("requires") or []:
            ok = bool(context.get(req))
            if not ok:
                if explicit[name] and strict:
                    raise PlanError("feature %s needs %s, which this plan does not have (%s)"
                                    % (name, req, _REQUIRE_TEXT[req]))
                enabled[name] = False
                if explicit[name]:
                    reasons.append("%s is off: it needs %s, which this plan does not have." % (name, req))
    for name, f in feats.items():
        for c in f.get("conflicts") or []:
            other = c["feature"]
            if not (enabled[name] and enabled.get(other)):
                continue
            if explicit[name] and explicit[other]:
                raise PlanError("features %s and %s were both requested but conflict: %s Turn one of them off."
                                % (name, other, c["reason"]))
            loser = other if explicit[name] or not explicit[other] else name
            winner = name if loser == other else other
            enabled[loser] = False
            reasons.append("%s is off because %s is on: %s" % (loser, winner, " ".join(c["reason"].split())))
    return enabled, reasons


_REQUIRE_TEXT = {
    "expert_parallel": "expert parallelism is planned only for a TP group of 2+ GPUs inside one NVLink domain",
    "hybrid": "only hybrid linear-attention models have it",
    "mtp_layers": "the model config has no MTP layers",
}


def feature_args(profile, enabled):
    """vLLM args contributed by the profile's features: args_on when on, args_off when off."""
    args = {}
    for name, f in (profile["serving"].get("features") or {}).items():
        part = f.get("args_on") if enabled.get(name) else f.get("args_off")
        for k, v in (part or {}).items():
            args[k] = v
    return args


def _speculative_tokens(profile, enabled):
    """num_speculative_tokens of the speculative-config an enabled feature renders (0 when none)."""
    for name, f in (profile["serving"].get("features") or {}).items():
        if enabled.get(name):
            sc = (f.get("args_on") or {}).get("speculative-config")
            if isinstance(sc, dict):
                return int(sc.get("num_speculative_tokens", 1))
    return 0


def feature_context(arch, expert_parallel, vllm_version=None):
    """What a feature's ``requires`` and a VLLM_DEFAULT default read (resolve_features' ``context``)."""
    return {"expert_parallel": expert_parallel, "hybrid": arch["linear_attention_layers"] > 0,
            "mtp_layers": arch["mtp_layers"],
            "vllm_defaults": {"prefix_caching": vllm_prefix_caching_default(arch, vllm_version)[0]}}


def _prefix_caching_on(profile, enabled, vllm_default=False):
    """Whether the rendered flags turn prefix caching on; ``vllm_default`` when no feature renders the flag (vLLM
    then decides by itself)."""
    for name, f in (profile["serving"].get("features") or {}).items():
        part = f.get("args_on") if enabled.get(name) else f.get("args_off")
        if "enable-prefix-caching" in (part or {}):
            return bool(part["enable-prefix-caching"])
    return vllm_default


def prefix_caching_reason(profile, objective, requested, on, arch, vllm_version=None):
    """The plan's first reason: prefix caching on or off, and which default (the user's, the profile's, vLLM's)
    decided it."""
    vllm_on, why = vllm_prefix_caching_default(arch, vllm_version)
    word = "on" if on else "off"
    feats = profile["serving"].get("features") or {}
    if (requested or {}).get("prefix_caching") is not None:
        return "Prefix caching %s: requested (features.prefix_caching); %s would be %s by default." % (
            word, why, "on" if vllm_on else "off")
    f = feats.get("prefix_caching")
    if f is None or f.get("default") == VLLM_DEFAULT:
        tail = "" if f is not None else " (the profile renders no prefix-caching flag, so vLLM decides)"
        return "Prefix caching %s: %s%s." % (word, why, tail)
    return "Prefix caching %s: the profile's default for the %s objective (%s would be %s by default)." % (
        word, objective, why, "on" if vllm_on else "off")


def _eager(profile, enabled):
    for name, f in (profile["serving"].get("features") or {}).items():
        if enabled.get(name) and (f.get("args_on") or {}).get("enforce-eager"):
            return True
    return False
