# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the plan actions (vllm_plan, vllm_placement) read before they plan: the hardware (gpu_facts, a gpu_facts
file or described hardware, annotated from the GPU catalogue), the model profiles (the collection's and the user's
profiles_path) and one model's profile (a profile, a model directory, model_config or the hub's metadata).

Controller only: it reads files on the controller and the hub (hub_metadata).
"""

from __future__ import annotations

import json
import os

from ansible.errors import AnsibleActionFail

from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.gpu_catalogue import (
    CatalogueError, annotate_gpu_facts, load_catalogue)
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.topology import gpu_facts_from_spec
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import hub_metadata as H
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.model_profiles import (
    NotModelledError, ProfileError, load_profiles, match_profile, normalize_config, profile_from_model_dir,
    read_model_dir)

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# What a plan action reports as its own failure ("<action>: <message>"): bad input, an unknown model or GPU, the hub.
PLAN_ERRORS = (PlanError, ProfileError, CatalogueError, H.HubMetadataError, ValueError, OSError)


def load_all_profiles(extra_dirs):
    """The collection's profiles, and those of extra_dirs (profiles_path) that do not shadow one of them."""
    profiles = load_profiles(os.path.join(COLLECTION_ROOT, "profiles"))
    for d in extra_dirs or []:
        for pid, p in load_profiles(os.path.expanduser(d), bases=profiles).items():
            profiles.setdefault(pid, p)
    return profiles


def understood(config, where, index=None, weights_bytes=None, hub_metadata=None):
    """normalize_config, and on a model the planner does not model, the files a plan by hand needs (kv_by_hand)."""
    try:
        return normalize_config(config, where=where)
    except NotModelledError as e:
        e.model_files = {"config": config, "index": index, "weights_bytes": weights_bytes,
                         "hub_metadata": hub_metadata}
        raise


def resolve_model(args, profiles):
    """The profile of args["model"]: model_config (+ weights_bytes), a known profile, a model directory on the
    controller or a hub repo id, in that order."""
    model = args["model"]
    known = profiles.get(model)
    if args.get("model_config") is not None:
        wb = args.get("weights_bytes") or (known["weights_bytes"] if known else None)
        arch = understood(args["model_config"], "model_config", weights_bytes=wb)
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
        arch = understood(config, path, index=index, weights_bytes=args.get("weights_bytes") or wb)
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
    arch = understood(meta["config"], "%s@%s config.json" % (model, meta["commit"]), index=meta["index"],
                      weights_bytes=wb, hub_metadata=hub)
    p = profile_from_model_dir(meta["config"], index=meta["index"], weights_bytes=wb, name=model,
                               like=match_profile(profiles, arch), count_weights=True)
    p["hub_metadata"] = hub
    return p


def load_facts_file(path):
    """One host's gpu_facts from a JSON or YAML file (the facts, or a document with a gpu_facts key)."""
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


def gpu_facts_arg(value):
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


def hardware(args, one_host=None):
    """(the gpu_facts to plan for, annotated from the GPU catalogue, or None; the table label, or None): from
    gpu_facts, gpu_facts_file or described hardware, whichever is given. one_host: the message that refuses a list
    of hosts' gpu_facts (an action that plans one host)."""
    label = args.get("hardware_label")
    facts = None
    if args["gpu_facts"] is not None:
        facts = gpu_facts_arg(args["gpu_facts"])
        if one_host and isinstance(facts, list):
            raise PlanError(one_host)
    elif args["gpu_facts_file"]:
        facts = load_facts_file(args["gpu_facts_file"])
    elif args["hardware"] is not None:
        facts = gpu_facts_from_spec(args["hardware"], load_catalogue())
        if label is None and isinstance(args["hardware"], str):
            label = args["hardware"]
            if (args.get("hosts") or 1) > 1:
                label = "%d x (%s)" % (args["hosts"], label)
    if facts is not None:
        # One place for each GPU fact: the catalogue adds what nvidia-smi's name implies (driver reserve,
        # FP8 support) to real gpu_facts and described hardware alike.
        cat = load_catalogue()
        facts = [annotate_gpu_facts(f, cat) for f in facts] if isinstance(facts, list) \
            else annotate_gpu_facts(facts, cat)
    return facts, label
