# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin for llmfleet.vllm.vllm_placement: places a host's models on the controller (documentation in
plugins/modules/vllm_placement.py)."""
from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.llmfleet.vllm.plugins.modules.vllm_placement import (
    ARGUMENT_SPEC, MUTUALLY_EXCLUSIVE, REQUIRED_ONE_OF)
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.model_list import model_list
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import hub_metadata as H
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.engine_args import engine_overrides
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.lora import planned_lora
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.pooling import pooling_attention, pooling_features
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.model_profiles import ProfileError, read_model_dir
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.plan_inputs import (
    PLAN_ERRORS, hardware, load_all_profiles, resolve_model)
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.placement import (
    PLACEMENT_HEADER, place, placement_rows)

# Set by the placement itself: an entry's args_extra may not set them (its tensor_parallel_size and gpu_share do).
PLACED_INPUTS = ("gpu_memory_utilization", "tensor_parallel_size", "kv_cache_memory_bytes")


def _encoder(args, entry):
    """An encoder-only pooling model's config.json and weights ({config, weights_bytes}: a model directory on the
    controller or a hub repo id), planned without planner.plan (pooling.encoder_plan); None for any other model."""
    path = os.path.expanduser(entry["model"])
    if os.path.isdir(path):
        config, index, weights = read_model_dir(path)
    elif H.looks_like_repo_id(entry["model"]):
        meta = H.fetch_metadata(entry["model"], args["hub_source"], entry["revision"] or args.get("hub_revision"),
                                args.get("hub_endpoint"), args.get("hub_token"), args["metadata_cache_dir"])
        config, index, weights = meta["config"], meta["index"], meta.get("safetensors_bytes")
    else:
        return None
    if pooling_attention(config) != "encoder_only":
        return None
    return {"config": config, "weights_bytes": ((index or {}).get("metadata") or {}).get("total_size") or weights}


def _inputs(args, index, entry, profiles):
    """planner.plan's inputs of one entry: its profile, and its args_extra read like vllm_plan reads them; an
    encoder-only pooling model's config and weights instead (no KV cache to plan)."""
    var = "llmfleet_models[%d].args_extra" % index
    encoder = _encoder(args, entry) if entry["runner"] == "pooling" else None
    if encoder:
        return {"encoder": encoder, "plan_args": {"max_model_len": entry["max_model_len"]}}
    margs = dict(args, model=entry["model"], model_config=None, weights_bytes=None,
                 hub_revision=entry["revision"] or args.get("hub_revision"))
    try:
        profile = resolve_model(margs, profiles)
    except (ProfileError, H.HubMetadataError) as e:
        raise PlanError("llmfleet_models[%d] (%s), model %s: %s" % (index, entry["name"], entry["model"], e))
    names = tuple(((profile or {}).get("serving") or {}).get("features") or {})
    given, features, hybrid, _notes = engine_overrides(entry["args_extra"], entry["env"], names, var=var)
    placed = sorted(set(given) & set(PLACED_INPUTS))
    if placed:
        raise PlanError("%s sets %s, which the placement decides: use the entry's tensor_parallel_size and gpu_share"
                        % (var, ", ".join(placed)))
    plan_args = dict(objective=args["objective"], max_model_len=entry["max_model_len"] or args["max_model_len"],
                     vllm_version=args["vllm_version"], hybrid_manager=hybrid,
                     features=dict(entry["features"] or {}, **features) or None)
    plan_args.update(given)
    if entry["runner"] == "pooling":
        # prefix caching as vLLM sets it for a pooling model (off for MEAN / CLS pooling); the entry's own wins
        plan_args["features"] = dict(pooling_features(profile.get("config") or {}, vllm_version=args["vllm_version"]),
                                     **(plan_args["features"] or {}))
    out = {"profile": profile, "plan_args": plan_args, "alternatives": list(profiles.values())}
    if entry["adapters"]:
        out["lora"] = planned_lora(entry["adapters"])
    return out


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC,
                                                        mutually_exclusive=MUTUALLY_EXCLUSIVE,
                                                        required_one_of=REQUIRED_ONE_OF)
        label = args["hardware_label"] or (args["hardware"] if isinstance(args["hardware"], str) else None)
        try:
            facts, _label = hardware(args, one_host="vllm_placement places the models of ONE host: give one host's "
                                                    "gpu_facts")
            checked = model_list(args["models"], gpu_count=len(facts["gpus"]))
            if checked["problems"]:
                raise PlanError("llmfleet_models: " + " ".join(checked["problems"]))
            profiles = load_all_profiles(args["profiles_path"])
            inputs = {e["name"]: _inputs(args, i, e, profiles) for i, e in enumerate(checked["models"])}
            placement = place(facts, checked["models"], inputs, budget=args["gpu_memory_utilization"])
        except PLAN_ERRORS as e:
            raise AnsibleActionFail("vllm_placement: %s" % e)
        if label is None:
            label = "%dx %s" % (len(facts["gpus"]), "/".join(sorted({g.get("name") or "GPU" for g in facts["gpus"]})))
        result.update(changed=False, placement=placement, table_header=PLACEMENT_HEADER,
                      table_rows=placement_rows(label, placement))
        if args["fail_if_not_fits"] and not placement["fits"]:
            result.update(failed=True, msg="vllm_placement: " + " ".join(placement["problems"]))
        return result
