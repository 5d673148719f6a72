# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The edge's and the fleet balancer's HAProxy configuration as data; the logic lives in
plugins/plugin_utils/fleet/haproxy_config.py."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import haproxy_config as HC
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import model_routing as MR

# Each filter's documentation: plugins/filter/<filter name>.yml.


def _dicts(value, name, keys):
    if not isinstance(value, list) or not all(isinstance(v, dict) and all(k in v for k in keys) for v in value):
        raise AnsibleFilterError("%s expects a list of dicts with %s, got %r" % (name, ", ".join(keys), value))
    return value


def _settings(value, name):
    if not isinstance(value, dict):
        raise AnsibleFilterError("%s expects its settings as a dict, got %r" % (name, value))
    return value


def _routed(function, name, value, settings, keys):
    """function(value, settings) with its input checked; routing errors (keys, model names) as filter errors."""
    try:
        return function(_dicts(value, name, keys), _settings(settings, name))
    except MR.RoutingError as exc:
        raise AnsibleFilterError("%s: %s" % (name, exc))


def edge_haproxy(replicas, settings):
    return _routed(HC.edge_config, "edge_haproxy", replicas, settings, ("name", "port", "address", "backend_port"))


def balancer_haproxy(backends, settings):
    return _routed(HC.balancer_config, "balancer_haproxy", backends, settings, ("name", "address", "port"))


def edge_route_files(replicas, settings):
    return _routed(HC.edge_route_files, "edge_route_files", replicas, settings, ("name", "port", "address", "backend_port"))


def balancer_route_files(backends, settings):
    return _routed(HC.balancer_route_files, "balancer_route_files", backends, settings, ("name", "address", "port"))


def model_key_problems(model_keys):
    return MR.key_problems(model_keys)


def api_key_file(api_keys, managed_by):
    return HC.api_key_file(list(api_keys or []), str(managed_by))


def haproxy_all_up(servers, expected):
    return HC.servers_all_up(servers, expected)


def vllm_running_requests(metrics_text):
    return HC.running_requests(str(metrics_text or ""))


class FilterModule(object):
    def filters(self):
        return {"edge_haproxy": edge_haproxy, "balancer_haproxy": balancer_haproxy, "api_key_file": api_key_file,
                "edge_route_files": edge_route_files, "balancer_route_files": balancer_route_files,
                "model_key_problems": model_key_problems,
                "haproxy_all_up": haproxy_all_up, "vllm_running_requests": vllm_running_requests}
