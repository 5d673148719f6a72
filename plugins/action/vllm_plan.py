# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin for llmfleet.vllm.vllm_plan: plans on the controller (documentation in plugins/modules)."""
from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.manual_kv import plan_by_hand
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.model_profiles import NotModelledError, weights_from_index
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.engine_args import engine_overrides
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.plan_inputs import (
    PLAN_ERRORS, hardware, load_all_profiles, resolve_model)
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.planner import TABLE_HEADER, plan, table_row
from ansible_collections.llmfleet.vllm.plugins.modules.vllm_plan import ARGUMENT_SPEC, MUTUALLY_EXCLUSIVE


def _plan_by_hand(args, facts, err):
    """A model the planner does not understand, planned with the KV cache the user sized by hand (or refused with
    the planner's message when none is set)."""
    files = err.model_files
    wb, source = files["weights_bytes"], "given"
    if args.get("weights_bytes"):
        wb = args["weights_bytes"]
    elif files["index"]:
        wb, source = weights_from_index(files["index"]), "model.safetensors.index.json"
    elif wb:
        source = "the hub's safetensors file sizes"
    return plan_by_hand(facts, args["model"], files["config"], wb, args["kv_cache_memory_bytes"], str(err),
                        accelerator=args["accelerator"], max_model_len=args["max_model_len"],
                        max_num_seqs=args["max_num_seqs"], gpu_memory_utilization=args["gpu_memory_utilization"],
                        tensor_parallel_size=args["tensor_parallel_size"], replicas=args["replicas"],
                        features=args["features"], kv_cache_dtype=args["kv_cache_dtype"], weights_source=source)


def _engine_inputs(args, profile=None):
    """The plan's inputs as the engine will run: the memory flags of engine_args (vllm_server_args_extra) over the
    plan's own inputs; returns (inputs, hybrid_manager, the flags read)."""
    names = tuple(((profile or {}).get("serving") or {}).get("features") or {})
    inputs, features, hybrid, notes = engine_overrides(args["engine_args"], args["engine_env"], names,
                                                       var=args["engine_args_var"])
    merged = dict(args)
    merged.update(inputs)
    if features:
        merged["features"] = dict(args["features"] or {}, **features)
    return merged, hybrid, notes


def _check_accelerator(args, facts):
    """GPUs to plan for on the GPU engine, none on the CPU engine."""
    if args["accelerator"] == "gpu" and facts is None:
        raise PlanError("give gpu_facts (from llmfleet.vllm.gpu_facts), gpu_facts_file or hardware; "
                        "or plan for the CPU engine with accelerator: cpu")
    if args["accelerator"] == "cpu" and facts is not None and (isinstance(facts, list) or facts.get("gpus")):
        raise PlanError("accelerator cpu plans for the vLLM CPU engine: drop gpu_facts / hardware")


def _plan_model(args, facts, profiles):
    """(the plan, the model's profile, the inputs as the engine will run): by the planner, or by hand for a model
    it does not understand."""
    try:
        profile = resolve_model(args, profiles)
    except NotModelledError as e:
        if getattr(e, "model_files", None) is None:
            raise
        profile = {"hub_metadata": e.model_files["hub_metadata"]}
        args, _hybrid, notes = _engine_inputs(args)
        p = _plan_by_hand(args, facts, e)
    else:
        args, hybrid, notes = _engine_inputs(args, profile)
        if args["accelerator"] == "gpu" and args["kv_cache_memory_bytes"]:
            raise PlanError("kv_cache_memory_bytes is for a model the planner does not understand; it sizes "
                            "the KV cache of %s itself (from gpu_memory_utilization): drop "
                            "kv_cache_memory_bytes (or --kv-cache-memory-bytes from %s)"
                            % (args["model"], args["engine_args_var"]))
        p = plan(facts, profile, objective=args["objective"], max_model_len=args["max_model_len"],
                 max_num_seqs=args["max_num_seqs"], gpu_memory_utilization=args["gpu_memory_utilization"],
                 accelerator=args["accelerator"], kv_cache_memory_bytes=args["kv_cache_memory_bytes"],
                 features=args["features"], tensor_parallel_size=args["tensor_parallel_size"],
                 enable_expert_parallel=args["enable_expert_parallel"], kv_cache_dtype=args["kv_cache_dtype"],
                 vllm_version=args["vllm_version"], max_num_batched_tokens=args["max_num_batched_tokens"],
                 replicas=args["replicas"], hosts=args["hosts"], alternatives=list(profiles.values()),
                 hybrid_manager=hybrid)
    if notes:
        p.setdefault("reasons", []).insert(0, "Planned for the engine as it will run, with what %s adds to the "
                                              "plan's flags: %s." % (args["engine_args_var"], ", ".join(notes)))
    return p, profile, args


def _label_from_facts(args, facts):
    """The table label of the hardware planned for: "CPU engine", or the GPUs ("2x NVIDIA H200"), per host."""
    if args["accelerator"] == "cpu":
        return "CPU engine"
    one = facts[0] if isinstance(facts, list) else facts
    names = sorted({g.get("name") or "GPU" for g in one["gpus"]})
    label = "%dx %s" % (len(one["gpus"]), "/".join(names))
    hosts = len(facts) if isinstance(facts, list) else (args["hosts"] or 1)
    if hosts > 1:
        label = "%d x (%s)" % (hosts, label)
    return label


def _not_fit_message(p):
    # The reasons that say why it does not fit (memory, vLLM version), else the last one.
    why = [r for r in p["reasons"] if r.startswith("Does not fit") or " is older than " in r]
    return "%s does not fit: %s Suggestions: %s" % (
        p["model"], " ".join(why or p["reasons"][-1:]),
        " / ".join(s["text"] for s in p["suggestions"]) or "none")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC,
                                                        mutually_exclusive=MUTUALLY_EXCLUSIVE)
        try:
            facts, label = hardware(args)
            _check_accelerator(args, facts)
            p, profile, args = _plan_model(args, facts, load_all_profiles(args["profiles_path"]))
        except PLAN_ERRORS as e:
            raise AnsibleActionFail("vllm_plan: %s" % e)
        if label is None:
            label = _label_from_facts(args, facts)
        result.update(changed=False, plan=p, table_header=TABLE_HEADER, table_row=table_row(label, p),
                      hub_metadata=profile.get("hub_metadata"))
        if args["fail_if_not_fits"] and not p["fits"]:
            result["failed"] = True
            result["msg"] = _not_fit_message(p)
        return result
