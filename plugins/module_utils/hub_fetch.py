# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The work of llmfleet.vllm.model_fetch: place a verified model directory on a host.

fetch() is the whole job (the module only parses its options and reports): the manifest of the complete
directory from the hub (Hugging Face, ModelScope), a host directory or an archive; a plan against what an
interrupted run's staging directory and the old destination already hold; the space / disk preflight; the
download with the official client while a StreamHasher hashes files as they are written and Progress rewrites the
progress JSON; verification (sizes, sha256, git blob ids, safetensors headers, the index); the marker; and
place(), the atomic swap into the destination. The pure rules (manifests, plans, digests) are in weights.py.
Runs on the managed host, under the Python the hub clients are installed for.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import json
import os
import shutil
import sys
import tarfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.llmfleet.vllm.plugins.module_utils import peer_fetch
from ansible_collections.llmfleet.vllm.plugins.module_utils import weights as W


class FetchError(Exception):
    pass


def _set_client_env(endpoint):
    """Keep both SDKs quiet, offline-safe and pointed at one endpoint (must run before importing them)."""
    env = {
        "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1", "DO_NOT_TRACK": "1",
        "MODELSCOPE_DOWNLOAD_INTRA_CLOUD": "false",
    }
    for k, v in env.items():
        os.environ.setdefault(k, v)
    if endpoint:
        os.environ["HF_ENDPOINT"] = endpoint.rstrip("/")
        os.environ["MODELSCOPE_ENDPOINT"] = endpoint.rstrip("/")


class _StdoutToStderr:
    """Hub SDKs print; a module's stdout must carry only its JSON result."""

    def __enter__(self):
        sys.stdout.flush()
        self.saved = os.dup(1)
        os.dup2(2, 1)
        return self

    def __exit__(self, *exc):
        sys.stdout.flush()
        os.dup2(self.saved, 1)
        os.close(self.saved)


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


def _read_json(path, default):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def _write_json(path, data):
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
            _write_json(self.path, rec)
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
def hf_manifest(p):
    try:
        from huggingface_hub import HfApi
        from huggingface_hub.hf_api import RepoFile
    except ImportError as e:
        raise FetchError("huggingface_hub is not importable by %s (%s): install it there (the model_weights role "
                         "does, into /opt/llmfleet/venv) or run this module with that interpreter" % (sys.executable, e))
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError
    api = HfApi(endpoint=p["endpoint"], token=p["token"])
    revision = p["revision"] or "main"
    where = p["endpoint"] or "huggingface.co"
    entries = []
    # Before anything is written: a repository or revision the hub does not have is an input to fix.
    try:
        commit = revision if W.is_commit(revision) else api.model_info(p["repo_id"], revision=revision).sha
        for f in api.list_repo_tree(p["repo_id"], revision=commit, recursive=True):
            if not isinstance(f, RepoFile):
                continue
            entries.append({"path": f.path, "size": f.size, "blob_id": f.blob_id,
                            "lfs_sha256": f.lfs.sha256 if f.lfs else None})
    except RevisionNotFoundError:
        raise FetchError("revision %r of %s does not exist on %s: set revision (model_weights_revision) to a "
                         "branch, tag or commit of that repository, or leave it empty for main" % (
                             revision, p["repo_id"], where))
    except GatedRepoError:
        raise FetchError("%s on %s is gated: accept its terms on the hub with your account and give a token of "
                         "that account (model_weights_token)" % (p["repo_id"], where))
    except RepositoryNotFoundError:
        raise FetchError("%s at revision %r was not found on %s (or the token cannot read it): check repo_id "
                         "(model_weights_repo_id), revision (model_weights_revision) and, for a private repository, "
                         "token (model_weights_token)" % (p["repo_id"], revision, where))
    keep = set(W.filter_paths([e["path"] for e in entries], p["allow_patterns"], p["ignore_patterns"]))
    return commit, W.manifest_from_hf_tree([e for e in entries if e["path"] in keep and e["path"] != ".gitattributes"])


def ms_manifest(p):
    try:
        from modelscope_hub.api import HubApi
    except ImportError as e:
        raise FetchError("the modelscope SDK is not importable by %s (%s): install it there (the model_weights role "
                         "does, into /opt/llmfleet/venv) or run this module with that interpreter" % (sys.executable, e))
    api = HubApi(endpoint=p["endpoint"], token=p["token"]) if p["endpoint"] else HubApi(token=p["token"])
    files = [{"path": f.path, "size": f.size, "sha256": f.sha256, "type": f.type}
             for f in api.list_repo_files(p["repo_id"], "model", revision=p["revision"] or "master", recursive=True)]
    keep = set(W.filter_paths([f["path"] for f in files], p["allow_patterns"], p["ignore_patterns"]))
    return None, W.manifest_from_modelscope([f for f in files if f["path"] in keep and f["path"] != ".gitattributes"])


