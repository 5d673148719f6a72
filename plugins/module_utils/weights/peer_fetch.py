# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pull model files from peers of the fleet with rsync (model_fetch's O(peers)): the host-side half of
peer_weights.py.

Each peer is tried in turn for the files still missing (absent or short): a peer that refuses, is unreachable or
dies mid-transfer costs its timeout, and the next one continues from the partial file the last one left
(rsync --partial-dir: the bytes already here are not sent again). What the peers could not deliver is left to
the hub by the caller. Nothing here decides whether a file is good: model_fetch verifies every file against the
hub's metadata afterwards, whoever sent it.
"""
from __future__ import absolute_import, division, print_function

import os
import subprocess
import tempfile
import time

from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import peer_weights as P

__metaclass__ = type

# Under the staging directory's .cache (client bookkeeping: never part of the model, removed before placement).
WORK_DIR = os.path.join(".cache", "llmfleet-peer")


def in_flight(staging):
    """Files rsync is writing now (its temp files), for the progress line."""
    tmp = os.path.join(staging, WORK_DIR, "tmp")
    try:
        return [os.path.join(tmp, n) for n in os.listdir(tmp)]
    except OSError:
        return []


def _sizes_on_disk(staging, paths):
    out = {}
    for rel in paths:
        try:
            out[rel] = os.path.getsize(os.path.join(staging, rel))
        except OSError:
            pass
    return out


def pull(peers, staging, sizes, timeout=30, contimeout=10, bwlimit_kib=0, rsync="rsync"):
    """Fetch the files sizes names (path -> expected bytes) into staging from peers ([{host, url}], in order).

    Returns a report: bytes (received from peers, by the sizes of the files completed), files (completed from
    peers), left (paths no peer delivered: the hub's), tried ([{host, rc, reason, seconds, files}]).
    """
    work = os.path.join(staging, WORK_DIR)
    for sub in ("partial", "tmp"):
        os.makedirs(os.path.join(work, sub), exist_ok=True)
    before = _sizes_on_disk(staging, sizes)
    tried = []
    for peer in peers or []:
        todo = P.remaining(sizes, _sizes_on_disk(staging, sizes))
        if not todo:
            break
        fd, listfile = tempfile.mkstemp(prefix="files-", dir=work)
        with os.fdopen(fd, "w") as f:
            f.write("".join(p + "\n" for p in todo))
        argv = P.rsync_argv(peer["url"], staging, listfile, work, timeout, contimeout, bwlimit_kib)
        argv[0] = rsync
        t0 = time.time()
        try:
            proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                                  check=False)
            rc, err = proc.returncode, proc.stderr
        except OSError as e:  # rsync missing
            rc, err = 127, str(e)
        finally:
            os.unlink(listfile)
        now = _sizes_on_disk(staging, sizes)
        got = [p for p in todo if now.get(p) == sizes[p]]
        tried.append({"host": peer.get("host"), "url": peer["url"], "rc": rc,
                      "reason": "ok" if rc == 0 else P.rsync_reason(rc), "seconds": round(time.time() - t0, 2),
                      "files": len(got), "stderr": err.strip().splitlines()[-3:] if rc else []})
    after = _sizes_on_disk(staging, sizes)
    done = [p for p in sizes if after.get(p) == sizes[p] and before.get(p) != sizes[p]]
    return {"bytes": sum(sizes[p] for p in done), "files": len(done),
            "left": P.remaining(sizes, after), "tried": tried}
