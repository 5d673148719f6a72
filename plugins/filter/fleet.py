# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters for the fleet stage (balancer, monitoring, upgrade); the logic lives in plugins/plugin_utils/fleet/fleet.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import fleet


def fleet_backends(members, by_model=False):
    """Every replica of the serving hosts (members: [{host, address, serving}]) as balancer backends."""
    try:
        return fleet.fleet_backends(list(members or []), bool(by_model))
    except fleet.FleetError as exc:
        raise AnsibleFilterError("fleet_backends: %s" % exc)


def prometheus_vllm_targets(backends):
    """Prometheus static_configs (one labelled group per replica) for the backends' /metrics."""
    return fleet.prometheus_vllm_targets(list(backends or []))


def haproxy_servers(text, backend):
    """{server: {status, scur, check_status}} of one backend, from HAProxy's `show stat` CSV."""
    try:
        return fleet.haproxy_servers(text, backend)
    except fleet.FleetError as exc:
        raise AnsibleFilterError("haproxy_servers: %s" % exc)


def fleet_server_name_for(replica, host):
    """The balancer's name for one replica, <host>-<replica>; replica first, for
    map('llmfleet.vllm.fleet_server_name_for', host)."""
    return fleet.server_name(host, replica)


def fleet_drain_targets(serving, host, backend, by_model=False, models=None):
    """[{backend, server}] a drain takes out of each balancer for host (serving: its serving.json)."""
    return fleet.drain_targets(serving, host, str(backend), bool(by_model), list(models or []))


def fleet_drain_replicas(serving, models=None):
    """The replicas of a serving.json a drain waits for, each once (with many models, every model's, or models')."""
    return fleet.drain_replicas(serving, list(models or []))


def fleet_address_port(address, port):
    """host:port, IPv6 addresses in brackets."""
    return fleet.address_port(address, port)


def llmfleet_address_scope(address):
    """Who can reach a listening address: loopback, private, wildcard, public or name."""
    return fleet.address_scope(address)


def _host_vars(hostvars, host):
    """The variables of host that host_address reads (hostvars templates each one on access)."""
    try:
        found = hostvars[host]
    except KeyError:
        return {}
    return dict((key, found[key]) for key in ("llmfleet_fleet_address", "ansible_facts", "ansible_host") if key in found)


def fleet_addresses(hosts, hostvars, fallback=True):
    """{host: the address other hosts reach it by} (module_utils.fleet.host_address)."""
    return dict((host, fleet.host_address(_host_vars(hostvars, host), host, bool(fallback))) for host in hosts or [])


def fleet_members(results, hostvars):
    """[{host, address, serving}] from a looped host_state (or slurp) of each serving host's serving.json."""
    if not isinstance(results, list):
        raise AnsibleFilterError("fleet_members expects the results of a looped host_state, got %s" % type(results).__name__)
    hosts = [r.get("item") for r in results if isinstance(r, dict)]
    try:
        return fleet.serving_members(results, fleet_addresses(hosts, hostvars, fallback=False))
    except ValueError as exc:
        raise AnsibleFilterError("fleet_members: a serving.json that is not JSON: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {
            "fleet_backends": fleet_backends,
            "prometheus_vllm_targets": prometheus_vllm_targets,
            "haproxy_servers": haproxy_servers,
            "fleet_address_port": fleet_address_port,
            "fleet_server_name_for": fleet_server_name_for,
            "fleet_drain_targets": fleet_drain_targets,
            "fleet_drain_replicas": fleet_drain_replicas,
            "address_scope": llmfleet_address_scope,
            "fleet_addresses": fleet_addresses,
            "fleet_members": fleet_members,
        }