def hub_download(p, staging, paths):
    """Fetch exactly `paths` into staging with the official client (exact-match patterns)."""
    patterns = [W.exact_pattern(x) for x in paths]
    with _StdoutToStderr():
        if p["source"] == "hf":
            from huggingface_hub import snapshot_download
            snapshot_download(p["repo_id"], revision=p["_commit"], local_dir=staging, allow_patterns=patterns,
                              token=p["token"], endpoint=p["endpoint"], max_workers=p["max_workers"])
        else:
            from modelscope import snapshot_download
            kwargs = {"revision": p["revision"] or "master", "local_dir": staging, "allow_patterns": patterns,
                      "max_workers": p["max_workers"], "token": p["token"]}
            if p["endpoint"]:
                kwargs["endpoint"] = p["endpoint"]
            snapshot_download(p["repo_id"], **kwargs)


def local_copy(src, staging, paths):
    for rel in paths:
        dst = os.path.join(staging, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        tmp = dst + ".incomplete"
        shutil.copyfile(os.path.join(src, rel), tmp)
        os.replace(tmp, dst)


def extract_archive(archive, staging):
    with tarfile.open(archive) as tf:
        members = tf.getmembers()
        bad = [m.name for m in members
               if not W.safe_member(m.name, "file" if m.isfile() else "dir" if m.isdir() else "other")]
        if bad:
            raise FetchError("archive %s has members that may not be extracted (links, devices or paths leaving "
                             "the directory): %s" % (archive, ", ".join(bad[:5])))
        prefix = W.strip_archive_root([m.name.rstrip("/") for m in members])
        for m in members:
            if not m.isfile():
                continue
            rel = m.name[len(prefix):] if prefix else m.name
            dst = os.path.join(staging, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            src = tf.extractfile(m)
            with open(dst + ".incomplete", "wb") as out:
                shutil.copyfileobj(src, out, 8 << 20)
            os.replace(dst + ".incomplete", dst)


# ------------------------------------------------------------------ verification
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


def structural_check(root, manifest):
    present = dict((k, v[0]) for k, v in listing(root).items())
    index_path = os.path.join(root, W.INDEX_NAME)
    index_text = None
    if os.path.isfile(index_path):
        with open(index_path) as f:
            index_text = f.read()
    report = W.completeness(manifest, present, index_text)
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


def place(staging, dest, keep_previous=False):
    """Move staging into dest: a rename when dest is absent, else an atomic swap (renameat2 EXCHANGE) with
    a fallback to two renames; the old directory is removed afterwards, or, with keep_previous, kept as the one
    previous generation next to dest (.<name>.previous, replacing an older one), which the serve stage swaps back
    when the replicas cannot serve the new one. Files the new directory shares with the old (hard links of
    unchanged files) cost no space twice."""
    if not os.path.exists(dest):
        os.rename(staging, dest)
        return
    old = exchange_dirs(staging, dest)
    if keep_previous:
        previous = previous_generation(dest)
        if os.path.lexists(previous):
            shutil.rmtree(previous)
        os.rename(old, previous)
    else:
        shutil.rmtree(old)


def exchange_dirs(new, dest):
    """Put directory new in dest's place, atomically where the kernel can (renameat2 RENAME_EXCHANGE), else with
    two renames. Returns where dest's old directory is now (new's path after an exchange)."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = getattr(libc, "renameat2", None)
        if renameat2 is not None and renameat2(-100, new.encode(), -100, dest.encode(), 2) == 0:
            return new
    except (OSError, AttributeError):
        pass
    old = dest + ".old.%d" % os.getpid()
    os.rename(dest, old)
    os.rename(new, dest)
    return old


def previous_generation(dest):
    """Where place(keep_previous=True) keeps the directory that dest held before."""
    return os.path.join(os.path.dirname(dest), ".%s.previous" % os.path.basename(dest))


class _Warnings(list):
    """Collects warnings and hands each to a callback as well (the module's warn: shown in the play output)."""

    def __init__(self, warn=None):
        super(_Warnings, self).__init__()
        self.warn = warn

    def append(self, msg):
        super(_Warnings, self).append(msg)
        if self.warn is not None:
            self.warn(msg)


def _statvfs_free(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _placement_lock(path, dest, progress_file):
    """An exclusive lock (flock) on path, with this process's id in it, until _placement_unlock.

    A second writer into the same staging directory would corrupt it: a background fetch left running by an
    interrupted or failed play, or another ansible-playbook run on the same host. Raises FetchError naming the
    holder instead of waiting for it (its job may have no one following it any more). The holder removes the file
    when the directory is in place; a lock taken on a file removed meanwhile is taken again on the new one."""
    while True:
        handle = open(path, "a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (IOError, OSError) as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            handle.seek(0)
            holder = handle.read().strip()
            handle.close()
            raise FetchError("another model_fetch%s is placing %s now (a background fetch left by an interrupted or "
                             "failed run, or another ansible-playbook run on this host); nothing was changed. Let "
                             "it finish (its progress: %s) or stop it, then run again."
                             % (" (pid %s)" % holder if holder.isdigit() else "", dest, progress_file))
        try:
            same = os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
        except OSError:
            same = False
        if same:
            break
        handle.close()
    handle.seek(0)
    handle.truncate()
    handle.write("%d\n" % os.getpid())
    handle.flush()
    return handle


def _placement_unlock(handle):
    """Remove the lock file (nothing is left next to the model directory), then release the lock."""
    try:
        os.unlink(handle.name)
    except OSError:
        pass
    handle.close()


def leftovers(staging, lock_path, progress_file):
    """What an interrupted or refused placement left next to the model directory: the staging directory, the lock
    file, the progress file (those that exist). A progress file alone that says "done" is a finished placement's,
    which model_fetch_wait reads last and the role then removes: not a leftover."""
    found = [path for path in (staging, lock_path) if os.path.lexists(path)]
    doc = _read_json(progress_file, {}) if os.path.lexists(progress_file) else None
    if doc is not None and (found or not isinstance(doc, dict) or doc.get("phase") != "done"):
        found.append(progress_file)
    return found


def _remove_leftovers(staging, progress_file):
    if os.path.isdir(staging) and not os.path.islink(staging):
        shutil.rmtree(staging)
    elif os.path.lexists(staging):
        os.unlink(staging)
    if os.path.lexists(progress_file):
        os.unlink(progress_file)


def fetch(params, check_mode=False, warn=None):
    """Place the verified model directory params["dest"] describes (model_fetch's options, defaults applied).

    Returns (msg, result): result holds model_fetch's RETURN values and "changed". Raises FetchError on anything
    the user must fix (the message says what), other exceptions on hub or OS errors. warn(msg) is called for each
    warning. With check_mode nothing on the host changes.

    A run that fails after taking the placement lock removes the lock file (its staging directory and progress file
    stay, for the next run to resume from); a run that finds the model directory complete removes what an
    interrupted or refused placement left next to it (result "leftovers_removed").
    """
    held = {}
    try:
        return _fetch(params, check_mode, warn, held)
    except BaseException:
        if held.get("lock") is not None:
            _placement_unlock(held.pop("lock"))
        raise


def _fetch(params, check_mode, warn, held):
    p = dict(params)
    result = {"changed": False, "revision": p["revision"], "commit": None, "files_total": 0, "bytes_total": 0,
              "leftovers_removed": [],
              "files_to_fetch": [], "bytes_to_fetch": 0, "bytes_fetched": 0, "files_reused": [], "refetched": [],
              "partial_bytes_discarded": 0, "verified": {"sha256": 0, "git_sha1": 0, "size": 0},
              "free_bytes": 0, "needed_bytes": 0, "rotational": None, "seconds": 0.0, "throughput_bps": 0}
    warnings = _Warnings(warn)
    dest = os.path.normpath(p["dest"])
    if not os.path.isabs(dest) or dest == "/":
        raise FetchError("dest must be an absolute directory path other than /, got %r" % p["dest"])
    src = p["source"]
    if src in ("hf", "modelscope") and not p["repo_id"]:
        raise FetchError("source=%s needs repo_id (owner/name)" % src)
    if src == "local" and not p["local_path"]:
        raise FetchError("source=local needs local_path (a directory on the host)")
    if src == "archive" and not p["archive_path"]:
        raise FetchError("source=archive needs archive_path (a tar archive on the host)")
    parent, name = os.path.dirname(dest), os.path.basename(dest)
    staging = os.path.normpath(p["staging_dir"] or os.path.join(parent, ".%s.partial" % name))
    progress_file = p["progress_file"] or os.path.join(parent, ".%s.progress.json" % name)
    result["staging_dir"], result["progress_file"], result["path"] = staging, progress_file, dest
    warn = W.revision_warning(p["revision"], p["environment"], src)
    if warn:
        warnings.append(warn)
    _set_client_env(p["endpoint"])

    if not os.path.isdir(parent):
        if check_mode:
            probe = parent
            while not os.path.isdir(probe):
                probe = os.path.dirname(probe)
        else:
            os.makedirs(parent, mode=0o755)
    probe = parent if os.path.isdir(parent) else probe
    if os.path.isdir(os.path.dirname(staging)) and os.stat(os.path.dirname(staging)).st_dev != os.stat(probe).st_dev:
        raise FetchError("staging_dir %s is not on the same filesystem as %s: the final rename would copy"
                         % (staging, dest))

    # 1. What the complete directory is (the manifest).
    in_place = False
    if src in ("hf", "modelscope"):
        with _StdoutToStderr():
            commit, manifest = hf_manifest(p) if src == "hf" else ms_manifest(p)
        p["_commit"] = commit
        result["commit"] = commit
        result["revision"] = p["revision"] or ("main" if src == "hf" else "master")
    elif src == "local":
        local = os.path.normpath(p["local_path"])
        if not os.path.isdir(local):
            raise FetchError("local_path %s is not a directory on the host" % local)
        in_place = local == staging
        marker = _read_json(os.path.join(local, W.MARKER_NAME), None)
        manifest = (marker or {}).get("files") or W.manifest_from_listing(
            dict((k, v[0]) for k, v in listing(local).items()))
    else:
        if not os.path.isfile(p["archive_path"]):
            raise FetchError("archive_path %s is not a file on the host" % p["archive_path"])
        manifest = None  # known once extracted
    if manifest is not None and not manifest:
        raise FetchError("nothing to fetch: the repository lists no files matching allow_patterns %s / "
                         "ignore_patterns %s" % (p["allow_patterns"], p["ignore_patterns"]))

    identity = {"source": src, "repo_id": p["repo_id"], "revision": result["revision"], "commit": result["commit"],
                "allow_patterns": p["allow_patterns"], "ignore_patterns": p["ignore_patterns"]}
    if src == "local":
        identity["origin"] = p["origin"] or os.path.normpath(p["local_path"])
    elif src == "archive":
        ast = os.stat(p["archive_path"])
        identity["origin"] = p["origin"] or "%s:%d:%d" % (os.path.normpath(p["archive_path"]), ast.st_size,
                                                          int(ast.st_mtime))

    # 2. An existing dest that already is this model: nothing to do.
    dest_marker = _read_json(os.path.join(dest, W.MARKER_NAME), None) if os.path.isdir(dest) else None
    dest_files = dict((k, v[0]) for k, v in listing(dest).items()) if os.path.isdir(dest) else {}
    if manifest is None and dest_marker and dest_marker.get("identity") == identity:
        manifest = dest_marker.get("files")  # the same archive was placed before: check dest against it
    if manifest is not None and dest_marker and dest_marker.get("identity") == identity:
        report = W.completeness(manifest, dest_files)
        bad = []
        if report["ok"] and p["verify_existing"]:
            _good, bad, counts = verify_files(dest, manifest, [m["path"] for m in manifest], p["max_workers"])
            result["verified"] = counts
        if report["ok"] and not bad:
            result.update(files_total=len(manifest), bytes_total=W.manifest_bytes(manifest))
            lock_path = os.path.join(parent, ".%s.lock" % name)
            left = leftovers(staging, lock_path, progress_file)
            result["leftovers_removed"] = left
            if not left:
                return "%s is complete and verified" % dest, result
            result["changed"] = True
            if check_mode:
                return ("%s is complete and verified; would remove what an interrupted or refused placement left next "
                        "to it: %s" % (dest, ", ".join(left))), result
            # One writer at a time: a placement still running (its lock held) is refused, not cleaned away.
            held["lock"] = _placement_lock(lock_path, dest, progress_file)
            _remove_leftovers(staging, progress_file)
            _placement_unlock(held.pop("lock"))
            return ("%s is complete and verified; removed what an interrupted or refused placement left next to it: "
                    "%s" % (dest, ", ".join(left))), result
        result["refetched"] = sorted(bad + report["missing"] + [m["path"] for m in report["size_mismatch"]])

    # 3. Plan against what staging (an interrupted run) and the old dest already hold.
    stage_list = listing(staging)
    verified = _read_json(os.path.join(staging, W.VERIFIED_NAME), {})
    if src == "archive":
        manifest = None  # rebuilt from the extracted archive below
    if manifest is not None:
        plan = W.fetch_plan(manifest, stage_list, verified)
        # Files of an old dest with the right size are candidates too (hard links: no copy, no download).
        reuse_dest = [x for x in plan["fetch"] if dest_files.get(x) == next(m["size"] for m in manifest if m["path"] == x)]
        if in_place:
            reuse_dest = []
        plan_fetch = [x for x in plan["fetch"] if x not in reuse_dest]
        sizes = dict((m["path"], m["size"]) for m in manifest)
        result.update(files_total=len(manifest), bytes_total=plan["total_bytes"], files_to_fetch=plan_fetch,
                      bytes_to_fetch=sum(sizes[x] for x in plan_fetch))
    else:
        plan, reuse_dest, plan_fetch, sizes = None, [], [], {}
        result["bytes_to_fetch"] = os.path.getsize(p["archive_path"])  # upper bound before extraction
    if src == "local" and in_place:
        result["files_to_fetch"], result["bytes_to_fetch"] = [], 0

    # 4. Preflight: space and disk kind.
    probe_dir = staging if os.path.isdir(staging) else probe
    free = _statvfs_free(probe_dir)
    # An archive's extracted size is taken as its own size: safetensors barely compress.
    fetch_bytes = result["bytes_to_fetch"]
    ok, needed, why = W.space_check(fetch_bytes, free, p["space_margin"])
    result["free_bytes"], result["needed_bytes"] = free, needed
    st = os.stat(probe_dir)
    result["rotational"] = W.rotational_for_device(os.major(st.st_dev), os.minor(st.st_dev))
    if result["rotational"]:
        msg = ("%s is on a rotational disk: loading %s from it will be slow (vLLM reads every shard at start); "
               "put model_weights_dir on an SSD/NVMe" % (dest, W.human_bytes(result["bytes_total"])))
        if p["require_ssd"]:
            raise FetchError(msg + " (model_weights_require_ssd is true)")
        warnings.append(msg)
    if not ok:
        raise FetchError(why)
    if check_mode:
        result["changed"] = bool(plan_fetch or reuse_dest or (plan and plan["verify"]) or src == "archive"
                                 or result["refetched"] or not dest_marker)
        return "would fetch %d files (%s) into %s" % (
            len(plan_fetch), W.human_bytes(result["bytes_to_fetch"]), dest), result

    # 5. Assemble in staging, one writer at a time (a failed run's lock goes with its process).
    held["lock"] = _placement_lock(os.path.join(parent, ".%s.lock" % name), dest, progress_file)
    os.makedirs(staging, exist_ok=True)
    for f in incomplete_files(os.path.join(staging, ".cache")):
        result["partial_bytes_discarded"] += os.path.getsize(f)
        os.unlink(f)
    if src == "archive":
        extract_archive(p["archive_path"], staging)
        manifest = W.manifest_from_listing(dict((k, v[0]) for k, v in listing(staging).items()))
        plan = W.fetch_plan(manifest, listing(staging), {})
        sizes = dict((m["path"], m["size"]) for m in manifest)
        result.update(files_total=len(manifest), bytes_total=plan["total_bytes"], files_to_fetch=[],
                      bytes_to_fetch=0)
    for rel in reuse_dest:
        target = os.path.join(staging, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.lexists(target):
            os.unlink(target)
        os.link(os.path.join(dest, rel), target)
    verified_now = dict((k, v) for k, v in verified.items() if k in plan["keep"])
    result["files_reused"] = sorted(plan["keep"] + plan["verify"] + reuse_dest)

    # Verify what is already there first (a corrupt leftover is deleted and joins the fetch list).
    to_verify = sorted(set(plan["verify"] + reuse_dest))
    good, bad, counts = verify_files(staging, manifest, to_verify, p["max_workers"])
    for k in counts:
        result["verified"][k] += counts[k]
    for rel in bad:
        os.unlink(os.path.join(staging, rel))
    result["refetched"] = sorted(set(result["refetched"] + bad))
    result["files_reused"] = sorted(set(result["files_reused"]) - set(bad))
    fetch = sorted(set(plan_fetch + bad))
    result["files_to_fetch"], result["bytes_to_fetch"] = fetch, sum(sizes[x] for x in fetch)
    if src == "local" and in_place and fetch:
        raise FetchError("%s is incomplete or damaged: %s" % (staging, ", ".join(fetch[:10])))

    def record(good_map):
        for rel, digest in good_map.items():
            st = os.stat(os.path.join(staging, rel))
            verified_now[rel] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "digest": digest}
        _write_json(os.path.join(staging, W.VERIFIED_NAME), verified_now)

    record(good)
    base_done = sum(sizes[m["path"]] for m in manifest if m["path"] not in fetch)
    prog = Progress(progress_file, staging, manifest, fetch, base_done)
    prog.extra = {"files_to_fetch": len(fetch), "dest": dest}
    prog.write("downloading" if fetch else "verifying")
    prog.start()
    t0 = time.time()
    fetched_bytes = 0
    try:
        attempt = 0
        while fetch:
            attempt += 1
            streamer = StreamHasher(staging, [m for m in manifest if m["path"] in fetch])
            streamer.start()
            try:
                if src in ("hf", "modelscope") and attempt == 1 and p.get("peers"):
                    # Peers of the fleet first (rsync over the LAN); what they cannot deliver, or deliver
                    # wrong, goes to the hub on the next attempt. Verified below against the hub's manifest.
                    result["peer_transfer"] = peer_fetch.pull(
                        p["peers"], staging, dict((x, sizes[x]) for x in fetch), p.get("peer_timeout") or 30,
                        min(10, p.get("peer_timeout") or 30), p.get("peer_bwlimit_kib") or 0)
                elif src in ("hf", "modelscope"):
                    hub_download(p, staging, fetch)
                elif src == "local":
                    local_copy(os.path.normpath(p["local_path"]), staging, fetch)
            finally:
                streamed = streamer.finish()
            fetched_bytes += sum(sizes[x] for x in fetch if os.path.exists(os.path.join(staging, x)))
            prog.phase = "verifying"
            good, bad, counts = verify_files(staging, manifest, [x for x in fetch if os.path.exists(
                os.path.join(staging, x))], p["max_workers"], streamed)
            result["streamed_hashes"] = result.get("streamed_hashes", 0) + len(streamed)
            for k in counts:
                result["verified"][k] += counts[k]
            record(good)
            missing = [x for x in fetch if x not in good and x not in bad]
            for rel in bad:
                os.unlink(os.path.join(staging, rel))
            if not bad and not missing:
                break
            if attempt >= 3:
                raise FetchError("verification failed after %d attempts: %s (the hub serves bytes that do not "
                                 "match its own metadata; check the mirror)" % (attempt, ", ".join((bad + missing)[:10])))
            result["refetched"] = sorted(set(result["refetched"] + bad + missing))
            fetch = sorted(bad + missing)
            prog.to_fetch = fetch
            prog.phase = "downloading"
    finally:
        seconds = time.time() - t0
    if result.get("peer_transfer"):  # what the peers left to the hub was not refetched after a failed check
        result["refetched"] = sorted(set(result["refetched"]) - set(result["peer_transfer"]["left"]))
    result["seconds"] = round(seconds, 2)
    result["bytes_fetched"] = fetched_bytes
    result["throughput_bps"] = int(fetched_bytes / seconds) if seconds > 0 else 0

    # 6. The whole directory, structurally, then the marker, then into place.
    problems = structural_check(staging, manifest)
    if problems:
        prog.stop("failed")
        raise FetchError("the model directory is not usable: " + "; ".join(problems[:10]))
    for junk in W.CLIENT_BOOKKEEPING:
        path = os.path.join(staging, junk)
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.unlink(path)
    for f in incomplete_files(staging) + part_files(staging, [m["path"] for m in manifest]):
        os.unlink(f)
    _write_json(os.path.join(staging, W.MARKER_NAME), {
        "identity": identity, "files": manifest, "verified_at": time.time(),
        "digests": dict((k, v["digest"]) for k, v in verified_now.items())})
    os.unlink(os.path.join(staging, W.VERIFIED_NAME))
    place(staging, dest, keep_previous=bool(p.get("keep_previous")))
    _placement_unlock(held.pop("lock"))
    prog.staging = dest
    rec = prog.stop("done")
    result["changed"] = True
    result["progress"] = rec
    return "%s placed and verified (%d files, %s)" % (dest, len(manifest), W.human_bytes(result["bytes_total"])), result
