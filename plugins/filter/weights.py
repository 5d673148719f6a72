# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters for the model_weights role: peer transfer (the logic lives in plugins/module_utils/weights/peer_weights.py)
and the models of llmfleet_models (plugins/module_utils/weights/model_entries.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import model_entries as ME
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import peer_weights
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import model_list as ML


def weights_peer_schedule(hosts, port=8873, fanout=1):
    """The fleet's weight transfer plan from one entry per host ({host, group, identity, address, dest, state,
    bytes_to_fetch}; None for hosts not running the role): see peer_weights.schedule."""
    entries = []
    for h in hosts or []:
        if not h:
            continue
        e = dict(h)
        e["key"] = peer_weights.model_key(e.pop("identity", None))
        e["module"] = peer_weights.module_name(e.pop("dest", ""))
        entries.append(e)
    try:
        return peer_weights.schedule(entries, port=int(port), fanout=int(fanout))
    except peer_weights.PeerPlanError as exc:
        raise AnsibleFilterError("weights_peer_schedule: %s" % exc)


def weights_peer_module(dest):
    """The rsync daemon module name that serves the model directory dest."""
    return peer_weights.module_name(dest)


def weights_listing(files):
    """Every model file as "relpath:size", sorted, bookkeeping files left out (files: dicts with path and size)."""
    if not isinstance(files, (list, tuple)):
        raise AnsibleFilterError("weights_listing expects a list of files, got %s" % type(files).__name__)
    return ME.listing(files)


def weights_tried_summary(tried):
    """The peers a transfer tried and why each fell short, as one line: "host: reason; host: reason"."""
    if not isinstance(tried, (list, tuple)):
        raise AnsibleFilterError("weights_tried_summary expects peer_transfer.tried, got %s" % type(tried).__name__)
    return "; ".join("%s: %s" % (item.get("host"), item.get("reason")) for item in tried)


def weights_models_problems(models):
    """The weights inputs of llmfleet_models refused before anything changes (model_entries.entry_problems)."""
    return ME.entry_problems(models)


def weights_items(models, root):
    """One item per model of llmfleet_models and per adapter (model_entries.weights_items), from the list as
    model_list normalises it; a list model_list refuses is refused here too, with its sentences."""
    checked = ML.model_list(models)
    problems = checked["problems"] + ME.entry_problems(models)
    if problems:
        raise AnsibleFilterError("llmfleet_models: " + " ".join(problems))
    return ME.weights_items(checked["models"], root)


def _items(items, name):
    if not isinstance(items, list) or not all(isinstance(i, dict) and "key" in i for i in items):
        raise AnsibleFilterError("%s expects the items of weights_items, got %r" % (name, items))
    return items


def weights_needing_work(items, states, tree=None):
    """The keys of the items whose directory needs the per-model fetch (model_entries.items_needing_work)."""
    return ME.items_needing_work(_items(items, "weights_needing_work"), states or [], tree or [])


def weights_published(items):
    """{paths: {model: dir}, adapters: {model: {adapter: dir}}} (model_entries.published_paths)."""
    return ME.published_paths(_items(items, "weights_published"))


def weights_removed(items, record=None, serving=None):
    """The models the host had and the list no longer names, with what a purge removes (model_entries)."""
    return ME.removed_weights(_items(items, "weights_removed"), record if isinstance(record, dict) else None,
                              serving if isinstance(serving, dict) else None)


def weights_record(items, removed=None, purged=False):
    """What the role records on the host: this run's models, and the removed ones whose weights stay
    (model_entries.weights_record)."""
    return ME.weights_record(_items(items, "weights_record"), removed or [], bool(purged))


def weights_plan_options(items):
    """model_fetch_plan's items option from the items (model_entries.plan_options)."""
    return ME.plan_options(_items(items, "weights_plan_options"))


def weights_controller_dirs(items):
    """The controller directories the items upload, for the llmfleet.vllm.weights_tree lookup."""
    return ME.controller_dirs(_items(items, "weights_controller_dirs"))


def weights_shorthand_paths(weights_dir, served_name=""):
    """model_weights_paths of the one-model shorthand: {served name: directory}, the name as model_list gives it."""
    entry = ML.shorthand_entry({"llmfleet_served_model_name": served_name, "model_weights_dir": weights_dir})
    return {entry["name"]: weights_dir}


class FilterModule(object):
    def filters(self):
        return {
            "weights_models_problems": weights_models_problems,
            "weights_items": weights_items,
            "weights_needing_work": weights_needing_work,
            "weights_published": weights_published,
            "weights_removed": weights_removed,
            "weights_record": weights_record,
            "weights_plan_options": weights_plan_options,
            "weights_controller_dirs": weights_controller_dirs,
            "weights_shorthand_paths": weights_shorthand_paths,
            "weights_peer_schedule": weights_peer_schedule,
            "weights_peer_module": weights_peer_module,
            "weights_listing": weights_listing,
            "weights_tried_summary": weights_tried_summary,
        }
