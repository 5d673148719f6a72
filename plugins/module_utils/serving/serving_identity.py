# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a replica serves, as one value that changes when the served bytes change, and the known-good copy of a
replica's configuration that a failed replacement rolls back to. Pure functions, no I/O.

  manifest_digest(marker)            the weights' manifest (names, sizes, sha256) the weights role verified -> digest
  listing_digest(listing)            a directory without that record: names, sizes and modification times -> digest
  replica_files(config_dir, name)    the files that make up one replica's configuration
  to_keep(replicas)                  which replicas serve their current configuration now (theirs is known-good)
  known_good_replicas(replicas)      those, each with the manifest digest its container serves
  replicas_named(replicas, names)    the replicas of a list whose names are given (names compared as strings)
  rollback_message(...)              the sentence a failed replacement ends with

A replica's serving identity is its run command (image pin, flags, mounts), its environment and its unit settings,
plus what its model directory holds. The first three are its files; the manifest digest is written into the run
command as a container label, so new weights in the same directory change the run file (and so restart the
replica) exactly when the bytes change, and `docker inspect` shows which manifest a container serves.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json

# The container label that carries the manifest digest (also in serving.json and the known-good record).
MANIFEST_LABEL = "llmfleet.vllm.model-manifest"
IMAGE_LABEL = "llmfleet.vllm.image-id"
REPLICA_FILE_KINDS = ("run", "env", "unit.conf")


def _digest(rows):
    text = json.dumps(rows, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _content(entry, digests, stats):
    """A file's content identity: the hub's sha256, else the sha256 computed when it was verified, else its git blob
    id; a file verified by size only (a local copy has no reference hash) is identified by the file itself
    (modification time and inode: a new placement writes new files, a re-run that places nothing keeps them)."""
    path = entry.get("path")
    known = entry.get("sha256") or digests.get(path) or entry.get("git_sha1")
    if known and known != "size-only":
        return known
    stat = (stats or {}).get(path)
    return "file:%d:%d" % tuple(stat) if stat else "size-only"


def manifest_digest(marker, stats=None):
    """The digest of a verified model directory's manifest (the weights role's .llmfleet-weights.json): each file's
    path, size and content identity (_content). stats: {path: (mtime_ns, inode)} of the files on disk, for those
    verified by size only. None when the record lists no files."""
    files = (marker or {}).get("files") or []
    digests = (marker or {}).get("digests") or {}
    rows = [[entry.get("path"), int(entry.get("size") or 0), _content(entry, digests, stats)] for entry in files]
    return _digest(sorted(rows)) if rows else None


def listing_digest(listing):
    """A directory the weights role did not place (no manifest record): {relpath: (size, mtime_ns)} -> digest.
    Cheaper than hashing every byte and still changes when a file is replaced, resized or touched."""
    rows = sorted([path, int(size), int(mtime)] for path, (size, mtime) in (listing or {}).items())
    return _digest(rows) if rows else None


def replica_files(config_dir, name):
    """{kind: path} of the files one replica's configuration is made of."""
    return dict((kind, "%s/vllm-%s.%s" % (config_dir.rstrip("/"), name, kind)) for kind in REPLICA_FILE_KINDS)


def to_keep(replicas):
    """Names of the replicas whose configuration is known-good now: running, healthy, and running the files on disk
    (replica_state's action 'started': not stale, not failed, nothing to restart). replicas: replica_state's list."""
    return [str(r.get("name")) for r in replicas or []
            if r.get("health") == 200 and r.get("action") == "started" and (r.get("container") or {}).get("running")]


def replicas_named(replicas, names):
    """The replicas (dicts with a name, as the serve role lists them) whose name is one of names, names compared as
    strings (an inventory may say 0 where a unit says "0"), in the order of replicas."""
    wanted = set(str(name) for name in names or [])
    return [replica for replica in replicas or [] if str(replica.get("name")) in wanted]


def rollback_message(host, failed, restored, serving, diagnosis, seconds):
    """The run's closing sentence after a replacement that did not serve.

    failed: replicas whose new configuration did not serve; restored: those put back to their known-good copy;
    serving: of those, the ones answering a completion again; diagnosis: finding ids of the new replicas."""
    said = ("Diagnosis of the new configuration: %s (the fix is printed above its log lines)." % ", ".join(diagnosis)
            if diagnosis else "No known failure signature matched the new configuration; its journal is above.")
    head = "The new configuration of replica(s) %s on %s did not serve a completion. %s" % (
        ", ".join(failed), host, said)
    if not restored:
        return head + (" There was no known-good configuration to roll back to (a first deployment, or the replica "
                       "was not serving before this run); fix the input and re-run.")
    back = [name for name in restored if name in serving]
    down = [name for name in restored if name not in serving]
    text = head + " Rolled back in %.0f s:" % seconds
    if back:
        text += " the previous configuration of replica(s) %s is serving again." % ", ".join(back)
    if down:
        text += (" replica(s) %s were restored to their previous configuration but do not answer yet (see "
                 "playbooks/diagnose.yml)." % ", ".join(down))
    return text + " Fix the input and re-run; nothing else needs undoing."


def known_good_replicas(replicas):
    """replica_state's replicas -> [{name, model_manifest}] of those to keep (to_keep), each with the manifest digest
    its container's label says it serves (None for a container started before the label existed)."""
    keep = set(to_keep(replicas))
    return [{"name": str(r.get("name")), "model_manifest": (r.get("container") or {}).get("model_manifest")}
            for r in replicas or [] if str(r.get("name")) in keep]
