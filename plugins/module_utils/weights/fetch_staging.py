# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The staging directory of a model placement (model_fetch, hub_fetch.fetch). Does I/O.

  listing(root), incomplete_files(root), part_files(root, paths)   what a directory holds, and the hub clients'
                                                                   half-written files in it
  read_json(path, default), write_json(path, data)                 small JSON files, written atomically
  Progress        a thread that rewrites the progress JSON while files grow
  StreamHasher    a thread that hashes files as the client writes them
  verify_files(staging, manifest, paths, workers, streamed)        sizes and digests against the manifest
  structural_check(root, manifest, kind)                           the whole directory: files, index, headers
The pure rules (manifests, digests, completeness) are in weights.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import peer_fetch
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import weights as W


def listing(root):
    """relpath -> (size, mtime_ns) for regular files under root (client bookkeeping skipped)."""
    out = {}
    if not os.path.isdir(root):
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d not in W.CLIENT_BOOKKEEPING]
        for name in filenames:
            rel = name if rel_dir == "." else os.path.join(rel_dir, name).replace(os.sep, "/")
            if W.is_client_bookkeeping(rel):
                continue
            st = os.lstat(os.path.join(dirpath, name))
            if os.path.isfile(os.path.join(dirpath, name)) and not os.path.islink(os.path.join(dirpath, name)):
                out[rel] = (st.st_size, st.st_mtime_ns)
    return out


def incomplete_files(root):
    found = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if name.endswith(".incomplete"):
                found.append(os.path.join(dirpath, name))
    return found


def part_files(root, paths):
    """ModelScope's parallel range parts of big files: <target>_<start>_<end> beside the target."""
    found = []
    for rel in paths:
        full = os.path.join(root, rel)
        base = os.path.basename(full) + "_"
        try:
            names = os.listdir(os.path.dirname(full))
        except OSError:
            continue
        found.extend(os.path.join(os.path.dirname(full), n) for n in names
                     if n.startswith(base) and W.PART_SUFFIX_RE.match(n[len(base) - 1:]))
    return found


def read_json(path, default):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def write_json(path, data):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


class Progress(threading.Thread):
    """Rewrites the progress JSON once a second from what is on disk (works for any client)."""

    def __init__(self, path, staging, manifest, to_fetch, base_done):
        super(Progress, self).__init__(daemon=True)
        self.path, self.staging = path, staging
        self.sizes = dict((m["path"], m["size"]) for m in manifest)
        self.to_fetch = list(to_fetch)
        self.total = sum(self.sizes.values())
        self.base_done = base_done
        self.start_done = None
        self.t0 = time.time()
        self.stop_event = threading.Event()
        self.phase = "downloading"
        self.extra = {}

    def measure(self):
        done = self.base_done
        for p in self.to_fetch:
            try:
                done += min(self.sizes[p], os.path.getsize(os.path.join(self.staging, p)))
            except OSError:
                pass
        for f in incomplete_files(self.staging) + part_files(self.staging, self.to_fetch) + \
                peer_fetch.in_flight(self.staging):
            try:
                done += os.path.getsize(f)
            except OSError:
                pass
        return min(done, self.total)

    def write(self, phase=None, done=None):
        if phase:
            self.phase = phase
        done = self.measure() if done is None else done
        if self.start_done is None:
            self.start_done = done
        rec = W.progress(done, self.total, self.start_done, time.time() - self.t0, self.phase)
        rec.update(self.extra)
        rec["updated"] = time.time()
        rec["pid"] = os.getpid()
        try:
            write_json(self.path, rec)
        except OSError:
            pass
        return rec

    def run(self):
        while not self.stop_event.wait(1.0):
            self.write()

    def stop(self, phase):
        self.stop_event.set()
        self.join(5)
        return self.write(phase)


