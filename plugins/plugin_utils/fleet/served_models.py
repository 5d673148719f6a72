# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The models a serving host describes, one at a time: for diagnose, bench and monitoring (pure, no I/O).

serving.json (/etc/llmfleet/serving.json, written by vllm_server) keeps the first model's keys at its top level
(served_model_name, model_path, replicas, base_urls) and, on a host of several models, lists every model under
`models`: [{name, runner, model_path, replicas: [{name, port, gpus}], base_urls, adapters}]. A host described
before `models` existed serves its one model from the top-level keys.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import fleet

# The top-level keys that describe one model; a model's view of serving.json replaces exactly these.
_MODEL_KEYS = ("served_model_name", "model_path", "replicas", "base_urls")


class ServedModelError(ValueError):
    """A model name the host does not serve; the message lists the names it does serve."""


def served_models(serving):
    """[{name, runner, model_path, replicas, base_urls, adapters}] of one host's serving.json, in its order:
    its `models`, else the one model of its top-level keys (none when it describes no model)."""
    serving = serving or {}
    if serving.get("models"):
        return [dict(model) for model in serving["models"]]
    if not serving.get("served_model_name"):
        return []
    return [{"name": serving["served_model_name"], "runner": serving.get("runner") or "generate",
             "model_path": serving.get("model_path") or "", "replicas": list(serving.get("replicas") or []),
             "base_urls": list(serving.get("base_urls") or []), "adapters": []}]


def model_view(serving, name):
    """serving.json as if the host served only the model `name`: its top-level served_model_name, model_path,
    replicas and base_urls are that model's (plus its runner and adapters); everything else stays. An empty name:
    serving unchanged. Raises ServedModelError, listing the served names, for a name the host does not serve."""
    serving = dict(serving or {})
    if not name:
        return serving
    models = served_models(serving)
    for model in models:
        if model.get("name") == name:
            serving.update(served_model_name=model["name"], model_path=model.get("model_path") or "",
                           replicas=list(model.get("replicas") or []), base_urls=list(model.get("base_urls") or []),
                           runner=model.get("runner") or "generate", adapters=list(model.get("adapters") or []))
            return serving
    served = ", ".join(sorted(m.get("name") or "?" for m in models)) or "none (no serving.json: run serve.yml first)"
    raise ServedModelError("this host does not serve a model named %r; it serves: %s" % (name, served))


def replica_models(serving):
    """{replica name: {name, model_path}}: which model each replica of a host of several models serves (its
    `models`, as fleet.replica_models pairs them); {} for a host of one model (its replicas serve the top-level
    model)."""
    return {str(replica.get("name")): {"name": model.get("name") or "", "model_path": model.get("model_path") or ""}
            for replica, model in fleet.replica_models(serving)}


def _single_model(member, model):
    """A member whose serving.json describes only `model` (what fleet_backends reads)."""
    serving = dict(member.get("serving") or {})
    serving.pop("models", None)
    serving.update(served_model_name=model["name"], replicas=list(model.get("replicas") or []),
                   base_urls=list(model.get("base_urls") or []))
    return dict(member, serving=serving)


def _metrics_port(members, backend):
    """{metrics_port}: where Prometheus reads a replica's /metrics on a host of several models behind its edge: the
    edge's one client port (its model's URL), as GET /metrics?replica=<instance>; {} without an edge (the replica's
    own port)."""
    member = next(m for m in members if m.get("host") == backend["host"])
    serving = member["serving"]
    urls = serving.get("base_urls") or []
    if not serving.get("edge") or not urls:
        return {}
    return {"metrics_port": fleet.parse_url(urls[0])[1] or backend["port"]}


def model_backends(members):
    """Every replica of every model of the serving hosts, as fleet.fleet_backends returns them, each with `model`
    (its served name) when its host lists `models`, and `metrics_port` when its host's edge serves its /metrics
    (_metrics_port). Without any host listing `models`: fleet_backends itself,
    unchanged (one model per fleet). Raises fleet.FleetError as fleet_backends does."""
    members = list(members or [])
    if not any(isinstance(m.get("serving"), dict) and m["serving"].get("models") for m in members):
        return fleet.fleet_backends(members)
    by_model = {}
    for member in members:
        models = served_models(member.get("serving"))
        if not models:
            fleet.fleet_backends([member])  # raises its fix for a host not served yet (a headless rank: nothing)
        for model in models:
            by_model.setdefault(model["name"], []).append(_single_model(member, model))
    backends = []
    for name, model_members in by_model.items():
        for backend in fleet.fleet_backends(model_members):
            backend["model"] = name
            backend.update(_metrics_port(model_members, backend))
            backends.append(backend)
    claimed = {}
    for backend in backends:
        key = (backend["address"], backend["port"])
        if key in claimed:
            raise fleet.FleetError("%s and %s both claim %s: every replica needs its own port."
                                   % (claimed[key], backend["name"], fleet.address_port(*key)))
        claimed[key] = backend["name"]
    return backends


def prometheus_model_targets(backends):
    """Prometheus static_configs for the replicas' /metrics (fleet.prometheus_vllm_targets), each group labelled
    `model` too when its backend carries one (a host of several models). vLLM's own series carry model_name.

    A replica behind an edge of several models is read on the edge's one port as /metrics?replica=<instance>
    (Prometheus' __param_replica target label); its `instance` label is then its server name, <host>-<replica>,
    since the address is its host's for every replica there."""
    backends = list(backends or [])
    groups = fleet.prometheus_vllm_targets(backends)
    for group, backend in zip(groups, backends):
        if backend.get("model"):
            group["labels"]["model"] = backend["model"]
        if backend.get("metrics_port"):
            group["targets"] = [fleet.address_port(backend["address"], backend["metrics_port"])]
            group["labels"].update({"instance": backend["name"], "__param_replica": backend["replica"]})
    return groups
