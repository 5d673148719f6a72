# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin for llmfleet.vllm.vllm_plan: plans on the controller (documentation in plugins/modules)."""
from __future__ import annotations

import json
import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import hub_metadata as H
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.gpu_catalogue import (
    CatalogueError, annotate_gpu_facts, load_catalogue)
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.manual_kv import plan_by_hand
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.model_profiles import (
    NotModelledError, ProfileError, load_profiles, match_profile, normalize_config, profile_from_model_dir,
    read_model_dir, weights_from_index)
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.engine_args import engine_overrides
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.planner import TABLE_HEADER, plan, table_row
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.topology import gpu_facts_from_spec
from ansible_collections.llmfleet.vllm.plugins.modules.vllm_plan import ARGUMENT_SPEC, MUTUALLY_EXCLUSIVE

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load_all(extra_dirs):
    profiles = load_profiles(os.path.join(COLLECTION_ROOT, "profiles"))
    for d in extra_dirs or []:
        for pid, p in load_profiles(os.path.expanduser(d), bases=profiles).items():
            profiles.setdefault(pid, p)
    return profiles


def _understood(config, where, index=None, weights_bytes=None, hub_metadata=None):
    """normalize_config, and on a model the planner does not model, the files a plan by hand needs (kv_by_hand)."""
    try:
        return normalize_config(config, where=where)
    except NotModelledError as e:
        e.model_files = {"config": config, "index": index, "weights_bytes": weights_bytes,
                         "hub_metadata": hub_metadata}
        raise


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


def _resolve_model(args, profiles):
    model = args["model"]
    known = profiles.get(model)
    if args.get("model_config") is not None:
        wb = args.get("weights_bytes") or (known["weights_bytes"] if known else None)
        arch = _understood(args["model_config"], "model_config", weights_bytes=wb)
        like = known or match_profile(profiles, arch)
        if wb is None:
            raise ProfileError("model_config given for %s, which is not a known profile: give weights_bytes too "
                               "(metadata.total_size of model.safetensors.index.json)" % model)
        p = profile_from_model_dir(args["model_config"], weights_bytes=wb, name=model, like=like)
        if known:
            p["vision_weights_bytes"] = known.get("vision_weights_bytes", 0)
            p["mtp_weights_bytes"] = known.get("mtp_weights_bytes", 0)
        return p
    if known:
        p = dict(known)
        if args.get("weights_bytes"):
            p["weights_bytes"] = args["weights_bytes"]
        return p
    path = os.path.expanduser(model)
    if os.path.exists(path):
        config, index, wb = read_model_dir(path)
        arch = _understood(config, path, index=index, weights_bytes=args.get("weights_bytes") or wb)
        return profile_from_model_dir(config, index=index, weights_bytes=args.get("weights_bytes") or wb,
                                      name=model, like=match_profile(profiles, arch))
    if H.looks_like_repo_id(model):
        return _from_hub(args, model, profiles)
    raise ProfileError("unknown model %r: not a profile (%s), not a path on the controller and not a hub repo id "
                       "(org/name); give a repo id, a model directory, or model_config + weights_bytes"
                       % (model, ", ".join(sorted(profiles))))


def _from_hub(args, model, profiles):
    """A repo id without a profile file: its config.json, generation_config.json and safetensors index from the
    hub (hub_metadata.fetch_metadata, cached on the controller), planned with the engine options every model has."""
    try:
        meta = H.fetch_metadata(model, args["hub_source"], args.get("hub_revision"), args.get("hub_endpoint"),
                                args.get("hub_token"), args["metadata_cache_dir"])
    except H.HubMetadataError as e:
        raise H.HubMetadataError("%s (or name one of the profiles: %s)" % (e, ", ".join(sorted(profiles))))
    hub = {"source": args["hub_source"], "commit": meta["commit"], "cached": meta["cached"],
           "path": meta["path"], "generation_config": meta.get("generation_config")}
    wb = args.get("weights_bytes") or (None if meta["index"] else meta.get("safetensors_bytes"))
    arch = _understood(meta["config"], "%s@%s config.json" % (model, meta["commit"]), index=meta["index"],
                       weights_bytes=wb, hub_metadata=hub)
    p = profile_from_model_dir(meta["config"], index=meta["index"], weights_bytes=wb, name=model,
                               like=match_profile(profiles, arch), count_weights=True)
    p["hub_metadata"] = hub
    return p


def _load_facts_file(path):
    import yaml

    with open(os.path.expanduser(path)) as fh:
        text = fh.read()
    try:
        data = json.loads(text)
    except ValueError:
        data = yaml.safe_load(text)
    if isinstance(data, dict) and "gpu_facts" in data:
        data = data["gpu_facts"]
    if not isinstance(data, dict) or "gpus" not in data:
        raise AnsibleActionFail("gpu_facts_file %s does not hold gpu_facts (no 'gpus' key)" % path)
    return data


def _gpu_facts_arg(value):
    """gpu_facts as given: one host's facts (a dict, or a registered gpu_facts result) or a list of them."""
    def one(v, where):
        if isinstance(v, dict) and "gpu_facts" in v and "gpus" not in v:
            v = v["gpu_facts"]
        if not isinstance(v, dict) or "gpus" not in v:
            raise PlanError("gpu_facts%s is not gpu_facts (no 'gpus' key): give llmfleet.vllm.gpu_facts' result, or "
                            "a list of them, one per host of the group" % where)
        return v
    if isinstance(value, (list, tuple)):
        return [one(v, "[%d]" % i) for i, v in enumerate(value)]
    return one(value, "")


def _hardware(args):
    """(the gpu_facts to plan for, annotated from the GPU catalogue, or None; the table label, or None): from
    gpu_facts, gpu_facts_file or described hardware, whichever is given."""
    label = args.get("hardware_label")
    facts = None
    if args["gpu_facts"] is not None:
        facts = _gpu_facts_arg(args["gpu_facts"])
    elif args["gpu_facts_file"]:
        facts = _load_facts_file(args["gpu_facts_file"])
    elif args["hardware"] is not None:
        facts = gpu_facts_from_spec(args["hardware"], load_catalogue())
        if label is None and isinstance(args["hardware"], str):
            label = args["hardware"]
            if (args["hosts"] or 1) > 1:
                label = "%d x (%s)" % (args["hosts"], label)
    if facts is not None:
        # One place for each GPU fact: the catalogue adds what nvidia-smi's name implies (driver reserve,
        # FP8 support) to real gpu_facts and described hardware alike.
        cat = load_catalogue()
        facts = [annotate_gpu_facts(f, cat) for f in facts] if isinstance(facts, list) \
            else annotate_gpu_facts(facts, cat)
    return facts, label


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
        profile = _resolve_model(args, profiles)
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
            facts, label = _hardware(args)
            _check_accelerator(args, facts)
            p, profile, args = _plan_model(args, facts, _load_all(args["profiles_path"]))
        except (PlanError, ProfileError, CatalogueError, H.HubMetadataError, ValueError, OSError) as e:
            raise AnsibleActionFail("vllm_plan: %s" % e)
        if label is None:
            label = _label_from_facts(args, facts)
        result.update(changed=False, plan=p, table_header=TABLE_HEADER, table_row=table_row(label, p),
                      hub_metadata=profile.get("hub_metadata"))
        if args["fail_if_not_fits"] and not p["fits"]:
            result["failed"] = True
            result["msg"] = _not_fit_message(p)
        return result
