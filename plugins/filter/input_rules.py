# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The roles' declarative input rules, reduced to their problems (logic in module_utils.input_checks, the checks
the input_check module runs for preflight), and the rules each role's tasks/validate.yml hands to preflight, merged
into the input_check module's options."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Each filter's documentation: plugins/filter/<filter name>.yml.

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.input_checks import held_port_problems, rule_problems

# The input_check options that every role may add to (lists, concatenated in the roles' order); any other option
# belongs to one role (two roles giving it is an error: the check would silently take one of them).
_LIST_OPTIONS = ("checks", "secrets")


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


def input_check_options(rules_by_role):
    """The input_check module's options from each role's validate.yml ({role: {option: value}}, in include order)."""
    if not isinstance(rules_by_role, dict):
        raise AnsibleFilterError("input_check_options expects {role: options}, got %s" % type(rules_by_role).__name__)
    options = dict((name, []) for name in _LIST_OPTIONS)
    owner = {}
    for role, given in rules_by_role.items():
        if not isinstance(given, dict):
            raise AnsibleFilterError("input_check_options: the rules of %s are no dict of options" % role)
        for name, value in given.items():
            if name in _LIST_OPTIONS:
                options[name].extend(value or [])
            elif name in owner:
                raise AnsibleFilterError("input_check_options: both %s and %s give the option %s" % (owner[name], role, name))
            else:
                owner[name] = role
                options[name] = value
    return options


class FilterModule(object):
    def filters(self):
        return {"input_rule_problems": input_rule_problems, "held_port_problems": held_ports_problems,
                "input_check_options": input_check_options}
