# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters over the replica spec's replicas; the logic lives in plugins/plugin_utils/fleet/replica_spec.py."""

from __future__ import annotations

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.replica_spec import started_replicas

# Each filter's documentation: plugins/filter/<filter name>.yml.


def replicas_started(restarted, waited=None, jobs=None):
    return started_replicas(restarted, waited, jobs)


class FilterModule(object):
    def filters(self):
        return {"replicas_started": replicas_started}
