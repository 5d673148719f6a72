# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""``llmfleet_models``: the models a fleet serves, normalised and checked before anything changes (issue #39).

Pure functions, no I/O.

  model_list(models, shorthand, gpu_count=None) -> {"models": [entry, ...], "problems": [text, ...]}

``models`` is the inventory's list (entries with the short names of KEYS), or None / unset: then the one-model
variables of today (``shorthand``: the values of SHORTHAND_VARIABLES) make a one-entry list. That entry is marked
``shorthand: true`` and its replicas keep today's instance names ("0", "1", ...: units ``llmfleet-vllm@0.service``),
so a deployment made before llmfleet_models existed re-runs unchanged; ``shorthand_variables(entry)`` maps it back.
Entries of a list name their instances ``<name>-<n>`` (instance_name).

Each problem names the entry (``llmfleet_models[i] (name)``), the key and the fix.
"""

from __future__ import annotations

import difflib
import os
import re

# The short names an entry takes (issue #39, item 1); the bar of the issue uses exactly these.
KEYS = ("name", "model", "revision", "source", "local_path", "weights_dir", "max_model_len", "replicas",
        "tensor_parallel_size", "gpus", "gpu_share", "args_extra", "env", "features", "runner", "adapters")
REQUIRED = ("name", "model")
RUNNERS = ("generate", "pooling")
SOURCES = ("hf", "modelscope", "local", "archive")
# A name becomes a systemd unit instance (llmfleet-vllm@<name>-<n>.service), a container name
# (llmfleet-vllm-<name>-<n>), an HAProxy backend name and map key: letters, digits, '.', '_', '-' are valid in all
# of them unescaped (systemd.unit(5) instance names; HAProxy backend names allow [A-Za-z0-9-_.:]).  No '/' (systemd
# would escape it) and at most 64 characters (container and unit names stay readable).
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
# Where each entry key comes from in the one-model shorthand (the variables the roles read today).
SHORTHAND_VARIABLES = {
    "name": "llmfleet_served_model_name",
    "model": "llmfleet_model",
    "revision": "model_weights_revision",
    "source": "model_weights_source",
    "local_path": "model_weights_local_path",
    "weights_dir": "model_weights_dir",
    "max_model_len": "llmfleet_max_model_len",
    "replicas": "llmfleet_replicas",
    "tensor_parallel_size": "llmfleet_tensor_parallel_size",
    "args_extra": "vllm_server_args_extra",
    "env": "vllm_server_env",
    "features": "llmfleet_features",
}
DEFAULTS = {"revision": "", "source": "hf", "local_path": "", "weights_dir": "", "max_model_len": 0, "replicas": 0,
            "tensor_parallel_size": 0, "gpus": None, "gpu_share": None, "args_extra": {}, "env": {}, "features": {},
            "runner": "generate", "adapters": []}


def _where(index, entry):
    name = entry.get("name") if isinstance(entry, dict) else None
    return "llmfleet_models[%d]%s" % (index, " (%s)" % name if name else "")


def _whole(value, minimum):
    """An int >= minimum from an int or a digit string, else None (booleans are not numbers here)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and re.match(r"^[0-9]+$", value.strip()):
        value = int(value)
    return value if isinstance(value, int) and value >= minimum else None


def _share(value):
    """A gpu_share in (0, 1], else None."""
    if isinstance(value, bool):
        return None
    try:
        share = float(value)
    except (TypeError, ValueError):
        return None
    return share if 0 < share <= 1 else None


def shorthand_entry(shorthand):
    """The one-entry list's entry from today's one-model variables (``shorthand``: {variable: value}).  The served
    name defaults like vllm_server_served_model_name: the model directory's name."""
    values = {key: shorthand.get(var) for key, var in SHORTHAND_VARIABLES.items()}
    entry = {key: value for key, value in values.items() if value not in (None, "")}
    if not entry.get("name"):
        entry["name"] = os.path.basename(str(values.get("weights_dir") or values.get("model") or "").rstrip("/"))
    entry["shorthand"] = True
    return entry


def shorthand_variables(entry):
    """The one-model variables a shorthand entry stands for ({variable: value}): the way back to today's names."""
    return {var: entry[key] for key, var in SHORTHAND_VARIABLES.items() if key in entry}


