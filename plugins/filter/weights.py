# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters for the model_weights role's peer transfer; the logic lives in plugins/module_utils/weights/peer_weights.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

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


# The bookkeeping files of a model directory, which no listing of its model files holds.
_BOOKKEEPING = re.compile(r"^[.](cache/|llmfleet-weights[.]json$|llmfleet-verified[.]json$)")


def weights_listing(files):
    """Every model file as "relpath:size", sorted, bookkeeping files left out (files: dicts with path and size)."""
    if not isinstance(files, (list, tuple)):
        raise AnsibleFilterError("weights_listing expects a list of files, got %s" % type(files).__name__)
    # Matched on the path: on "path:size" the json names' $ never matched (#38 found it; they were compared).
    return sorted("%s:%s" % (item.get("path"), item.get("size")) for item in files
                  if not _BOOKKEEPING.match(str(item.get("path"))))


def weights_tried_summary(tried):
    """The peers a transfer tried and why each fell short, as one line: "host: reason; host: reason"."""
    if not isinstance(tried, (list, tuple)):
        raise AnsibleFilterError("weights_tried_summary expects peer_transfer.tried, got %s" % type(tried).__name__)
    return "; ".join("%s: %s" % (item.get("host"), item.get("reason")) for item in tried)


class FilterModule(object):
    def filters(self):
        return {
            "weights_peer_schedule": weights_peer_schedule,
            "weights_peer_module": weights_peer_module,
            "weights_listing": weights_listing,
            "weights_tried_summary": weights_tried_summary,
        }
