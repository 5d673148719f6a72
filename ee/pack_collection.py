#!/usr/bin/env python
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pack an installed collection (a directory with MANIFEST.json and FILES.json, as the `ansible`
bundle installs community.docker and community.general) into a tarball `ansible-galaxy collection
install` accepts, so an execution environment gets them without Galaxy.

    python3 ee/pack_collection.py SRC_DIR OUT.tar.gz

The bundle leaves out files its FILES.json still lists (CI configuration, tests): the artifact lists
what is there, each file with its sha256 recomputed, and MANIFEST.json the new FILES.json's sha256.
Members are added in name order with fixed times, so the same input gives the same bytes.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import sys
import tarfile
from pathlib import Path


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def files_manifest(src: Path, listed: list[dict]) -> list[dict]:
    """FILES.json entries for what exists under src, in the listed order, checksums from the content."""
    out = []
    for entry in listed:
        name = entry["name"]
        path = src / name if name != "." else src
        if not path.exists() and not path.is_symlink():
            continue
        item = dict(entry)
        if entry["ftype"] == "file":
            item["chksum_type"] = "sha256"
            item["chksum_sha256"] = sha256(path.read_bytes())
        out.append(item)
    return out


def pack(src: Path, out: Path) -> None:
    manifest = json.loads((src / "MANIFEST.json").read_text(encoding="utf-8"))
    files = json.loads((src / "FILES.json").read_text(encoding="utf-8"))
    files["files"] = files_manifest(src, files["files"])
    files_bytes = json.dumps(files, indent=4).encode()
    manifest["file_manifest_file"]["chksum_sha256"] = sha256(files_bytes)
    manifest_bytes = json.dumps(manifest, indent=4).encode()

    def add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = len(data), 0o644, 0
        tar.addfile(info, io.BytesIO(data))

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        add_bytes(tar, "MANIFEST.json", manifest_bytes)
        add_bytes(tar, "FILES.json", files_bytes)
        for entry in files["files"]:
            if entry["name"] == ".":
                continue
            path = src / entry["name"]
            info = tar.gettarinfo(str(path), arcname=entry["name"])
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if info.isfile():
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)
    with out.open("wb") as handle, gzip.GzipFile(filename="", fileobj=handle, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n", maxsplit=2)[1])
    pack(Path(sys.argv[1]), Path(sys.argv[2]))