def instance_name(entry, index):
    """The instance (unit instance, container suffix) of an entry's replica ``index``: today's "0", "1" for the
    shorthand, "<name>-<index>" for an entry of llmfleet_models."""
    return str(index) if entry.get("shorthand") else "%s-%d" % (entry["name"], index)


def _key_problems(where, entry):
    out = []
    for key in sorted(k for k in entry if k not in KEYS and k != "shorthand"):
        near = difflib.get_close_matches(str(key), KEYS, n=1)
        out.append("%s: key %r is not known%s; an entry takes %s." % (
            where, key, "; did you mean %r?" % near[0] if near else "", ", ".join(KEYS)))
    for key in REQUIRED:
        if not entry.get(key) or not isinstance(entry.get(key), str):
            out.append("%s: %s is required (a string): %s." % (
                where, key, "the served name clients send as \"model\"" if key == "name"
                else "a hub repo id, a profile or a model directory"))
    return out


def _value_problems(where, entry, shorthand):
    out = []
    name = entry.get("name")
    if isinstance(name, str) and not shorthand and not re.match(NAME_PATTERN, name):
        example = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[:64] or "m"
        out.append("%s: name %r cannot be a systemd unit instance and HAProxy map key; use letters, digits, '.', '_' "
                   "and '-' (pattern %s), e.g. %r." % (where, name, NAME_PATTERN, example))
    for key, minimum in (("replicas", 0), ("tensor_parallel_size", 0), ("max_model_len", 0)):
        if key in entry and _whole(entry[key], minimum) is None:
            out.append("%s: %s must be a whole number (0: the plan chooses), got %r." % (where, key, entry[key]))
    for key in ("args_extra", "env", "features"):
        if key in entry and not isinstance(entry[key], dict):
            out.append("%s: %s must be a mapping, got %r." % (where, key, entry[key]))
    if "adapters" in entry and not isinstance(entry["adapters"], list):
        out.append("%s: adapters must be a list of {name, model}, got %r." % (where, entry["adapters"]))
    if entry.get("runner", "generate") not in RUNNERS:
        out.append("%s: runner must be generate or pooling (embedding, classification and score models), got %r."
                   % (where, entry.get("runner")))
    if entry.get("source", "hf") not in SOURCES:
        out.append("%s: source must be one of %s, got %r." % (where, ", ".join(SOURCES), entry.get("source")))
    return out


