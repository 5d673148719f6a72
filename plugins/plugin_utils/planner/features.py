# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Profile features (data) -> the set that is on, and the vLLM arguments they render; pure functions."""

from __future__ import annotations

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError


def resolve_features(profile, objective, requested, context, strict=True):
    """Decide which profile features are on.

    ``requested``: {feature: bool or None} from the user (None = profile default for the objective).
    ``context``: {expert_parallel: bool, hybrid: bool, mtp_layers: int} (what ``requires`` can name).
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


def _prefix_caching_on(profile, enabled):
    for name, f in (profile["serving"].get("features") or {}).items():
        part = f.get("args_on") if enabled.get(name) else f.get("args_off")
        if "enable-prefix-caching" in (part or {}):
            return bool(part["enable-prefix-caching"])
    return False


def _eager(profile, enabled):
    for name, f in (profile["serving"].get("features") or {}).items():
        if enabled.get(name) and (f.get("args_on") or {}).get("enforce-eager"):
            return True
    return False
