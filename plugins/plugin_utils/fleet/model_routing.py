# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Routing by the request's "model" with API keys limited to some models, as data (pure functions, no I/O).

  key_grants(api_keys, model_keys, names, strict)   who may use what: [{id, key, models}] (ids k0, k1, ...)
  model_routes(models, grants, settings)            what the HAProxy configuration prints (no key material)
  route_files(models, grants, settings)             the map files HAProxy reads (secret: 0600, never logged)
  key_problems(model_keys)                          what is wrong with llmfleet_api_keys before anything runs

models: [{name, names}] - a served model and every name that reaches its replicas (the model's own and its LoRA
adapters'). Used by the edge and the fleet balancer alike (haproxy_config.py); the role's model_routing.cfg.j2 prints
model_routes. A request is routed on the pair "<key id>/<name>" through a map: a name the key may not use has no
entry, so several names on one backend never widen a key's reach, and the backend name is a fixed prefix plus a
map value, so a client cannot pick a backend that is not listed.
"""

from __future__ import annotations

import hashlib
import json
import re

BACKEND_PREFIX = "llmfleet_model_"
ALL = "*"
# Anonymous serving (no key at all): one grant of every name under this id.
ANONYMOUS_ID = "all"
# Room in HAProxy's buffer for the request line and headers beside the largest body accepted.
HEADER_ROOM = 65536
_KEY_BAD = re.compile(r"[\s,]")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class RoutingError(ValueError):
    """Keys or models that cannot be routed; the message says what is wrong and how to fix it."""


def _grant_models(entry, where, names, strict):
    """The names one limited key may use (every name for ["*"] or no models), checked against names when strict."""
    models = entry.get("models", [ALL])
    if models is None:
        models = [ALL]
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        raise RoutingError("%s: models must be a list of served names (or [\"*\"] for all), got %r." % (where, models))
    if ALL in models:
        return list(names)
    unknown = [m for m in models if m not in names]
    if unknown and strict:
        raise RoutingError("%s: no served model or adapter is named %s; the fleet serves %s."
                           % (where, ", ".join(repr(m) for m in unknown), ", ".join(names) or "nothing"))
    return [n for n in names if n in models]


def key_grants(api_keys, model_keys, names, strict=False):
    """Every accepted key with the names it may use, in order: api_keys (each one every name), then model_keys
    ([{key, models}], llmfleet_api_keys). A key listed twice gets the union. strict: a name no model serves is an
    error (the fleet balancer knows every name; an edge knows only its host's and skips the others')."""
    names = [str(n) for n in names or []]
    grants = {}
    order = []
    entries = [{"key": k} for k in api_keys or []] + list(model_keys or [])
    for index, entry in enumerate(entries):
        where = "llmfleet_api_keys[%d]" % (index - len(api_keys or [])) if index >= len(api_keys or []) else "llmfleet_api_key"
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str) or not entry["key"]:
            raise RoutingError("%s: each entry needs a key (a non-empty string) and optionally models, got a %s."
                               % (where, type(entry).__name__))
        unknown = sorted(set(entry) - {"key", "models"})
        if unknown:
            raise RoutingError("%s: unknown keys %s (an entry has key and models)." % (where, ", ".join(unknown)))
        key = entry["key"]
        if _KEY_BAD.search(key):
            raise RoutingError("%s: an API key cannot hold spaces or commas (HAProxy matches the whole header)." % where)
        if key not in grants:
            grants[key] = []
            order.append(key)
        allowed = _grant_models(entry, where, names, strict)
        grants[key] = [n for n in names if n in grants[key] or n in allowed]
    return [{"id": "k%d" % i, "key": key, "models": grants[key]} for i, key in enumerate(order)]


def key_problems(model_keys):
    """What is wrong with llmfleet_api_keys on its own (before any model is known): one sentence, or none."""
    if model_keys is not None and not isinstance(model_keys, list):
        return ["llmfleet_api_keys must be a list of {key, models}, got a %s." % type(model_keys).__name__]
    try:
        key_grants([], model_keys, [])
    except RoutingError as exc:
        return [str(exc)]
    return []


def _checked_models(models):
    """[{name, names}] with every name valid and served once."""
    seen = {}
    out = []
    for model in models or []:
        name = str(model["name"])
        names = [name] + [str(n) for n in model.get("names") or [] if str(n) != name]
        for n in names:
            if not _NAME.match(n):
                raise RoutingError("%r cannot be a HAProxy map key: use letters, digits, '.', '_' and '-'." % n)
            if n in seen:
                raise RoutingError("the name %r reaches two models (%s and %s): each served name and adapter "
                                   "must be unique in the fleet." % (n, seen[n], name))
            seen[n] = name
        out.append({"name": name, "names": names})
    return out


def _routes(models, grants):
    """{"<key id>/<name>": model} for every name each grant may use."""
    owner = dict((n, m["name"]) for m in models for n in m["names"])
    return dict(("%s/%s" % (g["id"], n), owner[n]) for g in grants for n in g["models"] if n in owner)


def _guarded(models, grants):
    """The routes whose backend also answers names the key may not use: there the body may name "model" only once
    (HAProxy reads the first "model" key, vLLM the last)."""
    out = []
    for g in grants:
        for m in models:
            mine = [n for n in m["names"] if n in g["models"]]
            if mine and len(mine) < len(m["names"]):
                out.extend("%s/%s" % (g["id"], n) for n in mine)
    return out


def model_routes(models, grants, settings):
    """What the configuration prints: backends [{name, model}], every served name, the guarded routes, the body
    limit and buffer size, and the map files' paths (settings: files {key_ids, routes, listings, names, upstream},
    max_body_bytes, body_timeout). No key material: grants are referred to by id."""
    models = _checked_models(models)
    limit = int(settings.get("max_body_bytes") or 0)
    if limit < 65536:
        raise RoutingError("loadbalancer_max_body_bytes must be at least 65536 (a prompt before \"model\"), got %d."
                           % limit)
    files = dict(settings.get("files") or {})
    return {
        "backends": [{"name": BACKEND_PREFIX + m["name"], "model": m["name"]} for m in models],
        "backend_prefix": BACKEND_PREFIX,
        "names": [n for m in models for n in m["names"]],
        "guarded": _guarded(models, grants),
        "anonymous": not any(g.get("key") for g in grants),
        "max_body_bytes": limit,
        "bufsize": limit + HEADER_ROOM,
        "body_timeout": int(settings.get("body_timeout") or 30),
        "files": files,
    }


def key_id_of(key):
    """What HAProxy computes from a request's Authorization header (sha2(256),hex) for a key: the key's map entry."""
    return hashlib.sha256(("Bearer %s" % key).encode("utf-8")).hexdigest().upper()


def _listing(names):
    """OpenAI's model objects for /v1/models (compact: a map value is the rest of its line)."""
    return json.dumps([{"id": n, "object": "model", "created": 0, "owned_by": "llmfleet"} for n in names],
                      separators=(",", ":"))


