# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the edge's and the fleet balancer's HAProxy configurations say, as data (pure functions, no I/O).

  edge_config(replicas, settings)        each serving host's edge: one frontend and backend per local replica
  balancer_config(backends, settings)    the fleet balancer: its servers, its API gate and its health check
  api_key_file(keys, managed_by)         the text of an accepted-keys file (one "Bearer <key>" per line; secret)
  edge_models(replicas) / fleet_models(backends)   the served models and the names reaching each (route by model)

With settings' route_by_model (llmfleet_models is set), both route on the body's "model" (model_routing.py): the edge
has one client frontend in front of a backend per local model, the balancer a backend per model over the hosts
serving it. Without it they are what they were before many models, byte for byte.

The loadbalancer role's templates (edge.cfg.j2, haproxy.cfg.j2, api_gate.cfg.j2) only print these. The API gate (the
routes that reach vLLM and the key check) is the same structure for both: {prefixes, public_paths, keys_file}.
"""

from __future__ import annotations

import re

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import model_routing as MR
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.fleet import address_port, server_name


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
    if settings.get("route_by_model"):
        return _edge_by_model(replicas, settings, keys, addresses)
    return {"listens": listens, "replica_addresses": addresses,
            "gate": _gate(settings.get("path_prefixes"), settings.get("public_paths"), settings.get("keys_file", ""),
                          keys)}


def edge_models(replicas):
    """The models of an edge's replicas, in order: [{name, names}] (names: the model's and its adapters')."""
    models = []
    for r in replicas or []:
        name = str(r.get("model") or "")
        if not name:
            raise MR.RoutingError("replica %s names no model: routing by model needs the replica spec's edge_members "
                                  "with model." % r.get("name"))
        found = [m for m in models if m["name"] == name]
        if not found:
            models.append({"name": name, "names": [name]})
            found = models[-1:]
        found[0]["names"].extend(str(a) for a in r.get("adapters") or [] if str(a) not in found[0]["names"])
    return models


def _routing(models, settings, keys, strict):
    """model_routes for settings (route_files' settings: files, max_body_bytes, body_timeout, model_keys)."""
    grants = MR.key_grants(keys, settings.get("model_keys"), [n for m in models for n in m["names"]], strict)
    return MR.model_routes(models, grants, settings)


def _edge_by_model(replicas, settings, keys, addresses):
    """One frontend on the client port, one backend per local model with its replicas (a health check each: the
    edge answers /health and keeps a down replica out)."""
    models = edge_models(replicas)
    routing = _routing(models, settings, keys, False)
    for backend in routing["backends"]:
        backend["servers"] = [{"name": "replica_%s" % r["name"], "address": address_port(r["address"], r["backend_port"])}
                              for r in replicas if str(r["model"]) == backend["model"]]
    # Prometheus scrapes each replica as GET /metrics?replica=<instance> (vLLM's metrics run no model).
    routing["metrics_replicas"] = [{"replica": str(r["name"]), "backend": "llmfleet_replica_%s" % r["name"],
                                    "server": "replica_%s" % r["name"],
                                    "address": address_port(r["address"], r["backend_port"])} for r in replicas]
    bind = address_port(str(settings["bind_address"]), settings["client_port"])
    # Each replica's own port still answers its /metrics and /health (Prometheus and probes address replicas by
    # port), with the gate's keys; the API (which a limited key could use there) only on the one client port.
    replica_listens = [{"frontend": "llmfleet_edge_%s" % r["name"], "backend": "llmfleet_replica_%s" % r["name"],
                        "bind": address_port(str(settings["bind_address"]), r["port"])}
                       for r in replicas if int(r["port"]) != int(settings["client_port"])]
    return {"frontend": {"name": "llmfleet_edge", "bind": bind}, "replica_listens": replica_listens,
            "replica_gate": _gate(["/metrics"], ["/health"], settings.get("keys_file", ""), keys),
            "replica_addresses": addresses, "routing": routing, "upstream_auth": bool(keys),
            # The key is checked by the routing (its map of key hashes), not by the gate's list.
            "gate": _gate(settings.get("path_prefixes"), [], "", [])}


