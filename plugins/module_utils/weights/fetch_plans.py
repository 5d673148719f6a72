# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The work of llmfleet.vllm.model_fetch_plan: every model directory of the host checked in one remote call.

plan_items(items, shared, warn) -> [state per item]: model_fetch's plan (check mode: nothing changes) for what the
host can check on its own (a hub repository, a directory or archive on the host); for a controller upload, the
marker of the directory and what a placement left beside it (the controller compares them with its own files).
read_state_files(paths) -> {path: parsed JSON or None}: the role's record and serving.json, read in the same call.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import weights as W
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights.fetch_place import FetchError, leftovers
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights.hub_fetch import fetch

# model_fetch's options an item may carry (the rest are shared by all items, or model_fetch's defaults).
ITEM_OPTIONS = ("source", "repo_id", "revision", "dest", "local_path", "archive_path", "allow_patterns",
                "ignore_patterns", "kind")
DEFAULTS = {"source": "hf", "repo_id": None, "revision": None, "token": None, "endpoint": None, "local_path": None,
            "archive_path": None, "origin": None, "staging_dir": None, "progress_file": None, "space_margin": 1.05,
            "require_ssd": False, "environment": "dev", "verify_existing": False, "max_workers": 8, "peers": [],
            "peer_timeout": 30, "peer_bwlimit_kib": 0, "keep_previous": False, "allow_patterns": [],
            "ignore_patterns": [], "kind": "model"}
# What the role reads of a plan (the full model_fetch result stays on the host).
KEPT = ("changed", "files_total", "bytes_total", "bytes_to_fetch", "free_bytes", "commit", "revision")


def read_json_file(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (IOError, OSError, ValueError):
        return None


def _upload_state(item):
    """A controller upload: the directory's marker and the leftovers of an interrupted placement."""
    dest = os.path.normpath(item["dest"])
    parent, name = os.path.dirname(dest), os.path.basename(dest)
    marker = read_json_file(os.path.join(dest, W.MARKER_NAME)) if os.path.isdir(dest) else None
    left = leftovers(os.path.join(parent, ".%s.partial" % name), os.path.join(parent, ".%s.lock" % name),
                     os.path.join(parent, ".%s.progress.json" % name))
    return {"marker": {"identity": (marker or {}).get("identity"), "files": (marker or {}).get("files") or []},
            "leftovers": left, "changed": marker is None or bool(left)}


def plan_item(item, shared, warn=None):
    """One item's state: {key, dest, kind, msg, ...KEPT} (check mode), or the upload state."""
    state = {"key": item["key"], "dest": os.path.normpath(item["dest"]), "kind": item.get("kind") or "model"}
    if item.get("upload"):
        state.update(_upload_state(item))
        state["msg"] = "a controller upload: compared with the controller's files"
        return state
    params = dict(DEFAULTS)
    params.update(dict((k, v) for k, v in shared.items() if v is not None))
    params.update(dict((k, item[k]) for k in ITEM_OPTIONS if item.get(k) not in (None, "")))
    if params["source"] not in ("hf", "modelscope"):
        params["token"] = params["endpoint"] = None
    try:
        msg, result = fetch(params, check_mode=True, warn=warn)
    except FetchError as exc:
        raise FetchError("%s: %s" % (item["key"], exc))
    state.update(dict((k, result.get(k)) for k in KEPT))
    state["files_to_fetch"] = len(result.get("files_to_fetch") or [])
    state["msg"] = msg
    return state


def plan_items(items, shared, warn=None):
    return [plan_item(item, shared, warn) for item in items]


def read_state_files(paths):
    return dict((path, read_json_file(path)) for path in paths or [])
