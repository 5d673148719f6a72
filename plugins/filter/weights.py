# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters for the model_weights role's peer transfer; the logic lives in plugins/module_utils/weights/peer_weights.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import peer_weights


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


class FilterModule(object):
    def filters(self):
        return {
            "weights_peer_schedule": weights_peer_schedule,
            "weights_peer_module": weights_peer_module,
        }
