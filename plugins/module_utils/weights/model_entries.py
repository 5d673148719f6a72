# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The weights of every model of ``llmfleet_models`` (issue #39): what the model_weights role fetches, where it puts
each directory, which ones need work, what it publishes and what a model removed from the list left on disk.

Pure functions, no I/O (the model_fetch_plan module reads the host; the role's filters call these).

  entry_problems(models)                      the weights inputs of the list refused before anything changes
  weights_items(models, root)                 one item per model and per adapter: source, repo, directory
  items_needing_work(items, states, tree)     the items whose directory is not complete (from model_fetch_plan)
  published_paths(items)                      model_weights_paths and model_weights_adapter_paths
  removed_weights(items, record, serving)     the directories of models no longer in the list
  weights_record(items, removed, purged)      what the role records on the host (model_weights_record_file)
  plan_options(items), controller_dirs(items) model_fetch_plan's items; the controller directories to list

An item is the unit the role fetches: a model (kind ``model``) or one of its adapters (kind ``adapter``, placed in
``<model dir>.adapters/<adapter name>``). ``local_path`` is a controller path (uploaded), or ``host:/path`` for a
directory or archive already on the host.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import posixpath
import re

HUB_SOURCES = ("hf", "modelscope")
REPO_PATTERN = r"^[A-Za-z0-9][\w.-]*/[\w.-]+$"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
ADAPTER_KEYS = ("name", "model", "local_path", "revision")
HOST_PREFIX = "host:"


def adapters_dir(model_dir):
    """Where a model's adapters go: beside the model directory, never inside it (the model's marker lists its
    files; an adapter in it would be a file the hub does not know)."""
    return model_dir.rstrip("/") + ".adapters"


def _where(index, entry):
    name = entry.get("name") if isinstance(entry, dict) else None
    return "llmfleet_models[%d]%s" % (index, " (%s)" % name if name else "")


def _abs_dir(path):
    return isinstance(path, str) and path.startswith("/") and len(path.rstrip("/")) > 1 and "\0" not in path


def _local_problems(where, source, local_path, what="local_path"):
    if not isinstance(local_path, str) or not local_path.strip():
        kind = "a directory" if source == "local" else "a tar archive"
        return ["%s: source %s needs %s: %s on the controller, or %s/path for one already on the host." % (
            where, source, what, kind, HOST_PREFIX)]
    if local_path.startswith(HOST_PREFIX) and not _abs_dir(local_path[len(HOST_PREFIX):]):
        return ["%s: %s %r must name an absolute path after %s (e.g. host:/mnt/nfs/models/qwen)." % (
            where, what, local_path, HOST_PREFIX)]
    return []


def _source_problems(where, entry):
    source, model = entry.get("source") or "hf", entry.get("model")
    if source in HUB_SOURCES:
        if not isinstance(model, str) or not re.match(REPO_PATTERN, model):
            return ["%s: source %s needs model as a hub repository owner/name (e.g. Qwen/Qwen3-8B), got %r; set "
                    "source: local with local_path for a directory." % (where, source, model)]
        return []
    if source in ("local", "archive"):
        return _local_problems(where, source, entry.get("local_path"))
    return []  # an unknown source: model_list names it


def _adapter_problems(where, entry, model_names):
    adapters = entry.get("adapters")
    if adapters in (None, []):
        return []
    if not isinstance(adapters, list):
        return []  # model_list names it
    out, seen = [], set()
    for i, adapter in enumerate(adapters):
        at = "%s.adapters[%d]" % (where, i)
        if not isinstance(adapter, dict):
            out.append("%s must be a mapping {name, model} or {name, local_path}, got %r." % (at, adapter))
            continue
        for key in sorted(k for k in adapter if k not in ADAPTER_KEYS):
            near = difflib.get_close_matches(str(key), ADAPTER_KEYS, n=1)
            out.append("%s: key %r is not known%s; an adapter takes %s." % (
                at, key, "; did you mean %r?" % near[0] if near else "", ", ".join(ADAPTER_KEYS)))
        name = adapter.get("name")
        if not isinstance(name, str) or not re.match(NAME_PATTERN, name):
            out.append("%s: name %r must be the served name of the adapter: letters, digits, '.', '_', '-'." % (at, name))
        elif name in seen or name in model_names:
            out.append("%s: name %r is already taken by %s; clients pick an adapter by its name, rename it." % (
                at, name, "another adapter of this model" if name in seen else "a model"))
        seen.add(name)
        has_model, has_local = bool(adapter.get("model")), bool(adapter.get("local_path"))
        if has_model == has_local:
            out.append("%s: give exactly one of model (a hub repository owner/name) or local_path (a directory on "
                       "the controller, or host:/path)." % at)
        elif has_model and not re.match(REPO_PATTERN, str(adapter["model"])):
            out.append("%s: model must be a hub repository owner/name, got %r." % (at, adapter["model"]))
        elif has_local:
            out += _local_problems(at, "local", adapter["local_path"])
    return out


def entry_problems(models):
    """The weights inputs of ``llmfleet_models`` that cannot work, one sentence each naming the entry and the fix
    (the rest of an entry, and the list as a whole, are model_list's)."""
    if not isinstance(models, list):
        return []  # model_list names it
    names = set(e.get("name") for e in models if isinstance(e, dict))
    out = []
    for index, entry in enumerate(models):
        if not isinstance(entry, dict):
            continue
        where = _where(index, entry)
        out += _source_problems(where, entry)
        wdir = entry.get("weights_dir")
        if wdir not in (None, "") and not _abs_dir(wdir):
            out.append("%s: weights_dir must be an absolute directory on the host (e.g. /srv/llmfleet/models/%s), "
                       "got %r." % (where, entry.get("name") or "name", wdir))
        out += _adapter_problems(where, entry, names)
    return out


def _local_fields(source, local_path):
    """The role's four local/archive variables for a local_path (controller, or host:/path)."""
    fields = {"local_path": "", "host_path": "", "archive_path": "", "archive_host_path": ""}
    path = str(local_path or "")
    on_host = path.startswith(HOST_PREFIX)
    path = path[len(HOST_PREFIX):] if on_host else path
    if source == "local":
        fields["host_path" if on_host else "local_path"] = path
    elif source == "archive":
        fields["archive_host_path" if on_host else "archive_path"] = path
    fields["upload"] = bool(path) and not on_host and source in ("local", "archive")
    return fields


def _item(key, kind, model, source, repo_id, revision, dest, local_path):
    item = {"key": key, "kind": kind, "model": model, "source": source, "hub": source in HUB_SOURCES,
            "repo_id": repo_id if source in HUB_SOURCES else "", "revision": str(revision or ""), "dir": dest}
    item.update(_local_fields(source, local_path))
    return item


def weights_items(models, root):
    """One item per model of the normalised list (model_list's ``models``), then one per adapter of each, in list
    order. A model's directory is its weights_dir, else ``<root>/<name>``."""
    items, adapters = [], []
    root = str(root or "").rstrip("/") or "/srv/llmfleet/models"
    for entry in models:
        name, source = entry["name"], entry.get("source") or "hf"
        dest = str(entry.get("weights_dir") or posixpath.join(root, name)).rstrip("/")
        items.append(_item(name, "model", name, source, entry.get("model"), entry.get("revision"), dest,
                           entry.get("local_path")))
        hub = source if source in HUB_SOURCES else "hf"
        for adapter in entry.get("adapters") or []:
            a_source = hub if adapter.get("model") else "local"
            adapters.append(_item("%s:%s" % (name, adapter["name"]), "adapter", name, a_source, adapter.get("model"),
                                  adapter.get("revision"), posixpath.join(adapters_dir(dest), adapter["name"]),
                                  adapter.get("local_path")))
    return items + adapters


# The bookkeeping files of a model directory, which no listing of its model files holds.
BOOKKEEPING = re.compile(r"^[.](cache/|llmfleet-weights[.]json$|llmfleet-verified[.]json$)")


def listing(files):
    """Every model file as "relpath:size", sorted, bookkeeping files left out (files: dicts with path and size)."""
    # Matched on the path: on "path:size" the json names' $ never matched (#38 found it; they were compared).
    return sorted("%s:%s" % (f.get("path"), f.get("size")) for f in files or [] if not BOOKKEEPING.match(str(f.get("path"))))


def _upload_done(item, state, tree):
    """A controller directory the host already holds: the marker's origin is that directory, its files are the
    controller's (names and sizes), and no staging directory, lock or progress file is left beside it."""
    if item["source"] != "local" or state.get("leftovers"):
        return False  # an archive on the controller: its size and mtime are read by from_controller.yml
    base = item["local_path"].rstrip("/")
    marker = state.get("marker") or {}
    want = (tree or {}).get(item["local_path"]) or (tree or {}).get(base) or []
    return (marker.get("identity") or {}).get("origin") == "controller:" + base and bool(want) and \
        listing(want) == listing(marker.get("files"))


def items_needing_work(items, states, tree=None):
    """The keys of the items to go through the per-model fetch: states are model_fetch_plan's (one per item, by
    key: ``changed`` for what the host checked itself, ``marker``/``leftovers`` for a controller upload); tree is the
    weights_tree lookup's answer ({controller directory: [{path, size}]})."""
    by_key = dict((s.get("key"), s) for s in states or [])
    out = []
    for item in items:
        state = by_key.get(item["key"])
        if state is None or (not _upload_done(item, state, tree) if item["upload"] else state.get("changed")):
            out.append(item["key"])
    return out


def plan_options(items):
    """model_fetch_plan's items option: a host path is the module's local_path / archive_path."""
    return [{"key": i["key"], "dest": i["dir"], "kind": i["kind"], "upload": i["upload"], "source": i["source"],
             "repo_id": i["repo_id"] or None, "revision": i["revision"] or None,
             "local_path": i["host_path"] or None, "archive_path": i["archive_host_path"] or None} for i in items]


def controller_dirs(items):
    """The controller directories the items upload (for the weights_tree lookup)."""
    return [i["local_path"] for i in items if i["upload"] and i["source"] == "local"]


def published_paths(items):
    """{"paths": {model: dir}, "adapters": {model: {adapter: dir}}} (every model has an entry in adapters)."""
    paths = dict((i["key"], i["dir"]) for i in items if i["kind"] == "model")
    adapters = dict((name, {}) for name in paths)
    for i in items:
        if i["kind"] == "adapter":
            adapters.setdefault(i["model"], {})[i["key"].split(":", 1)[1]] = i["dir"]
    return {"paths": paths, "adapters": adapters}


def weights_record(items, removed=(), purged=False):
    """What the host keeps (the role's record file): {"models": [{name, dir}], "removed": [{name, dir}]} - the
    removed models whose weights stay on disk, so that every later run says where they are and a purge finds them."""
    return {"models": [{"name": i["key"], "dir": i["dir"]} for i in items if i["kind"] == "model"],
            "removed": [] if purged else [{"name": r["name"], "dir": r["dir"]} for r in removed]}


def _previous_models(record, serving):
    """{name: dir} of the models the host had: this role's record, then serving.json's models (serve role)."""
    seen = {}
    for entry in ((record or {}).get("models") or []) + ((record or {}).get("removed") or []):
        if isinstance(entry, dict) and entry.get("name") and _abs_dir(entry.get("dir")):
            seen.setdefault(entry["name"], entry["dir"].rstrip("/"))
    for entry in (serving or {}).get("models") or []:
        if isinstance(entry, dict) and entry.get("name") and _abs_dir(entry.get("model_path")):
            seen.setdefault(entry["name"], entry["model_path"].rstrip("/"))
    return seen


def removed_weights(items, record=None, serving=None):
    """The models the host had that the list no longer names: [{name, dir, paths}] - paths: what a purge removes
    (the directory, its adapters and its previous generation). A directory a model of the list still uses (its own,
    under it, or holding it) is never listed."""
    current = set(i["key"] for i in items if i["kind"] == "model")
    in_use = [i["dir"].rstrip("/") for i in items]
    out = []
    for name, wdir in sorted(_previous_models(record, serving).items()):
        if name in current:
            continue
        if any(d == wdir or d.startswith(wdir + "/") or wdir.startswith(d + "/") for d in in_use):
            continue
        parent, base = posixpath.split(wdir)
        out.append({"name": name, "dir": wdir, "note": "%s at %s" % (name, wdir),
                    "paths": [wdir, adapters_dir(wdir), posixpath.join(parent, ".%s.previous" % base)]})
    return out
