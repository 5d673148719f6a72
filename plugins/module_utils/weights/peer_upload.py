# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A controller upload once per fleet: the controller's manifest, and the puller's side of the peer pull.

The model_weights role uploads a model directory or archive from the controller to one host per peer group and
spreads it over the LAN with the same rsync rounds as a hub download (peer_weights.schedule). What a host accepts
is decided by the manifest the CONTROLLER computed (sizes and sha256 of every file it holds: model_manifest,
run on the controller), never by a peer: the puller writes that manifest into its staging directory as the
marker model_fetch reads (source local, in place), pulls the files from its peers (peer_fetch.pull), and
model_fetch verifies every file against the controller's sha256 before it renames the directory into place.
"""
from __future__ import absolute_import, division, print_function

import hashlib
import json
import os
import tarfile

from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import weights as W

__metaclass__ = type


class ManifestError(ValueError):
    pass


def _sha256_stream(handle, block=8 << 20):
    h = hashlib.sha256()
    size = 0
    while True:
        chunk = handle.read(block)
        if not chunk:
            break
        h.update(chunk)
        size += len(chunk)
    return h.hexdigest(), size


def dir_manifest(root):
    """[{path, size, sha256, git_sha1}] of every model file under root (symlinked files as their content, as the
    upload sends them; client bookkeeping and the role's markers left out, as on the host), sorted by path."""
    root = os.path.normpath(root)
    if not os.path.isdir(root):
        raise ManifestError("%s is not a directory" % root)
    out = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d not in W.CLIENT_BOOKKEEPING]
        dirnames.sort()
        for name in sorted(filenames):
            rel = name if rel_dir == "." else os.path.join(rel_dir, name).replace(os.sep, "/")
            full = os.path.join(dirpath, name)
            if W.is_client_bookkeeping(rel) or not os.path.isfile(full):
                continue
            with open(full, "rb") as handle:
                digest, size = _sha256_stream(handle)
            out.append(W.manifest_entry(rel, size, sha256=digest))
    if not out:
        raise ManifestError("%s holds no model files" % root)
    return sorted(out, key=lambda m: m["path"])


def archive_manifest(path):
    """The manifest of the directory model_fetch makes of the tar archive at path (source archive): its regular
    members, one top-level directory stripped, bookkeeping left out; members that may not be extracted refused."""
    try:
        tf = tarfile.open(path)
    except (OSError, tarfile.TarError) as exc:
        raise ManifestError("%s is not a readable tar archive: %s" % (path, exc))
    with tf:
        try:
            files = W.archive_files(tf.getmembers(), path)
        except ValueError as exc:
            raise ManifestError(str(exc))
        out = {}
        for m, rel in files:
            rel = os.path.normpath(rel).replace(os.sep, "/")
            if W.is_client_bookkeeping(rel):
                continue
            digest, size = _sha256_stream(tf.extractfile(m))
            out[rel] = W.manifest_entry(rel, size, sha256=digest)  # a later member of the same name wins, as on disk
    if not out:
        raise ManifestError("archive %s holds no model files" % path)
    return [out[k] for k in sorted(out)]


def manifest_digest(manifest):
    """A short stable id of a manifest (hosts with the same one may share their files)."""
    return hashlib.sha256(json.dumps([[m["path"], m["size"], m.get("sha256")] for m in manifest],
                                     sort_keys=True).encode("utf-8")).hexdigest()[:16]


def check_manifest(manifest):
    """The manifest as the puller accepts it (a list of {path, size, sha256}, relative paths that stay inside the
    model directory, a sha256 for every file); raises ManifestError naming the first problem."""
    if not isinstance(manifest, list) or not manifest:
        raise ManifestError("manifest must be a non-empty list of {path, size, sha256}")
    out = []
    for m in manifest:
        if not isinstance(m, dict) or "path" not in m or "size" not in m:
            raise ManifestError("manifest entry %r needs path and size" % (m,))
        rel = str(m["path"])
        if not W.safe_member(rel, "file") or rel in (".", "") or W.is_client_bookkeeping(rel):
            raise ManifestError("manifest path %r is not a model file inside the model directory" % rel)
        entry = W.manifest_entry(rel, int(m["size"]), sha256=m.get("sha256"))
        if not entry["sha256"]:
            raise ManifestError("manifest entry %s has no sha256: the controller's digest is what the host checks"
                                % rel)
        out.append(entry)
    return sorted(out, key=lambda e: e["path"])


def staging_marker(manifest):
    """The content of the marker the puller writes into its staging directory: model_fetch (source local, in
    place) verifies the directory against its files (sizes and sha256)."""
    return {"files": check_manifest(manifest)}
