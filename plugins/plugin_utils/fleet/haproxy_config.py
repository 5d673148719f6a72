# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the edge's and the fleet balancer's HAProxy configurations say, as data (pure functions, no I/O).

  edge_config(replicas, settings)        each serving host's edge: one frontend and backend per local replica
  balancer_config(backends, settings)    the fleet balancer: its servers, its API gate and its health check
  api_key_file(keys, managed_by)         the text of an accepted-keys file (one "Bearer <key>" per line; secret)

The loadbalancer role's templates (edge.cfg.j2, haproxy.cfg.j2, api_gate.cfg.j2) only print these. The API gate (the
routes that reach vLLM and the key check) is the same structure for both: {prefixes, public_paths, keys_file}.
"""

from __future__ import annotations

import re

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.fleet import address_port


def _gate(prefixes, public_paths, keys_file, api_keys):
    """The API gate: path prefixes that need the key, exact public paths (GET), the keys file ('' = no key).
    The role's checks (tasks/main.yml, tasks/edge.yml) have refused paths that are not paths and keys HAProxy cannot
    match before this runs."""
    return {"prefixes": [str(p) for p in prefixes or []], "public_paths": [str(p) for p in public_paths or []],
            "keys_file": keys_file if api_keys else ""}


def edge_config(replicas, settings):
    """The edge of one serving host. replicas: [{name, port, address, backend_port}] (the replica spec's
    edge_members); settings: bind_address, path_prefixes, public_paths, keys_file, api_keys."""
    keys = [str(k) for k in settings.get("api_keys") or []]
    bind = str(settings["bind_address"])
    listens = [{"frontend": "llmfleet_edge_%s" % r["name"], "bind": address_port(bind, r["port"]),
                "backend": "llmfleet_replica_%s" % r["name"], "server": "replica_%s" % r["name"],
                "address": address_port(r["address"], r["backend_port"])} for r in replicas or []]
    addresses = []
    for r in replicas or []:
        if r["address"] not in addresses:
            addresses.append(r["address"])
    return {"listens": listens, "replica_addresses": addresses,
            "gate": _gate(settings.get("path_prefixes"), settings.get("public_paths"), settings.get("keys_file", ""),
                          keys)}


def balancer_config(backends, settings):
    """The fleet balancer. backends: [{name, address, port, served_model_name?}] (fleet_backends or
    loadbalancer_backends); settings: path_prefixes, keys_file, api_keys, check_completion, check_model."""
    keys = [str(k) for k in settings.get("api_keys") or []]
    servers = [{"name": str(b["name"]), "address": address_port(b["address"], b["port"])} for b in backends or []]
    check = {"completion": bool(settings.get("check_completion")), "model": str(settings.get("check_model") or ""),
             "authorization": ("Bearer %s" % keys[0]) if keys else ""}
    return {"servers": servers, "check": check,
            "gate": _gate(settings.get("path_prefixes"), [], settings.get("keys_file", ""), keys)}


def api_key_file(api_keys, managed_by):
    """The accepted-keys file: a comment naming who manages it, then "Bearer <key>" per key (HAProxy matches the
    whole Authorization header against these lines)."""
    lines = ["# Managed by Ansible (%s): changes here are overwritten." % managed_by]
    return "\n".join(lines + ["Bearer %s" % k for k in api_keys or []]) + "\n"


def servers_all_up(servers, expected):
    """Whether the balancer holds exactly expected servers and every one is UP (servers: haproxy_servers' dict)."""
    servers = dict(servers or {})
    return len(servers) == int(expected) and all((s or {}).get("status") == "UP" for s in servers.values())


def running_requests(metrics_text):
    """vLLM's own count of requests in flight: the sum of its vllm:num_requests_running samples (one per model
    and engine) in a /metrics exposition; 0 when there is none."""
    pattern = re.compile(r"^vllm:num_requests_running(?:\{[^}]*\})? ([0-9.e+-]+)$", re.M)
    return sum(float(v) for v in pattern.findall(metrics_text or ""))
