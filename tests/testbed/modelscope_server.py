#!/usr/bin/env python
"""A local ModelScope hub for tests: exactly the endpoints the modelscope SDK (1.40) calls to download.

No ModelScope mirror package exists, so this small server stands in for modelscope.cn (a test
double for a public hub that cannot be reached here). It serves the SAME repositories as olah:
``ROOT/models/<owner>/<name>`` plain git repos whose LFS files are pointer files with objects under
``.git/lfs/objects`` (see hub_repo.py). Endpoints, as the SDK calls them (shared/TESTBED.md):

  GET /api/v1/models/{owner}/{name}/repo/files?Revision=R&Recursive=True
        -> {"Code":200,"Success":true,"Data":{"Files":[{"Path","Name","Type":"blob"|"tree","Size","Sha256",...}]}}
  GET /api/v1/models/{owner}/{name}/repo?Revision=R&FilePath=P
        -> the file's bytes; honours ``Range: bytes=a-`` / ``a-b`` with 206 + Content-Range (the SDK resumes so)
  GET /api/v1/repos/internalAccelerationInfo -> 404 (region probe; any error is fine for the SDK)
  GET /api/v1/models/{owner}/{name}[/revisions] -> model/revision info (answered for completeness)

Test hooks (not part of the real API): ``--rate BYTES_PER_S`` throttles file bodies so a test can
kill a download midway; ``GET /__stats`` returns {"file_requests": {path: n}, "bytes_sent": {path: n}}
so a test can prove a finished file was not fetched twice; ``POST /__reset`` clears them.
Unknown repo -> 404 {"Code":10010205001,"Message":"model not found"}; unknown file -> 404.

Usage: modelscope_server.py --root ROOT [--host 127.0.0.1] [--port 0] [--rate N] [--port-file F]
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

_POINTER = re.compile(rb"^version https://git-lfs.github.com/spec/v1\noid sha256:([0-9a-f]{64})\nsize (\d+)\n?$")


class Repo:
    """Read a revision of a git repo with LFS pointer files (via the git CLI)."""

    def __init__(self, path: Path):
        self.path = path

    def _git(self, *args: str) -> bytes:
        return subprocess.run(["git", "-C", str(self.path), *args], check=True, capture_output=True).stdout

    def commit(self, rev: str) -> str | None:
        try:
            return self._git("rev-parse", "--verify", "-q", f"{rev}^{{commit}}").decode().strip()
        except subprocess.CalledProcessError:
            return None

    def files(self, commit: str) -> list[dict]:
        out = []
        for line in self._git("ls-tree", "-r", "-l", "-z", commit).split(b"\0"):
            if not line:
                continue
            meta, path = line.split(b"\t", 1)
            _mode, _type, blob, size = meta.split()
            path_s = path.decode()
            entry = {"path": path_s, "blob": blob.decode(), "size": int(size), "lfs": None}
            if int(size) < 200:
                m = _POINTER.match(self._git("cat-file", "blob", blob.decode()))
                if m:
                    entry["lfs"] = m.group(1).decode()
                    entry["size"] = int(m.group(2))
            out.append(entry)
        return out

    def open_file(self, commit: str, path: str):
        """Return (size, sha256-or-None, reader(start, end) -> iterator of bytes) or None."""
        entry = next((e for e in self.files(commit) if e["path"] == path), None)
        if entry is None:
            return None
        if entry["lfs"]:
            oid = entry["lfs"]
            obj = self.path / ".git" / "lfs" / "objects" / oid[:2] / oid[2:4] / oid
            if not obj.is_file():
                return None

            def read(start: int, end: int):
                with open(obj, "rb") as f:
                    f.seek(start)
                    left = end - start
                    while left > 0:
                        chunk = f.read(min(left, 256 << 10))
                        if not chunk:
                            return
                        left -= len(chunk)
                        yield chunk
            return entry["size"], oid, read
        data = self._git("cat-file", "blob", entry["blob"])
        return len(data), None, lambda start, end: iter([data[start:end]])


class State:
    def __init__(self, root: Path, rate: float | None):
        self.root, self.rate = root, rate
        self.lock = threading.Lock()
        self.file_requests: dict[str, int] = {}
        self.bytes_sent: dict[str, int] = {}
        self._sha_cache: dict[tuple[str, str], str] = {}

    def repo(self, owner: str, name: str) -> Repo | None:
        p = self.root / "models" / owner / name
        return Repo(p) if (p / ".git").is_dir() else None

    def sha256_of(self, repo: Repo, commit: str, entry: dict) -> str:
        if entry["lfs"]:
            return entry["lfs"]
        key = (commit, entry["path"])
        if key not in self._sha_cache:
            import hashlib
            self._sha_cache[key] = hashlib.sha256(repo._git("cat-file", "blob", entry["blob"])).hexdigest()
        return self._sha_cache[key]


class Handler(BaseHTTPRequestHandler):
    server_version = "llmfleet-modelscope-testbed/1"
    protocol_version = "HTTP/1.1"
    state: State

    def log_message(self, fmt, *args):  # quiet; tests read /__stats instead
        pass

    def _json(self, code: int, body) -> None:
        raw = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _not_found(self, msg: str) -> None:
        self._json(404, {"Code": 10010205001, "Success": False, "Message": msg, "RequestId": "testbed"})

    def do_POST(self):  # noqa: N802
        if self.path == "/__reset":
            with self.state.lock:
                self.state.file_requests.clear()
                self.state.bytes_sent.clear()
            return self._json(200, {"ok": True})
        return self._not_found("no such endpoint")

    def do_HEAD(self):  # noqa: N802
        self.do_GET(head=True)

    def do_GET(self, head: bool = False):  # noqa: N802
        url = urlparse(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        parts = [unquote(p) for p in url.path.strip("/").split("/")]
        if url.path == "/__stats":
            with self.state.lock:
                return self._json(200, {"file_requests": self.state.file_requests,
                                        "bytes_sent": self.state.bytes_sent})
        if parts[:3] == ["api", "v1", "repos"]:
            return self._not_found("not an intra-cloud region")
        if len(parts) < 5 or parts[:3] != ["api", "v1", "models"]:
            return self._not_found("no such endpoint")
        owner, name, rest = parts[3], parts[4], parts[5:]
        repo = self.state.repo(owner, name)
        if repo is None:
            return self._not_found(f"model {owner}/{name} not found")
        rev = q.get("Revision") or "master"
        commit = repo.commit(rev) or (repo.commit("main") if rev == "master" else None)
        if commit is None:
            return self._json(404, {"Code": 10010205001, "Success": False,
                                    "Message": f"revision {rev} not found", "RequestId": "testbed"})
        if rest == []:
            return self._json(200, {"Code": 200, "Success": True, "Data": {
                "Name": name, "Path": owner, "Revision": rev, "ModelType": [], "Id": 1}})
        if rest == ["revisions"]:
            return self._json(200, {"Code": 200, "Success": True, "Data": {"RevisionMap": {
                "Branches": [{"Revision": "main", "CommitId": repo.commit("main")}],
                "Tags": [{"Revision": "v1", "CommitId": repo.commit("v1")}]}}})
        if rest == ["repo", "files"]:
            files, dirs = [], set()
            for e in repo.files(commit):
                p = Path(e["path"])
                for parent in list(p.parents)[:-1]:
                    dirs.add(parent.as_posix())
                files.append({"Path": e["path"], "Name": p.name, "Type": "blob", "Size": e["size"],
                              "Sha256": self.state.sha256_of(repo, commit, e), "IsLFS": bool(e["lfs"]),
                              "Revision": commit, "CommitId": commit, "Mode": "100644"})
            if q.get("Recursive", "False").lower() != "true":
                files = [f for f in files if "/" not in f["Path"]]
            for d in sorted(dirs):
                files.append({"Path": d, "Name": Path(d).name, "Type": "tree", "Size": 0, "Sha256": "",
                              "IsLFS": False, "Revision": commit})
            return self._json(200, {"Code": 200, "Success": True, "Data": {"Files": files}})
        if rest == ["repo"] and "FilePath" in q:
            return self._send_file(repo, commit, q["FilePath"], head)
        return self._not_found("no such endpoint")

    def _send_file(self, repo: Repo, commit: str, path: str, head: bool) -> None:
        found = repo.open_file(commit, path)
        if found is None:
            return self._not_found(f"file {path} not found")
        size, sha, read = found
        start, end, status = 0, size, 200
        rng = self.headers.get("Range")
        m = re.match(r"bytes=(\d+)-(\d*)$", rng or "")
        if m:
            start = int(m.group(1))
            end = min(size, int(m.group(2)) + 1) if m.group(2) else size
            if start >= size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        with self.state.lock:
            self.state.file_requests[path] = self.state.file_requests.get(path, 0) + 1
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start))
        self.send_header("Accept-Ranges", "bytes")
        if sha:
            self.send_header("X-Linked-ETag", sha)
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.end_headers()
        if head:
            return
        sent, t0 = 0, time.monotonic()
        try:
            for chunk in read(start, end):
                if self.state.rate:
                    # Throttle in 64 KiB steps so a test can stop a transfer midway.
                    for i in range(0, len(chunk), 64 << 10):
                        piece = chunk[i:i + (64 << 10)]
                        self.wfile.write(piece)
                        sent += len(piece)
                        delay = sent / self.state.rate - (time.monotonic() - t0)
                        if delay > 0:
                            time.sleep(delay)
                else:
                    self.wfile.write(chunk)
                    sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with self.state.lock:
                self.state.bytes_sent[path] = self.state.bytes_sent.get(path, 0) + sent


def serve(root: Path, host: str = "127.0.0.1", port: int = 0, rate: float | None = None) -> ThreadingHTTPServer:
    handler = type("BoundHandler", (Handler,), {"state": State(root, rate)})
    httpd = ThreadingHTTPServer((host, port), handler)
    httpd.daemon_threads = True
    return httpd


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Local ModelScope hub for tests")
    ap.add_argument("--root", type=Path, required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--rate", type=float, default=None, help="throttle file bodies to N bytes/s")
    ap.add_argument("--port-file", type=Path, help="write the bound port here once listening")
    args = ap.parse_args(argv)
    httpd = serve(args.root, args.host, args.port, args.rate)
    port = httpd.server_address[1]
    if args.port_file:
        args.port_file.write_text(f"{port}\n")
    print(f"modelscope test hub on http://{args.host}:{port} serving {args.root}", flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
