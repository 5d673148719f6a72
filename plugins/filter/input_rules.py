# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The roles' declarative input rules, reduced to their problems (logic in module_utils.input_checks, the checks
the input_check module runs for preflight)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Each filter's documentation: plugins/filter/<filter name>.yml.

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.input_checks import held_port_problems, rule_problems


def input_rule_problems(rules):
    if not isinstance(rules, list):
        raise AnsibleFilterError("input_rule_problems expects a list of rules, got %s" % type(rules).__name__)
    try:
        return rule_problems(rules)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(str(exc))


def held_ports_problems(replicas, host):
    if not isinstance(replicas, list):
        raise AnsibleFilterError("held_port_problems expects replica_state's replicas, got %s" % type(replicas).__name__)
    return held_port_problems(replicas, str(host))


class FilterModule(object):
    def filters(self):
        return {"input_rule_problems": input_rule_problems, "held_port_problems": held_ports_problems}
