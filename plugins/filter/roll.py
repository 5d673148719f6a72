# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The batches of a rolling upgrade; the logic lives in plugins/plugin_utils/fleet/roll.py."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import roll

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


def roll_serial(batches):
    return roll.roll_serial(list(batches or []))


class FilterModule:
    def filters(self):
        return {"roll_batches": roll_batches, "roll_serial": roll_serial}