class StreamHasher(threading.Thread):
    """Hashes LFS files WHILE the client writes them, so verification adds no tail after the download.

    It follows the client's partial file (huggingface_hub: .cache/huggingface/download/<h>.<sha256>[.<uuid8>].incomplete;
    modelscope: <target>.incomplete) through an open descriptor, and hands a digest over only when the
    final file at <target> is the very inode it read, with the expected size, and was never truncated.
    Anything else (restarts, ModelScope's parallel range parts, files finished before it looked) falls back
    to an ordinary full hash after the download: a shortcut, never a weaker check.
    """

    def __init__(self, staging, entries):
        super(StreamHasher, self).__init__(daemon=True)
        self.staging = staging
        self.todo = dict((e["path"], e) for e in entries if e.get("sha256"))
        self.state = {}
        self.digests = {}
        self.stop_event = threading.Event()

    def _candidate(self, entry):
        ms = os.path.join(self.staging, entry["path"] + ".incomplete")
        if os.path.exists(ms):
            return ms
        hf_dir = os.path.join(self.staging, ".cache", "huggingface", "download")
        needle = "." + entry["sha256"] + "."  # <h>.<etag>[.<uuid8>].incomplete: the etag of an LFS file is its sha256
        for dirpath, _d, files in os.walk(hf_dir):
            for name in files:
                if needle in name and name.endswith(".incomplete"):
                    return os.path.join(dirpath, name)
        return None

    def _step(self, rel):
        entry, st = self.todo[rel], self.state.setdefault(rel, {})
        if st.get("failed") or rel in self.digests:
            return
        final = os.path.join(self.staging, rel)
        if "fd" not in st:
            if os.path.exists(final):
                st["failed"] = True  # finished before we saw it: hash it afterwards
                return
            cand = self._candidate(entry)
            if cand is None:
                return
            try:
                fd = os.open(cand, os.O_RDONLY)
            except OSError:
                return
            st.update(fd=fd, ino=os.fstat(fd).st_ino, off=0, h=__import__("hashlib").sha256())
        fd = st["fd"]
        size = os.fstat(fd).st_size
        if size < st["off"] or size > entry["size"]:
            self._fail(st)
            return
        while st["off"] < size:
            chunk = os.pread(fd, min(8 << 20, size - st["off"]), st["off"])
            if not chunk:
                break
            st["h"].update(chunk)
            st["off"] += len(chunk)
        if st["off"] == entry["size"]:
            try:
                fst = os.stat(final)
            except OSError:
                return  # not renamed into place yet
            if fst.st_ino == st["ino"] and fst.st_size == entry["size"]:
                self.digests[rel] = st["h"].hexdigest()
                os.close(fd)
                st.pop("fd")
            else:
                self._fail(st)

    def _fail(self, st):
        st["failed"] = True
        if "fd" in st:
            os.close(st.pop("fd"))

    def run(self):
        while True:
            stopping = self.stop_event.is_set()
            for rel in list(self.todo):
                try:
                    self._step(rel)
                except OSError:
                    self._fail(self.state.setdefault(rel, {}))
            if stopping:
                break
            self.stop_event.wait(0.2)

    def finish(self):
        """Stop (after one last pass over what is on disk) and return {path: sha256} of the streamed files."""
        self.stop_event.set()
        self.join(60)
        for st in self.state.values():
            if "fd" in st:
                os.close(st.pop("fd"))
        return dict(self.digests)


# ------------------------------------------------------------------ manifests from the hubs
def verify_files(staging, manifest, paths, workers, streamed=None):
    """Hash the given paths; returns ({path: digest or 'size-only'}, [bad paths], counts).
    streamed: {path: sha256} computed while downloading (StreamHasher); a mismatch there is re-hashed in full."""
    by_path = dict((m["path"], m) for m in manifest)
    counts = {"sha256": 0, "git_sha1": 0, "size": 0}
    streamed = streamed or {}

    def one(rel):
        entry = by_path[rel]
        full = os.path.join(staging, rel)
        if os.path.getsize(full) != entry["size"]:
            return rel, None, False
        kind = W.digest_kind(entry)
        if kind is None:
            return rel, "size-only", True
        if kind == "sha256" and rel in streamed:
            ok, _exp = W.verify_digest(entry, streamed[rel])
            if ok:
                return rel, streamed[rel], True
        digest = W.hash_file(full, kind)
        ok, _exp = W.verify_digest(entry, digest)
        return rel, digest, ok

    good, bad = {}, []
    with ThreadPoolExecutor(max_workers=max(1, min(workers, (os.cpu_count() or 2)))) as pool:
        for rel, digest, ok in pool.map(one, paths):
            if ok:
                good[rel] = digest
                kind = W.digest_kind(by_path[rel]) or "size"
                counts[kind] += 1
            else:
                bad.append(rel)
    return good, bad, counts


def structural_check(root, manifest, kind="model"):
    present = dict((k, v[0]) for k, v in listing(root).items())
    index_path = os.path.join(root, W.INDEX_NAME)
    index_text = None
    if os.path.isfile(index_path):
        with open(index_path) as f:
            index_text = f.read()
    report = W.completeness(manifest, present, index_text, kind)
    problems = list(report["problems"])
    for rel in sorted(present):
        if rel.endswith(".safetensors"):
            full = os.path.join(root, rel)
            with open(full, "rb") as f:
                head = f.read(8)
                if len(head) == 8:
                    import struct
                    (hlen,) = struct.unpack("<Q", head)
                    head += f.read(min(hlen, 100 << 20))
            why = W.check_safetensors_header(head, present[rel])
            if why:
                problems.append("%s: %s" % (rel, why))
    return problems
