# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The edge's and the fleet balancer's HAProxy configuration as data; the logic lives in
plugins/plugin_utils/fleet/haproxy_config.py."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import haproxy_config as HC

# Each filter's documentation: plugins/filter/<filter name>.yml.


def _dicts(value, name, keys):
    if not isinstance(value, list) or not all(isinstance(v, dict) and all(k in v for k in keys) for v in value):
        raise AnsibleFilterError("%s expects a list of dicts with %s, got %r" % (name, ", ".join(keys), value))
    return value


def _settings(value, name):
    if not isinstance(value, dict):
        raise AnsibleFilterError("%s expects its settings as a dict, got %r" % (name, value))
    return value


def edge_haproxy(replicas, settings):
    replicas = _dicts(replicas, "edge_haproxy", ("name", "port", "address", "backend_port"))
    return HC.edge_config(replicas, _settings(settings, "edge_haproxy"))


def balancer_haproxy(backends, settings):
    backends = _dicts(backends, "balancer_haproxy", ("name", "address", "port"))
    return HC.balancer_config(backends, _settings(settings, "balancer_haproxy"))


def api_key_file(api_keys, managed_by):
    return HC.api_key_file(list(api_keys or []), str(managed_by))


def haproxy_all_up(servers, expected):
    return HC.servers_all_up(servers, expected)


def vllm_running_requests(metrics_text):
    return HC.running_requests(str(metrics_text or ""))


class FilterModule(object):
    def filters(self):
        return {"edge_haproxy": edge_haproxy, "balancer_haproxy": balancer_haproxy, "api_key_file": api_key_file,
                "haproxy_all_up": haproxy_all_up, "vllm_running_requests": vllm_running_requests}
