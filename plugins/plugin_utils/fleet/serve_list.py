# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The models a serving host runs from ``llmfleet_models`` (issue #39 item 3): each entry's replicas, ports and
flags, as replica_spec's ``models`` (pure functions, no I/O).

  assign_ports(instances, recorded, first)        {instance: port}: recorded ports kept, new ones the lowest free
  cpu_placement(entries)                          llmfleet_placement on the CPU engine: each entry's replicas, no GPU
  list_models(entries, base, serve, accelerator)  replica_spec's models, one per entry
  served_flags(entry, table, adapters)            an entry's runner and LoRA flags, as the image spells them
  entry_adapters(entry, serve)                    an entry's adapters: name, host dir, container path, rank
  failed_models(result)                           the models whose replicas a failed loop task failed on
  flag_check_models(models, one_model)            vllm_flag_check's models: each model's argv and the variables it names
  stale_instances(recorded, serving, files)       the instances to remove (no longer served)

The host keeps a port record (``<config_dir>/ports.json``, {instance: port}) so that adding or removing a model never
moves another model's port, unit or container.
"""

from __future__ import annotations

import json
import re

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks import runner_flags as RF
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.model_list import instance_name
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.lora import planned_lora

# What a list entry on the CPU engine takes from the host's plan (the shorthand's CPU KV bytes and context); the
# rest of that plan's flags belong to the shorthand's model.
CPU_PLAN_ARGS = ("kv-cache-memory-bytes", "max-model-len")
# Where an adapter is mounted in the container (read-only), under its served name.
CONTAINER_ADAPTERS_DIR = "/adapters"
# The flags of vLLM 0.10.0 and later (the pinned images' spelling, tests/fixtures/vllm-help/), used while the image's
# own table is not known on the controller yet; vllm_flag_check then checks the argv against the image itself.
RECENT_FLAGS = {"--runner": ["auto", "draft", "generate", "pooling"], "--convert": ["auto", "classify", "embed", "none"],
                "--enable-lora": None, "--lora-modules": None, "--max-lora-rank": None, "--max-loras": None}


class ServeListError(ValueError):
    """An entry the host cannot serve (the message names the entry and the fix)."""


def assign_ports(instances, recorded, first):
    """{instance: port} for ``instances`` (in order): an instance in ``recorded`` ({instance: port}) keeps its port;
    a new one takes the lowest port >= ``first`` that no kept instance holds. Instances not in ``instances`` give
    their ports up."""
    recorded = {str(k): int(v) for k, v in dict(recorded or {}).items()}
    wanted = [str(i) for i in instances]
    out = {i: recorded[i] for i in wanted if i in recorded}
    taken = set(out.values())
    port = int(first)
    for name in wanted:
        if name in out:
            continue
        while port in taken:
            port += 1
        out[name] = port
        taken.add(port)
    return {name: out[name] for name in wanted}


def stale_instances(recorded, serving, files=None):
    """The instances to remove, sorted: those of the port record (``recorded``: {instance: port}) and those whose
    settings file (``.../vllm-<instance>.unit.conf``) is among ``files`` ({path: content, None when missing}: the
    one-model shorthand's, when a list replaced it), that are not in ``serving``."""
    keep = set(str(i) for i in serving or [])
    found = set(str(k) for k in dict(recorded or {}))
    for path, text in dict(files or {}).items():
        match = re.search(r"/vllm-([^/]+)\.unit\.conf$", str(path))
        if match and text is not None:
            found.add(match.group(1))
    return sorted(found - keep)


def _placed(placement, name):
    """The placement's instances of model ``name``, in the placement's start order."""
    return [i for i in (placement or {}).get("instances") or [] if i.get("model") == name]


def cpu_placement(entries):
    """llmfleet_placement's shape on the CPU engine (no GPU to place on): each entry's replicas (at least one),
    named by model_list.instance_name, without GPUs or flags of their own. They share the host's cores as
    co-tenants of a GPU share it: each starts once the one before it is healthy (two CPU engines starting at once
    on 2 cores failed to initialise, tests/integration/test_pooling_lora_cpu.py)."""
    instances = [{"model": e["name"], "instance": instance_name(e, n), "gpus": [], "tensor_parallel_size": 1,
                  "runner": e.get("runner") or "generate", "start_after": [], "vllm_args": {}}
                 for e in entries for n in range(int(e.get("replicas") or 0) or 1)]
    for before, instance in zip(instances, instances[1:]):
        instance["start_after"] = [before["instance"]]
    return {"fits": True, "problems": [], "instances": instances, "gpus": [],
            "start_order": [i["instance"] for i in instances]}


def _entry_replicas(entry, placed, accelerator):
    """[(instance, gpus, args, start_after)] of one entry: its instances of the placement (cpu: cpu_placement's of
    all entries, each after the one before)."""
    if accelerator == "gpu" and not placed:
        raise ServeListError("llmfleet_models entry %s has no instance in llmfleet_placement: run the preflight "
                             "role (playbooks/site.yml or preflight.yml) before vllm_server" % entry["name"])
    return [(str(i["instance"]), [int(g) for g in i.get("gpus") or []], dict(i.get("vllm_args") or {}),
             [str(a) for a in i.get("start_after") or []]) for i in placed]


def _cpu_args(entry, cpu_args):
    args = {k: v for k, v in dict(cpu_args or {}).items() if k in CPU_PLAN_ARGS}
    if entry.get("max_model_len"):
        args["max-model-len"] = int(entry["max_model_len"])
    return args


def entry_convert(entry):
    """What a pooling entry is served as: its args_extra's convert (embed, classify), else None (vLLM decides)."""
    return dict(entry.get("args_extra") or {}).get("convert") or None


def entry_adapters(entry, serve):
    """[{name, path (in the container), host_path, rank}] of an entry's adapters: host directories from
    ``serve["adapter_paths"]`` (model_weights_adapter_paths) and ranks from their adapter_config.json as read on the
    host (``serve["adapter_configs"]``: {path: text})."""
    found = dict(dict(serve.get("adapter_paths") or {}).get(entry["name"]) or {})
    configs = dict(serve.get("adapter_configs") or {})
    out = []
    for adapter in entry.get("adapters") or []:
        name = str(adapter.get("name"))
        where = "llmfleet_models entry %s adapter %s" % (entry["name"], name)
        host_path = found.get(name)
        text = configs.get("%s/adapter_config.json" % str(host_path or "").rstrip("/"))
        if not host_path or not text:
            raise ServeListError("%s has no fetched directory with an adapter_config.json (model_weights_adapter_paths"
                                 "): run the model_weights role (playbooks/model.yml) first" % where)
        try:
            rank = RF.adapter_rank(json.loads(text), where)
        except (ValueError, RF.RunnerFlagsError) as exc:
            raise ServeListError("%s: %s" % (where, exc))
        out.append({"name": name, "path": "%s/%s" % (CONTAINER_ADAPTERS_DIR, name), "host_path": str(host_path),
                    "rank": rank})
    return _within_planned_rank(entry, out)


def _within_planned_rank(entry, adapters):
    """``adapters`` when their largest rank is within the rank the placement sized the LoRA slots for; else a
    refusal: with --kv-cache-memory-bytes fixed, larger slots would take memory the plan gave the KV cache."""
    planned = (planned_lora(entry.get("adapters")) or {}).get("max_lora_rank", 0)
    over = [a for a in adapters if a["rank"] > planned]
    if over:
        raise ServeListError(
            "llmfleet_models entry %s adapter %s has rank %d (its adapter_config.json), above the rank %d its LoRA "
            "memory was planned for: set `rank: %d` on that adapter in llmfleet_models, so the placement takes its "
            "slots out of the KV cache" % (entry["name"], over[0]["name"], over[0]["rank"], planned, over[0]["rank"]))
    return adapters


def served_flags(entry, table, adapters):
    """The runner flags (runner_flags.runner_args) and LoRA flags (runner_flags.lora_args) of one entry, spelled as
    the image's flag ``table`` spells them."""
    try:
        flags = RF.runner_args(entry.get("runner") or "generate", entry_convert(entry), table)
        flags.update(RF.lora_args(adapters, table))
    except RF.RunnerFlagsError as exc:
        raise ServeListError("llmfleet_models entry %s: %s" % (entry["name"], exc))
    return flags


def list_models(entries, base, serve, accelerator):
    """replica_spec's models from ``entries`` (model_list's normalised entries). ``base``: the role-wide model
    settings (args_extra, env, accelerator_env, engine_cache_accelerator_env, shutdown_timeout), an entry's
    args_extra and env merged over them. ``serve``: {model_paths ({name: host dir}), placement (gpu), cpu_args,
    recorded_ports, first_port, adapter_paths, adapter_configs, flag_help (the image's help text; '': unknown)}.
    Returns (models, ports: {instance: port})."""
    table = RF.flag_table(serve["flag_help"]) if serve.get("flag_help") else RECENT_FLAGS
    placement = serve.get("placement") if accelerator == "gpu" else cpu_placement(entries)
    paths = dict(serve.get("model_paths") or {})
    per_entry = [(entry, _entry_replicas(entry, _placed(placement, entry["name"]), accelerator)) for entry in entries]
    names = [r[0] for _entry, replicas in per_entry for r in replicas]
    ports = assign_ports(names, serve.get("recorded_ports"), serve.get("first_port"))
    models = []
    for entry, replicas in per_entry:
        path = paths.get(entry["name"])
        if not path:
            raise ServeListError("llmfleet_models entry %s has no weights directory in model_weights_paths: run the "
                                 "model_weights role (playbooks/model.yml) first" % entry["name"])
        args = replicas[0][2] if accelerator == "gpu" else _cpu_args(entry, serve.get("cpu_args"))
        adapters = entry_adapters(entry, serve)
        args = dict(args, **served_flags(entry, table, adapters))
        model = dict(base, name=entry["name"], path=str(path), runner=entry.get("runner") or "generate", args=args,
                     convert=entry_convert(entry), adapters=[a["name"] for a in adapters],
                     volumes=[[a["host_path"], a["path"]] for a in adapters],
                     args_extra=dict(base.get("args_extra") or {}, **dict(entry.get("args_extra") or {})),
                     env=dict(base.get("env") or {}, **dict(entry.get("env") or {})))
        model["replicas"] = [{"name": name, "port": ports[name], "gpus": gpus, "start_after": after}
                             for name, gpus, _args, after in replicas]
        models.append(model)
    return models, ports


def failed_models(result):
    """The served names of the models a failed gate task failed on, from its result (ansible_failed_result): the
    failed items of its loop, each a replica spec (a background start's wait: the job's item). [] when the task
    was no loop over replicas (then every replica started now is in question)."""
    names = []
    for item in (result or {}).get("results") or []:
        if not isinstance(item, dict) or not item.get("failed"):
            continue
        replica = item.get("item") or {}
        replica = replica.get("item", replica) if isinstance(replica, dict) and "ansible_job_id" in replica else replica
        model = replica.get("model") if isinstance(replica, dict) else None
        if model and model not in names:
            names.append(str(model))
    return names


def flag_check_models(models, one_model=None):
    """vllm_flag_check's ``models``: each of replica_spec's ``models`` as the check takes it, in order: its argv
    (``check_argv``), runner, convert, args_extra and model directory, with the variables a refusal names as the fix
    (its entry of llmfleet_models). ``one_model``: a host of one model (no llmfleet_models list), whose options the
    role's own variables give ({model, args_extra, args_extra_var, model_dir, model_var}), over each model's."""
    checked = []
    for model in models or []:
        name = str(model.get("name") or "")
        item = {"model": name, "args": [str(a) for a in model.get("check_argv") or []], "runner": model.get("runner"),
                "args_extra": model.get("args_extra"), "args_extra_var": "args_extra of llmfleet_models " + name,
                "model_dir": model.get("path"), "model_var": "llmfleet_models " + name}
        # Only a pooling model has one: the module's choices refuse a null convert (ansible-core 2.19).
        if model.get("convert"):
            item["convert"] = model["convert"]
        checked.append(item)
    return [dict(model, **dict(one_model)) for model in checked] if one_model else checked