def balancer_config(backends, settings):
    """The fleet balancer. backends: [{name, address, port, served_model_name?}] (fleet_backends or
    loadbalancer_backends); settings: path_prefixes, keys_file, api_keys, check_completion, check_model."""
    keys = [str(k) for k in settings.get("api_keys") or []]
    servers = [{"name": str(b["name"]), "address": address_port(b["address"], b["port"])} for b in backends or []]
    check = {"completion": bool(settings.get("check_completion")), "model": str(settings.get("check_model") or ""),
             "authorization": ("Bearer %s" % keys[0]) if keys else ""}
    if settings.get("route_by_model"):
        return _balancer_by_model(backends, settings, keys, check)
    return {"servers": servers, "check": check,
            "gate": _gate(settings.get("path_prefixes"), [], settings.get("keys_file", ""), keys)}


def edge_route_files(replicas, settings):
    """The edge's map files when it routes by model ([{path, content}], secret; [] otherwise): its host's models, the
    keys that may use them, and the replicas' key (the first of api_keys) to forward with."""
    if not settings.get("route_by_model"):
        return []
    keys = [str(k) for k in settings.get("api_keys") or []]
    models = edge_models(replicas)
    grants = MR.key_grants(keys, settings.get("model_keys"), [n for m in models for n in m["names"]])
    return MR.route_files(models, grants, dict(settings, upstream_key=keys[0] if keys else ""))


def balancer_route_files(backends, settings):
    """The fleet balancer's map files when it routes by model ([{path, content}], secret; [] otherwise). Every
    model a key names must be served somewhere in the fleet."""
    if not settings.get("route_by_model"):
        return []
    models = fleet_models(backends)
    keys = [str(k) for k in settings.get("api_keys") or []]
    grants = MR.key_grants(keys, settings.get("model_keys"), [n for m in models for n in m["names"]], True)
    # The health check's key (the first): the checks go through the hosts' edges.
    return MR.route_files(models, grants, dict(settings, upstream_key=keys[0] if keys else ""))


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


def fleet_models(backends):
    """The models of the fleet's backends, in order: [{name, names}] (names: the model's and its adapters')."""
    models = []
    for b in backends or []:
        name = str(b.get("model") or b.get("served_model_name") or "")
        if not name:
            raise MR.RoutingError("backend %s names no model: routing by model needs model (or served_model_name) "
                                  "on every backend." % b.get("name"))
        found = [m for m in models if m["name"] == name] or [{"name": name, "names": [name]}]
        if found[0] not in models:
            models.append(found[0])
        found[0]["names"].extend(str(a) for a in b.get("adapters") or [] if str(a) not in found[0]["names"])
    return models


def _model_servers(backends, model):
    """One server per host that serves model: its edge (which routes by model again to the host's replicas)."""
    servers = []
    for b in backends:
        if str(b.get("model") or b.get("served_model_name") or "") != model:
            continue
        name = server_name(b.get("host") or b["name"], model) if b.get("host") else str(b["name"])
        if name not in [s["name"] for s in servers]:
            servers.append({"name": name, "address": address_port(b["address"], b.get("edge_port") or b["port"])})
    return servers


def _balancer_by_model(backends, settings, keys, check):
    """A backend per model over the hosts serving it, each with its own health check: a completion of that model
    (a pooling model, which has none: GET /health)."""
    models = fleet_models(backends)
    routing = _routing(models, settings, keys, True)
    pooling = set(str(b.get("model")) for b in backends if b.get("runner") == "pooling")
    for backend in routing["backends"]:
        backend["servers"] = _model_servers(backends, backend["model"])
        # The check's key comes from the upstream map (root only), not from this configuration.
        backend["check"] = dict(check, model=backend["model"], authorization="",
                                completion=check["completion"] and backend["model"] not in pooling)
    routing["check_auth"] = bool(keys) and bool(routing["files"].get("upstream"))
    return {"routing": routing, "check": dict(check, authorization=""), "servers": [s for b in routing["backends"] for s in b["servers"]],
            "gate": _gate(settings.get("path_prefixes"), [], "", [])}
