# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure helpers for placing model weights: what a complete model directory is, what to fetch,
how to verify it, whether it fits, and how to describe progress.

Nothing here talks to a hub or changes a file; the only reads are the optional ``sysfs_root``
look-ups of :func:`rotational_for_device` and :func:`hash_file`. model_fetch (the module) calls these.
"""
from __future__ import absolute_import, division, print_function

import fnmatch
import hashlib
import json
import os
import posixpath
import re
import struct

__metaclass__ = type

MARKER_NAME = ".llmfleet-weights.json"
VERIFIED_NAME = ".llmfleet-verified.json"
INDEX_NAME = "model.safetensors.index.json"
CONFIG_NAME = "config.json"
# A PEFT (LoRA) adapter directory: its configuration, beside adapter_model.safetensors (or .bin); no tokenizer needed.
ADAPTER_CONFIG_NAME = "adapter_config.json"
# Bookkeeping the hub clients leave inside a download directory; never part of the model.
CLIENT_BOOKKEEPING = (".cache", "._____temp", ".msc", ".mv", ".mdl")
# Any one of these sets makes a usable tokenizer (fast tokenizer, sentencepiece, BPE vocab+merges, tiktoken).
TOKENIZER_ALTERNATIVES = (
    ("tokenizer.json",),
    ("tokenizer.model",),
    ("vocab.json", "merges.txt"),
    ("qwen.tiktoken",),
)
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
# ModelScope downloads a big file as parallel range parts named <target>_<start>_<end>.
PART_SUFFIX_RE = re.compile(r"^_\d+_\d+$")


# ---------------------------------------------------------------- revisions and patterns
def is_commit(revision):
    """True when revision is a full 40-hex git commit (immutable), not a branch or tag."""
    return bool(revision) and bool(COMMIT_RE.match(revision))


def revision_warning(revision, environment, source):
    """A warning string when a moving revision (branch/tag/default) is used in prod, else None."""
    if source not in ("hf", "modelscope") or environment != "prod" or is_commit(revision):
        return None
    shown = revision or "the hub's default branch"
    return ("revision '%s' is not a 40-hex commit: in prod pin model_weights_revision to a commit so every "
            "host serves the same bytes (a branch can move between runs)." % shown)


def _norm_pattern(pattern):
    # Same rule as the hub clients: "dir/" means everything under dir.
    return pattern + "*" if pattern.endswith("/") else pattern


def filter_paths(paths, allow_patterns=None, ignore_patterns=None):
    """Keep paths matching any allow pattern (all when none) and no ignore pattern (fnmatch, like the SDKs)."""
    allow = [_norm_pattern(p) for p in (allow_patterns or [])]
    ignore = [_norm_pattern(p) for p in (ignore_patterns or [])]
    out = []
    for path in paths:
        if allow and not any(fnmatch.fnmatch(path, p) for p in allow):
            continue
        if any(fnmatch.fnmatch(path, p) for p in ignore):
            continue
        out.append(path)
    return out


def exact_pattern(path):
    """An fnmatch pattern that matches exactly this path (escapes * ? [)."""
    return re.sub(r"([*?\[])", r"[\1]", path)


def is_client_bookkeeping(relpath):
    first = relpath.split("/", 1)[0]
    return first in CLIENT_BOOKKEEPING or relpath in (MARKER_NAME, VERIFIED_NAME) or relpath.endswith(".incomplete")


# ---------------------------------------------------------------- manifests
def manifest_entry(path, size, sha256=None, git_sha1=None):
    """One expected file: relative posix path, size in bytes, and the digests the hub gave (or None)."""
    if sha256 is not None and not SHA256_RE.match(sha256.lower()):
        sha256 = None
    return {"path": path, "size": int(size), "sha256": sha256.lower() if sha256 else None,
            "git_sha1": git_sha1 or None}


def manifest_from_hf_tree(entries):
    """entries: dicts {path, size, lfs_sha256 or None, blob_id} from HfApi.list_repo_tree (files only)."""
    out = []
    for e in entries:
        lfs = e.get("lfs_sha256")
        out.append(manifest_entry(e["path"], e["size"], sha256=lfs,
                                  git_sha1=None if lfs else e.get("blob_id")))
    return sorted(out, key=lambda m: m["path"])


def manifest_from_modelscope(files):
    """files: dicts {path, size, sha256, type} from the ModelScope file listing; dirs are dropped."""
    return sorted((manifest_entry(f["path"], f["size"], sha256=f.get("sha256"))
                   for f in files if f.get("type", "blob") != "tree"), key=lambda m: m["path"])


def manifest_from_listing(present):
    """A size-only manifest for a local directory: present maps relpath -> size."""
    return [manifest_entry(p, s) for p, s in sorted(present.items()) if not is_client_bookkeeping(p)]


def manifest_bytes(manifest):
    return sum(m["size"] for m in manifest)


# ---------------------------------------------------------------- completeness
def parse_index(text):
    """Shard file names named by a model.safetensors.index.json text. Raises ValueError when malformed."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ValueError("%s is not valid JSON: %s" % (INDEX_NAME, e))
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise ValueError("%s has no weight_map: the checkpoint index is incomplete" % INDEX_NAME)
    shards = set()
    for tensor, shard in weight_map.items():
        if not isinstance(shard, str) or not shard or shard.startswith("/") or ".." in shard.split("/"):
            raise ValueError("%s maps %s to an invalid shard name %r" % (INDEX_NAME, tensor, shard))
        shards.add(shard)
    return sorted(shards)


def missing_tokenizer(paths):
    """None when some tokenizer alternative is complete in paths (a set of relpaths), else a message."""
    names = set(paths)
    for alt in TOKENIZER_ALTERNATIVES:
        if all(a in names for a in alt):
            return None
    return ("no tokenizer files: need one of " +
            ", ".join(" + ".join(a) for a in TOKENIZER_ALTERNATIVES) +
            " (vLLM fails at start-up without them; check allow_patterns/ignore_patterns)")


def completeness(manifest, present, index_text=None, kind="model"):
    """Check a directory listing against the expectation.

    manifest: expected entries (or None: only structural checks); present: relpath -> size on disk;
    index_text: content of model.safetensors.index.json when present; kind: model, or adapter (a PEFT adapter:
    adapter_config.json instead of config.json and a tokenizer).
    Returns {ok, problems: [str], missing: [path], size_mismatch: [{path, expected, actual}], shards: [path]}.
    """
    problems, missing, mismatch, shards = [], [], [], []
    names = set(present)
    if kind == "adapter":
        if ADAPTER_CONFIG_NAME not in names:
            problems.append("adapter_config.json is missing (a LoRA adapter directory has one)")
    elif CONFIG_NAME not in names:
        problems.append("config.json is missing")
    tok = missing_tokenizer(names) if kind != "adapter" else None
    if tok:
        problems.append(tok)
    if index_text is not None:
        try:
            shards = parse_index(index_text)
        except ValueError as e:
            problems.append(str(e))
        for shard in shards:
            if shard not in names:
                missing.append(shard)
                problems.append("shard %s named in %s is missing" % (shard, INDEX_NAME))
    elif not any(p.endswith(".safetensors") for p in names) and not any(p.endswith(".bin") for p in names):
        problems.append("no weights: neither %s nor any *.safetensors / *.bin file" % INDEX_NAME)
    for m in manifest or []:
        if m["path"] not in present:
            if m["path"] not in missing:
                missing.append(m["path"])
                problems.append("%s is missing" % m["path"])
        elif present[m["path"]] != m["size"]:
            mismatch.append({"path": m["path"], "expected": m["size"], "actual": present[m["path"]]})
            problems.append("%s has %d bytes, expected %d" % (m["path"], present[m["path"]], m["size"]))
    return {"ok": not problems, "problems": problems, "missing": sorted(missing),
            "size_mismatch": mismatch, "shards": shards}


def check_safetensors_header(head, file_size):
    """head: the first bytes of a .safetensors file (>= 8 + header length). None when sound, else a reason.

    A truncated or overwritten shard shows here without reading its tensors: the header's largest
    data offset plus the header itself must equal the file size.
    """
    if file_size < 8 or len(head) < 8:
        return "too small to be a safetensors file"
    (hlen,) = struct.unpack("<Q", head[:8])
    if hlen > 100 * 1024 * 1024 or 8 + hlen > file_size:
        return "header length %d does not fit the file (%d bytes)" % (hlen, file_size)
    if len(head) < 8 + hlen:
        return "need %d header bytes, got %d" % (8 + hlen, len(head))
    try:
        header = json.loads(head[8:8 + hlen].decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        return "header is not JSON: %s" % e
    end = 0
    for name, t in header.items():
        if name == "__metadata__":
            continue
        try:
            end = max(end, int(t["data_offsets"][1]))
        except (KeyError, TypeError, IndexError, ValueError):
            return "tensor %s has no data_offsets" % name
    if 8 + hlen + end != file_size:
        return "tensors end at byte %d but the file has %d (truncated or padded)" % (8 + hlen + end, file_size)
    return None


# ---------------------------------------------------------------- planning and verification
def fetch_plan(manifest, present, verified=None):
    """Decide per file: keep (verified before, same size), verify (present with the right size, not yet
    verified), fetch (absent or wrong size).

    verified: relpath -> {"size": n, "mtime_ns": t, "digest": hex} recorded by an earlier run, which
    counts only when size (and mtime_ns, when given in present as (size, mtime_ns)) still match.
    present: relpath -> size, or relpath -> (size, mtime_ns).
    """
    verified = verified or {}
    keep, verify, fetch = [], [], []
    for m in manifest:
        p = m["path"]
        info = present.get(p)
        size, mtime = (info if isinstance(info, tuple) else (info, None)) if info is not None else (None, None)
        if size is None or size != m["size"]:
            fetch.append(p)
            continue
        v = verified.get(p)
        if v and v.get("size") == size and (mtime is None or v.get("mtime_ns") == mtime) \
                and v.get("digest") in (m.get("sha256"), m.get("git_sha1"), "size-only"):
            keep.append(p)
        else:
            verify.append(p)
    sizes = dict((m["path"], m["size"]) for m in manifest)
    return {"keep": keep, "verify": verify, "fetch": fetch,
            "fetch_bytes": sum(sizes[p] for p in fetch),
            "total_bytes": sum(sizes.values())}


def digest_kind(entry):
    """Which digest verifies an entry: 'sha256' (LFS oid / ModelScope), 'git_sha1' (git blob id), or None."""
    if entry.get("sha256"):
        return "sha256"
    if entry.get("git_sha1"):
        return "git_sha1"
    return None


def hash_file(path, kind, block=8 << 20):
    """sha256 of the content, or git's blob id (sha1 of 'blob <len>\\0' + content)."""
    if kind == "sha256":
        h = hashlib.sha256()
    elif kind == "git_sha1":
        h = hashlib.sha1()
        h.update(b"blob %d\0" % os.path.getsize(path))
    else:
        raise ValueError("unknown digest kind %r" % kind)
    with open(path, "rb") as f:
        while True:
            chunk = f.read(block)
            if not chunk:
                break
            h.update(chunk)
    return h.hexdigest()


def verify_digest(entry, actual):
    """(ok, expected) for a computed digest against the manifest entry."""
    kind = digest_kind(entry)
    expected = entry.get(kind) if kind else None
    return (expected is None or expected == actual), expected


# ---------------------------------------------------------------- space and disks
def space_check(bytes_to_fetch, free_bytes, margin):
    """Refuse up front when free space is below bytes_to_fetch x margin. Returns (ok, needed, message)."""
    if margin < 1.0:
        raise ValueError("space margin must be >= 1.0, got %s" % margin)
    needed = int(bytes_to_fetch * margin)
    if free_bytes >= needed:
        return True, needed, None
    return False, needed, ("not enough free space: %s to fetch x margin %.2f = %s needed, %s free. Free space "
                           "on that filesystem, choose another model_weights_dir, or narrow allow_patterns."
                           % (human_bytes(bytes_to_fetch), margin, human_bytes(needed), human_bytes(free_bytes)))


def rotational_for_device(major, minor, sysfs_root="/sys"):
    """True (HDD), False (SSD/NVMe) or None (unknown: tmpfs, overlay, no block device) for st_dev.

    /sys/dev/block/MAJ:MIN points at the device (or a partition of it); a partition's own directory
    has no queue/, its parent's does. Device-mapper / md devices are rotational when any slave is.
    """
    if major == 0:
        return None  # anonymous devices: tmpfs, overlayfs, btrfs subvolumes...
    link = os.path.join(sysfs_root, "dev", "block", "%d:%d" % (major, minor))
    if not os.path.exists(link):
        return None
    dev = os.path.realpath(link)
    if os.path.exists(os.path.join(dev, "partition")):
        dev = os.path.dirname(dev)
    slaves_dir = os.path.join(dev, "slaves")
    if os.path.isdir(slaves_dir) and os.listdir(slaves_dir):
        answers = []
        for s in sorted(os.listdir(slaves_dir)):
            try:
                with open(os.path.join(slaves_dir, s, "dev")) as f:
                    ma, mi = f.read().strip().split(":")
            except (OSError, ValueError):
                continue
            answers.append(rotational_for_device(int(ma), int(mi), sysfs_root))
        if any(a is True for a in answers):
            return True
        if answers and all(a is False for a in answers):
            return False
    try:
        with open(os.path.join(dev, "queue", "rotational")) as f:
            return f.read().strip() == "1"
    except OSError:
        return None


# ---------------------------------------------------------------- archives
def safe_member(name, kind):
    """True for an archive member that may be extracted into the staging dir: a plain file or directory
    with a relative path that stays inside it (no absolute path, no '..', no links/devices)."""
    if kind not in ("file", "dir"):
        return False
    norm = posixpath.normpath(name)
    return not (name.startswith("/") or norm == ".." or norm.startswith("../") or "/../" in "/" + name + "/")


def archive_files(members, archive):
    """[(member, its path below the archive's one top directory, if it has one)] of the regular files among an
    archive's members (tarfile.TarInfo); ValueError naming the members that may not be extracted (safe_member)."""
    bad = [m.name for m in members
           if not safe_member(m.name, "file" if m.isfile() else "dir" if m.isdir() else "other")]
    if bad:
        raise ValueError("archive %s has members that may not be extracted (links, devices or paths leaving "
                         "the directory): %s" % (archive, ", ".join(bad[:5])))
    prefix = strip_archive_root([m.name.rstrip("/") for m in members])
    return [(m, m.name[len(prefix):] if prefix else m.name) for m in members if m.isfile()]


def strip_archive_root(names):
    """When every member sits under one top directory (model/...), that prefix, else ''."""
    tops = set(n.split("/", 1)[0] for n in names if n and n != ".")
    if len(tops) == 1:
        top = tops.pop()
        if all(n == top or n.startswith(top + "/") for n in names) and any(n.startswith(top + "/") for n in names):
            return top + "/"
    return ""


# ---------------------------------------------------------------- progress
def human_bytes(n):
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
        n /= 1024.0


def human_duration(seconds):
    if seconds is None:
        return "unknown"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return "%dh%02dm%02ds" % (h, m, s) if h else ("%dm%02ds" % (m, s) if m else "%ds" % s)


def progress(done, total, done_at_start, elapsed, phase="downloading"):
    """A progress record: bytes, percent, rate (this run's bytes / elapsed), ETA, and a one-line text."""
    done = max(0, int(done))
    total = max(0, int(total))
    moved = max(0, done - done_at_start)
    rate = moved / elapsed if elapsed > 0 else 0.0
    left = max(0, total - done)
    eta = (left / rate) if rate > 0 else (0.0 if left == 0 else None)
    pct = (100.0 * done / total) if total else 100.0
    line = "%s: %s / %s (%.1f%%) at %s/s, ETA %s" % (
        phase, human_bytes(done), human_bytes(total), pct, human_bytes(rate), human_duration(eta))
    return {"phase": phase, "bytes_done": done, "bytes_total": total, "percent": round(pct, 1),
            "rate_bps": int(rate), "eta_s": None if eta is None else int(round(eta)),
            "elapsed_s": round(elapsed, 1), "line": line}
