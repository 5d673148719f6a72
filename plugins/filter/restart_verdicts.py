# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters over what replica_state read on a host (logic in module_utils.serving.restart_verdicts)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Each filter's documentation: plugins/filter/<filter name>.yml.

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.module_utils.serving.restart_verdicts import replica_actions, unit_up
from ansible_collections.llmfleet.vllm.plugins.module_utils.serving.serving_identity import (
    known_good_replicas, replicas_named, rollback_message)


def llmfleet_unit_up(unit, running=False):
    if unit is None:
        return False
    if not isinstance(unit, dict):
        raise AnsibleFilterError("unit_up expects systemctl show properties (a dict), got %s" % type(unit).__name__)
    return unit_up(unit, running=bool(running))


def llmfleet_replica_actions(states, names, written, config_dir, unit_file):
    if not isinstance(states, list) or not all(isinstance(state, dict) for state in states):
        raise AnsibleFilterError("replica_actions expects replica_state's replicas (a list of dicts), got %s"
                                 % type(states).__name__)
    return replica_actions(states, list(names or []), list(written or []), str(config_dir), str(unit_file))


def llmfleet_known_good_replicas(states):
    if not isinstance(states, list) or not all(isinstance(state, dict) for state in states):
        raise AnsibleFilterError("known_good_replicas expects replica_state's replicas (a list of dicts), got %s"
                                 % type(states).__name__)
    return known_good_replicas(states)


def llmfleet_replicas_named(replicas, names):
    if not isinstance(replicas, list) or not all(isinstance(replica, dict) for replica in replicas):
        raise AnsibleFilterError("replicas_named expects a list of replicas (dicts with a name), got %s"
                                 % type(replicas).__name__)
    return replicas_named(replicas, list(names or []))


def llmfleet_rollback_message(host, failed, restored, serving, diagnosis, seconds):
    return rollback_message(str(host), [str(n) for n in failed or []], [str(n) for n in restored or []],
                            [str(n) for n in serving or []], [str(d) for d in diagnosis or []], float(seconds or 0))


class FilterModule(object):
    def filters(self):
        return {"unit_up": llmfleet_unit_up, "replica_actions": llmfleet_replica_actions,
                "known_good_replicas": llmfleet_known_good_replicas, "rollback_message": llmfleet_rollback_message,
                "replicas_named": llmfleet_replicas_named}
