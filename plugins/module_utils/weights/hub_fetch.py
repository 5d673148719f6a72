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
place(), the atomic swap into the destination. The staging directory's machinery (listing, Progress, StreamHasher,
verify_files, structural_check) is in fetch_staging.py, the placement (place, the lock, leftovers) in
fetch_place.py, the hub clients and the other sources (manifests, downloads, copies) in hub_clients.py; this
module keeps the steps of fetch(). The pure rules (manifests, plans, digests) are in weights.py.
Runs on the managed host, under the Python the hub clients are installed for.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type
import os
import shutil
import time

from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import peer_fetch
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights.hub_clients import (
    extract_archive,
    hf_manifest,
    hub_download,
    local_copy,
    ms_manifest,
    set_client_env,
    StdoutToStderr,
)
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import weights as W
# The staging directory and the placement, re-exported: their names were this module's before the split.
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights.fetch_place import (  # noqa: F401 pylint: disable=unused-import
    FetchError,
    exchange_dirs,
    leftovers,
    place,
    placement_lock,
    placement_unlock,
    previous_generation,
    remove_leftovers,
    statvfs_free,
)
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights.fetch_staging import (  # noqa: F401 pylint: disable=unused-import
    Progress,
    StreamHasher,
    incomplete_files,
    listing,
    part_files,
    read_json,
    structural_check,
    verify_files,
    write_json,
)


# ------------------------------------------------------------------ verification
class _Warnings(list):
    """Collects warnings and hands each to a callback as well (the module's warn: shown in the play output)."""

    def __init__(self, warn=None):
        super(_Warnings, self).__init__()
        self.warn = warn

    def append(self, msg):
        super(_Warnings, self).append(msg)
        if self.warn is not None:
            self.warn(msg)


def fetch(params, check_mode=False, warn=None):
    """Place the verified model directory params["dest"] describes (model_fetch's options, defaults applied).

    Returns (msg, result): result holds model_fetch's RETURN values and "changed". Raises FetchError on anything
    the user must fix (the message says what), other exceptions on hub or OS errors. warn(msg) is called for each
    warning. With check_mode nothing on the host changes.

    A run that fails after taking the placement lock removes the lock file (its staging directory and progress file
    stay, for the next run to resume from); a run that finds the model directory complete removes what an
    interrupted or refused placement left next to it (result "leftovers_removed").
    """
    run = _Placement(params, check_mode, warn)
    try:
        return run.go()
    except BaseException:
        if run.lock is not None:
            placement_unlock(run.lock)
            run.lock = None
        raise


def _new_result(revision):
    return {"changed": False, "revision": revision, "commit": None, "files_total": 0, "bytes_total": 0,
            "leftovers_removed": [],
            "files_to_fetch": [], "bytes_to_fetch": 0, "bytes_fetched": 0, "files_reused": [], "refetched": [],
            "partial_bytes_discarded": 0, "verified": {"sha256": 0, "git_sha1": 0, "size": 0},
            "free_bytes": 0, "needed_bytes": 0, "rotational": None, "seconds": 0.0, "throughput_bps": 0}


def _checked_dest(p):
    """The normalised dest, once the options a source needs are there (FetchError naming the missing one)."""
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
    return dest


