# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The batches of a rolling upgrade; the logic lives in plugins/plugin_utils/fleet/roll.py."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import model_list, roll

# Each filter's documentation: plugins/filter/<filter name>.yml.


def roll_batches(hosts, hostvars, groups, group_var="llmfleet_model_group"):
    hosts = [str(h) for h in hosts or []]
    host_groups = {h: (hostvars[h].get(group_var) if h in hostvars else None) or "" for h in hosts}
    named = set(g for g in host_groups.values() if g)
    members = {name: list(groups[name]) for name in named if name in groups}
    try:
        return roll.roll_batches(hosts, host_groups, members, group_var)
    except roll.RollError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def _served_names(host_vars):
    """The served names of a host's models, from its inventory variables (llmfleet_models, else the shorthand's)."""
    entries = host_vars.get("llmfleet_models")
    if entries is None:
        shorthand = {var: host_vars.get(var) for var in model_list.SHORTHAND_VARIABLES.values()}
        entries = [model_list.shorthand_entry(shorthand)]
    return [e.get("name") for e in entries or [] if isinstance(e, dict)]


def roll_hosts(hosts, hostvars, models=None):
    hosts = [str(h) for h in hosts or []]
    try:
        names = roll.roll_model_names(models)
        host_models = {h: _served_names(hostvars[h]) for h in hosts if names and h in hostvars}
        return roll.hosts_serving(hosts, host_models, names)
    except roll.RollError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def roll_model_names(models, host_vars=None):
    try:
        names = roll.roll_model_names(models)
    except roll.RollError as exc:
        raise AnsibleFilterError(str(exc)) from exc
    # On one host: only the names it serves (a roll of [a, b] reaches a host with a alone as a roll of [a]).
    return [n for n in names if n in _served_names(host_vars)] if host_vars is not None else names


def roll_serial(batches):
    return roll.roll_serial(list(batches or []))


class FilterModule:
    def filters(self):
        return {"roll_batches": roll_batches, "roll_serial": roll_serial, "roll_hosts": roll_hosts,
                "roll_model_names": roll_model_names}