def route_files(models, grants, settings):
    """The map files, [{path, content}] for the config_files module's secret_files (key hashes, and the key the
    replicas check): key_ids (hash -> id), routes ("<id>/<name>" -> model), listings (id -> /v1/models data),
    names (id -> the names it may use, for errors), upstream ("replica" -> the Authorization the replicas accept;
    settings: upstream_key)."""
    models = _checked_models(models)
    files = dict(settings.get("files") or {})
    head = "# Managed by Ansible (%s): changes here are overwritten.\n" % settings.get("managed_by", "llmfleet.vllm")
    ids = [g for g in grants if g.get("key")] or [{"id": ANONYMOUS_ID, "models": [n for m in models for n in m["names"]]}]
    routes = _routes(models, ids)
    content = {
        "key_ids": "".join("%s %s\n" % (key_id_of(g["key"]), g["id"]) for g in ids if g.get("key")),
        "routes": "".join("%s %s\n" % (route, model) for route, model in sorted(routes.items())),
        "listings": "".join("%s %s\n" % (g["id"], _listing(g["models"])) for g in ids),
        "names": "".join("%s %s\n" % (g["id"], ", ".join(g["models"]) or "none") for g in ids),
        "upstream": ("replica Bearer %s\n" % settings["upstream_key"]) if settings.get("upstream_key") else "",
    }
    return [{"path": files[kind], "content": head + text} for kind, text in content.items() if files.get(kind)]