class _Placement(object):
    """One run of fetch(): the steps below share the options (p), the result and the placement lock."""

    def __init__(self, params, check_mode, warn):
        self.p = dict(params)
        self.check_mode = check_mode
        self.lock = None
        self.result = _new_result(self.p["revision"])
        self.warnings = _Warnings(warn)
        self.dest = _checked_dest(self.p)
        self.src = self.p["source"]
        self.parent, self.name = os.path.dirname(self.dest), os.path.basename(self.dest)
        self.staging = os.path.normpath(self.p["staging_dir"] or os.path.join(self.parent, ".%s.partial" % self.name))
        self.progress_file = self.p["progress_file"] or os.path.join(self.parent, ".%s.progress.json" % self.name)
        self.lock_path = os.path.join(self.parent, ".%s.lock" % self.name)
        self.result["staging_dir"], self.result["progress_file"] = self.staging, self.progress_file
        self.result["path"] = self.dest
        self.verified_now = {}

    def go(self):
        warning = W.revision_warning(self.p["revision"], self.p["environment"], self.src)
        if warning:
            self.warnings.append(warning)
        set_client_env(self.p["endpoint"])
        probe = self._parent_probe()
        # 1. What the complete directory is (the manifest).
        manifest, in_place = self._manifest()
        identity = self._identity()
        # 2. An existing dest that already is this model: nothing to do.
        done, manifest, dest_marker, dest_files = self._already_placed(manifest, identity)
        if done:
            return done
        # 3. Plan against what staging (an interrupted run) and the old dest already hold.
        plan, reuse_dest, plan_fetch, sizes, verified = self._plan(manifest, dest_files, in_place)
        # 4. Preflight: space and disk kind.
        self._space_and_disk(probe)
        if self.check_mode:
            self.result["changed"] = bool(plan_fetch or reuse_dest or (plan and plan["verify"]) or self.src == "archive"
                                          or self.result["refetched"] or not dest_marker)
            return "would fetch %d files (%s) into %s" % (
                len(plan_fetch), W.human_bytes(self.result["bytes_to_fetch"]), self.dest), self.result
        # 5. Assemble in staging, one writer at a time (a failed run's lock goes with its process).
        self.lock = placement_lock(self.lock_path, self.dest, self.progress_file)
        manifest, plan, sizes, fetch, good = self._stage(manifest, plan, sizes, verified, reuse_dest, plan_fetch)
        if self.src == "local" and in_place and fetch:
            raise FetchError("%s is incomplete or damaged: %s" % (self.staging, ", ".join(fetch[:10])))
        self._record(good)
        prog = self._transfer(manifest, sizes, fetch)
        # 6. The whole directory, structurally, then the marker, then into place.
        return self._finish(manifest, identity, prog)

    def _parent_probe(self):
        """An existing directory at or above dest's parent (created unless check_mode); staging on its filesystem."""
        probe = None
        if not os.path.isdir(self.parent):
            if self.check_mode:
                probe = self.parent
                while not os.path.isdir(probe):
                    probe = os.path.dirname(probe)
            else:
                os.makedirs(self.parent, mode=0o755)
        probe = self.parent if os.path.isdir(self.parent) else probe
        staging_parent = os.path.dirname(self.staging)
        if os.path.isdir(staging_parent) and os.stat(staging_parent).st_dev != os.stat(probe).st_dev:
            raise FetchError("staging_dir %s is not on the same filesystem as %s: the final rename would copy"
                             % (self.staging, self.dest))
        return probe

    def _manifest(self):
        """(manifest, in_place): the files of the complete directory (None for an archive, known once extracted);
        in_place: a local source that is the staging directory itself."""
        p, src, in_place = self.p, self.src, False
        if src in ("hf", "modelscope"):
            with StdoutToStderr():
                commit, manifest = hf_manifest(p) if src == "hf" else ms_manifest(p)
            p["_commit"] = commit
            self.result["commit"] = commit
            self.result["revision"] = p["revision"] or ("main" if src == "hf" else "master")
        elif src == "local":
            local = os.path.normpath(p["local_path"])
            if not os.path.isdir(local):
                raise FetchError("local_path %s is not a directory on the host" % local)
            in_place = local == self.staging
            marker = read_json(os.path.join(local, W.MARKER_NAME), None)
            manifest = (marker or {}).get("files") or W.manifest_from_listing(
                dict((k, v[0]) for k, v in listing(local).items()))
        else:
            if not os.path.isfile(p["archive_path"]):
                raise FetchError("archive_path %s is not a file on the host" % p["archive_path"])
            manifest = None  # known once extracted
        if manifest is not None and not manifest:
            raise FetchError("nothing to fetch: the repository lists no files matching allow_patterns %s / "
                             "ignore_patterns %s" % (p["allow_patterns"], p["ignore_patterns"]))
        return manifest, in_place

    def _identity(self):
        """What the marker records as this directory's origin: an existing dest with the same is this model."""
        p, src = self.p, self.src
        identity = {"source": src, "repo_id": p["repo_id"], "revision": self.result["revision"],
                    "commit": self.result["commit"], "allow_patterns": p["allow_patterns"],
                    "ignore_patterns": p["ignore_patterns"]}
        if src == "local":
            identity["origin"] = p["origin"] or os.path.normpath(p["local_path"])
        elif src == "archive":
            ast = os.stat(p["archive_path"])
            identity["origin"] = p["origin"] or "%s:%d:%d" % (os.path.normpath(p["archive_path"]), ast.st_size,
                                                              int(ast.st_mtime))
        return identity

    def _already_placed(self, manifest, identity):
        """(done, manifest, dest_marker, dest_files): done is fetch()'s answer when dest already is this model
        (leftovers of an interrupted placement removed), else None and result["refetched"] says what is bad."""
        dest, result = self.dest, self.result
        dest_marker = read_json(os.path.join(dest, W.MARKER_NAME), None) if os.path.isdir(dest) else None
        dest_files = dict((k, v[0]) for k, v in listing(dest).items()) if os.path.isdir(dest) else {}
        same = bool(dest_marker) and dest_marker.get("identity") == identity
        if manifest is None and same:
            manifest = dest_marker.get("files")  # the same archive was placed before: check dest against it
        if manifest is None or not same:
            return None, manifest, dest_marker, dest_files
        report = W.completeness(manifest, dest_files, kind=self.p.get("kind") or "model")
        bad = []
        if report["ok"] and self.p["verify_existing"]:
            _good, bad, counts = verify_files(dest, manifest, [m["path"] for m in manifest], self.p["max_workers"])
            result["verified"] = counts
        if not (report["ok"] and not bad):
            result["refetched"] = sorted(bad + report["missing"] + [m["path"] for m in report["size_mismatch"]])
            return None, manifest, dest_marker, dest_files
        result.update(files_total=len(manifest), bytes_total=W.manifest_bytes(manifest))
        left = leftovers(self.staging, self.lock_path, self.progress_file)
        result["leftovers_removed"] = left
        if not left:
            return ("%s is complete and verified" % dest, result), manifest, dest_marker, dest_files
        result["changed"] = True
        if self.check_mode:
            return (("%s is complete and verified; would remove what an interrupted or refused placement left next "
                     "to it: %s" % (dest, ", ".join(left))), result), manifest, dest_marker, dest_files
        # One writer at a time: a placement still running (its lock held) is refused, not cleaned away.
        self.lock = placement_lock(self.lock_path, dest, self.progress_file)
        remove_leftovers(self.staging, self.progress_file)
        placement_unlock(self.lock)
        self.lock = None
        return (("%s is complete and verified; removed what an interrupted or refused placement left next to it: "
                 "%s" % (dest, ", ".join(left))), result), manifest, dest_marker, dest_files

    def _plan(self, manifest, dest_files, in_place):
        """(plan, reuse_dest, plan_fetch, sizes, verified): what to keep, verify, hard-link from dest and fetch."""
        result = self.result
        verified = read_json(os.path.join(self.staging, W.VERIFIED_NAME), {})
        if self.src == "archive":
            manifest = None  # rebuilt from the extracted archive below
        if manifest is not None:
            plan = W.fetch_plan(manifest, listing(self.staging), verified)
            sizes = dict((m["path"], m["size"]) for m in manifest)
            # Files of an old dest with the right size are candidates too (hard links: no copy, no download).
            reuse_dest = [] if in_place else [x for x in plan["fetch"] if dest_files.get(x) == sizes[x]]
            plan_fetch = [x for x in plan["fetch"] if x not in reuse_dest]
            result.update(files_total=len(manifest), bytes_total=plan["total_bytes"], files_to_fetch=plan_fetch,
                          bytes_to_fetch=sum(sizes[x] for x in plan_fetch))
        else:
            plan, reuse_dest, plan_fetch, sizes = None, [], [], {}
            result["bytes_to_fetch"] = os.path.getsize(self.p["archive_path"])  # upper bound before extraction
        if self.src == "local" and in_place:
            result["files_to_fetch"], result["bytes_to_fetch"] = [], 0
        return plan, reuse_dest, plan_fetch, sizes, verified

    def _space_and_disk(self, probe):
        """Refuse a fetch the filesystem has no room for; warn (or refuse, require_ssd) on a rotational disk."""
        result = self.result
        probe_dir = self.staging if os.path.isdir(self.staging) else probe
        free = statvfs_free(probe_dir)
        # An archive's extracted size is taken as its own size: safetensors barely compress.
        ok, needed, why = W.space_check(result["bytes_to_fetch"], free, self.p["space_margin"])
        result["free_bytes"], result["needed_bytes"] = free, needed
        st = os.stat(probe_dir)
        result["rotational"] = W.rotational_for_device(os.major(st.st_dev), os.minor(st.st_dev))
        if result["rotational"]:
            msg = ("%s is on a rotational disk: loading %s from it will be slow (vLLM reads every shard at start); "
                   "put model_weights_dir on an SSD/NVMe" % (self.dest, W.human_bytes(result["bytes_total"])))
            if self.p["require_ssd"]:
                raise FetchError(msg + " (model_weights_require_ssd is true)")
            self.warnings.append(msg)
        if not ok:
            raise FetchError(why)

    def _record(self, good_map):
        """Remember verified files (size, mtime, digest) in staging: an interrupted run does not hash them again."""
        for rel, digest in good_map.items():
            st = os.stat(os.path.join(self.staging, rel))
            self.verified_now[rel] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "digest": digest}
        write_json(os.path.join(self.staging, W.VERIFIED_NAME), self.verified_now)

    def _stage(self, manifest, plan, sizes, verified, reuse_dest, plan_fetch):
        """Staging made ready: half-written files dropped, an archive extracted, dest's files hard-linked, what is
        there verified (a corrupt file deleted and fetched). Returns (manifest, plan, sizes, the files to fetch, the
        files verified good: {path: digest})."""
        staging, result = self.staging, self.result
        os.makedirs(staging, exist_ok=True)
        for f in incomplete_files(os.path.join(staging, ".cache")):
            result["partial_bytes_discarded"] += os.path.getsize(f)
            os.unlink(f)
        if self.src == "archive":
            extract_archive(self.p["archive_path"], staging)
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
            os.link(os.path.join(self.dest, rel), target)
        self.verified_now = dict((k, v) for k, v in verified.items() if k in plan["keep"])
        result["files_reused"] = sorted(plan["keep"] + plan["verify"] + reuse_dest)
        # Verify what is already there first (a corrupt leftover is deleted and joins the fetch list).
        good, bad, counts = verify_files(staging, manifest, sorted(set(plan["verify"] + reuse_dest)),
                                         self.p["max_workers"])
        for k in counts:
            result["verified"][k] += counts[k]
        for rel in bad:
            os.unlink(os.path.join(staging, rel))
        result["refetched"] = sorted(set(result["refetched"] + bad))
        result["files_reused"] = sorted(set(result["files_reused"]) - set(bad))
        fetch = sorted(set(plan_fetch + bad))
        result["files_to_fetch"], result["bytes_to_fetch"] = fetch, sum(sizes[x] for x in fetch)
        return manifest, plan, sizes, fetch, good

    def _download(self, fetch, sizes, attempt):
        """One transfer of the files of fetch into staging: the fleet's peers first, then the hub, or a host copy."""
        p, src = self.p, self.src
        if src in ("hf", "modelscope") and attempt == 1 and p.get("peers"):
            # Peers of the fleet first (rsync over the LAN); what they cannot deliver, or deliver
            # wrong, goes to the hub on the next attempt. Verified below against the hub's manifest.
            self.result["peer_transfer"] = peer_fetch.pull(
                p["peers"], self.staging, dict((x, sizes[x]) for x in fetch), p.get("peer_timeout") or 30,
                min(10, p.get("peer_timeout") or 30), p.get("peer_bwlimit_kib") or 0)
        elif src in ("hf", "modelscope"):
            hub_download(p, self.staging, fetch)
        elif src == "local":
            local_copy(os.path.normpath(p["local_path"]), self.staging, fetch)

    def _transfer(self, manifest, sizes, fetch):
        """Fetch and verify until every file is good (three attempts), with the progress file kept current.
        Returns the Progress thread (still running)."""
        staging, result = self.staging, self.result
        base_done = sum(sizes[m["path"]] for m in manifest if m["path"] not in fetch)
        prog = Progress(self.progress_file, staging, manifest, fetch, base_done)
        prog.extra = {"files_to_fetch": len(fetch), "dest": self.dest}
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
                    self._download(fetch, sizes, attempt)
                finally:
                    streamed = streamer.finish()
                fetched_bytes += sum(sizes[x] for x in fetch if os.path.exists(os.path.join(staging, x)))
                prog.phase = "verifying"
                good, bad, counts = verify_files(staging, manifest, [x for x in fetch if os.path.exists(
                    os.path.join(staging, x))], self.p["max_workers"], streamed)
                result["streamed_hashes"] = result.get("streamed_hashes", 0) + len(streamed)
                for k in counts:
                    result["verified"][k] += counts[k]
                self._record(good)
                missing = [x for x in fetch if x not in good and x not in bad]
                for rel in bad:
                    os.unlink(os.path.join(staging, rel))
                if not bad and not missing:
                    break
                if attempt >= 3:
                    raise FetchError("verification failed after %d attempts: %s (the hub serves bytes that do not "
                                     "match its own metadata; check the mirror)"
                                     % (attempt, ", ".join((bad + missing)[:10])))
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
        return prog

    def _finish(self, manifest, identity, prog):
        """The whole directory checked, the clients' bookkeeping removed, the marker written, then into place."""
        staging, result = self.staging, self.result
        problems = structural_check(staging, manifest, self.p.get("kind") or "model")
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
        write_json(os.path.join(staging, W.MARKER_NAME), {
            "identity": identity, "files": manifest, "verified_at": time.time(),
            "digests": dict((k, v["digest"]) for k, v in self.verified_now.items())})
        os.unlink(os.path.join(staging, W.VERIFIED_NAME))
        place(staging, self.dest, keep_previous=bool(self.p.get("keep_previous")))
        placement_unlock(self.lock)
        self.lock = None
        prog.staging = self.dest
        rec = prog.stop("done")
        result["changed"] = True
        result["progress"] = rec
        return "%s placed and verified (%d files, %s)" % (self.dest, len(manifest),
                                                          W.human_bytes(result["bytes_total"])), result
