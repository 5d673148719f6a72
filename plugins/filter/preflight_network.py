# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters the preflight role uses to check the network of a model group over several hosts (logic in
module_utils.network_facts)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Each filter's documentation: plugins/filter/<filter name>.yml.

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks import network_facts as N


def _hosts(hosts):
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("expects the group's hosts (a list), got %s" % type(hosts).__name__)
    return [str(h) for h in hosts]


def llmfleet_group_port_targets(hosts, me, addresses, leader_ports, probe_port=None):
    return N.group_port_targets(_hosts(hosts), me, dict(addresses or {}), list(leader_ports or []), probe_port)


def llmfleet_group_listen_ports(hosts, me, leader_ports, probe_port=None):
    return N.listen_ports(_hosts(hosts), me, list(leader_ports or []), probe_port)


def llmfleet_group_unreachable(results, me, port_var="vllm_server_multinode_master_port",
                               probe_var="preflight_group_probe_port"):
    """The wait_for results of a loop over group_port_targets -> one message per port not reached."""
    out = []
    for r in results or []:
        if not isinstance(r, dict) or r.get("skipped"):
            continue
        # wait_for's success carries 'state'; a failure only msg and elapsed (also under failed_when: false)
        if r.get("failed") or ("msg" in r and "state" not in r):
            out.append(N.unreachable_message(str(me), r["item"], r.get("msg"), port_var, probe_var))
    return out


def llmfleet_group_network_problems(facts_by_host):
    if not isinstance(facts_by_host, dict):
        raise AnsibleFilterError("group_network_problems expects {host: network_facts}, got %s"
                                 % type(facts_by_host).__name__)
    return N.group_network_problems(facts_by_host)


def llmfleet_group_addresses(hosts, hostvars):
    return N.group_addresses(_hosts(hosts), hostvars)


class FilterModule(object):
    def filters(self):
        return {
            "group_port_targets": llmfleet_group_port_targets,
            "group_listen_ports": llmfleet_group_listen_ports,
            "group_unreachable": llmfleet_group_unreachable,
            "group_network_problems": llmfleet_group_network_problems,
            "group_addresses": llmfleet_group_addresses,
        }