def _gpu_problems(where, entry, gpu_count):
    """gpus and gpu_share of one entry: indexes on the host, and a layout that can hold."""
    out = []
    gpus, share = entry.get("gpus"), entry.get("gpu_share")
    if share is not None and _share(share) is None:
        out.append("%s: gpu_share must be a fraction of one GPU in (0, 1], got %r." % (where, share))
    if gpus is None:
        return out
    if not isinstance(gpus, list) or not gpus or any(_whole(g, 0) is None for g in gpus):
        return out + ["%s: gpus must be a list of GPU indexes (e.g. [0, 1]), got %r." % (where, gpus)]
    gpus = [int(g) for g in gpus]
    if len(set(gpus)) != len(gpus):
        out.append("%s: gpus lists a GPU twice (%r); list each GPU once." % (where, gpus))
    if gpu_count is not None:
        outside = [g for g in gpus if g >= gpu_count]
        if outside:
            out.append("%s: gpus %s are not on this host, which has %d GPU%s (indexes 0-%d)." % (
                where, ", ".join(map(str, outside)), gpu_count, "" if gpu_count == 1 else "s", gpu_count - 1))
    tp, replicas = _whole(entry.get("tensor_parallel_size"), 0) or 0, _whole(entry.get("replicas"), 0) or 0
    if share is not None and (len(gpus) > 1 or tp > 1):
        out.append("%s: gpu_share %s is a fraction of ONE GPU, but the entry has %s; give one GPU and "
                   "tensor_parallel_size 1 to share a GPU, or drop gpu_share to use whole GPUs." % (
                       where, share, "gpus %r" % gpus if len(gpus) > 1 else "tensor_parallel_size %d" % tp))
    elif tp and len(gpus) != tp * (replicas or len(gpus) // tp or 1):
        out.append("%s: gpus %r cannot hold %s of tensor_parallel_size %d; list %d GPUs per replica." % (
            where, gpus, "%d replicas" % replicas if replicas else "whole replicas", tp, tp))
    return out


def _list_problems(entries, wheres):
    """Problems between entries: duplicate names, one weights_dir with two contents, shares of a pinned GPU."""
    out = []
    seen, dirs, pinned = {}, {}, {}
    for where, entry in zip(wheres, entries):
        name = entry.get("name")
        if isinstance(name, str) and name:
            if name in seen:
                out.append("%s: name %r is already the name of %s; served names must be unique in the fleet, rename "
                           "one." % (where, name, seen[name]))
            seen.setdefault(name, where)
        wdir = entry.get("weights_dir")
        if wdir:
            content = (entry.get("model"), entry.get("revision") or "")
            first = dirs.setdefault(str(wdir).rstrip("/"), (where, content))
            if first[1] != content:
                other = first[1][0] + ("@" + first[1][1] if first[1][1] else "")
                out.append("%s: weights_dir %s is also where %s writes %s; give this entry its own weights_dir (or the "
                           "same model and revision)." % (where, wdir, first[0], other))
        gpus = entry.get("gpus")
        if isinstance(gpus, list) and all(_whole(g, 0) is not None for g in gpus):
            for g in set(int(g) for g in gpus):
                pinned.setdefault(g, []).append((where, _share(entry.get("gpu_share"))))
    for gpu, users in sorted(pinned.items()):
        if len(users) < 2:
            continue
        whole = [w for w, s in users if s is None]
        total = sum(s for _w, s in users if s is not None)
        if whole:
            out.append("GPU %d: %s pinned to it without gpu_share (it takes the whole GPU), beside %s; give every entry "
                       "on a shared GPU a gpu_share." % (gpu, " and ".join(whole),
                                                         ", ".join(w for w, _s in users if w not in whole)))
        elif total > 1 + 1e-9:
            out.append("GPU %d: the shares of %s add up to %s, more than the whole GPU; lower them to 1 or less in all."
                       % (gpu, ", ".join("%s (%s)" % (w, s) for w, s in users), ("%.3f" % total).rstrip("0")))
    return out


def _normalised(entry):
    out = dict(DEFAULTS)
    out.update({k: v for k, v in entry.items() if v is not None or k in ("gpus", "gpu_share")})
    for key in ("replicas", "tensor_parallel_size", "max_model_len"):
        out[key] = _whole(out[key], 0) or 0
    if out["gpus"] is not None:
        out["gpus"] = [int(g) for g in out["gpus"]]
    if out["gpu_share"] is not None:
        out["gpu_share"] = float(out["gpu_share"])
    out["shorthand"] = bool(entry.get("shorthand"))
    return out


def model_list(models, shorthand=None, gpu_count=None):
    """Normalise and check ``llmfleet_models`` (or the shorthand); see the module docstring."""
    if models is None:
        models, given = [shorthand_entry(shorthand or {})], False
    else:
        given = True
    if not isinstance(models, list):
        return {"models": [], "problems": ["llmfleet_models must be a list of models ({name, model, ...}), got %r; "
                                           "leave it unset to serve the one model of llmfleet_model." % (models,)]}
    if not models:
        return {"models": [], "problems": ["llmfleet_models is an empty list: list at least one model "
                                           "({name, model}), or leave it unset to serve llmfleet_model."]}
    problems, wheres = [], []
    for index, entry in enumerate(models):
        where = _where(index, entry) if given else "the one-model variables (llmfleet_model)"
        wheres.append(where)
        if not isinstance(entry, dict):
            problems.append("%s must be a mapping ({name, model, ...}), got %r." % (where, entry))
            continue
        problems += _key_problems(where, entry) + _value_problems(where, entry, not given) \
            + _gpu_problems(where, entry, gpu_count)
    entries = [e if isinstance(e, dict) else {} for e in models]
    problems += _list_problems(entries, wheres)
    if problems:
        return {"models": [], "problems": problems}
    return {"models": [_normalised(e) for e in entries], "problems": []}
