"""Start the test-bed hubs as subprocesses: olah (real Hugging Face mirror, offline), the local ModelScope
server, and an optional throttling proxy. Used by pytest fixtures, the P3 benchmark and up.d/50-hub-mirrors.sh."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent


def _wait_port_file(path, proc, timeout=30.0):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError("server exited with %s" % proc.returncode)
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.1)
    raise RuntimeError("server did not report its port")


def _wait_http(url, proc, timeout=60.0):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError("server exited with %s" % proc.returncode)
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("no answer from %s" % url)


def free_port(host="127.0.0.1"):
    import socket
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, proc, url, workdir=None):
        self.proc, self.url, self.workdir = proc, url, workdir

    def bytes_sent(self):
        """Bytes a throttle proxy started with stats=True sent back to its clients so far."""
        import json
        try:
            return json.loads((Path(self.workdir) / "stats.json").read_text())["bytes_to_clients"]
        except (OSError, ValueError, KeyError):
            return 0

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def start_olah(mirrors_root, host="127.0.0.1", port=0, probe_repo=None, log=None):
    """olah offline, serving ROOT/models/<org>/<name> git repos. Returns Server (url http://host:port)."""
    work = Path(tempfile.mkdtemp(prefix="llmfleet-olah-"))
    port = port or free_port(host)
    (work / "olah.toml").write_text(
        '[basic]\nhost = "%s"\nport = %d\nmirrors-path = ["%s"]\nrepos-path = "%s"\nlog-path = "%s"\n'
        '[accessibility]\noffline = true\n' % (host, port, Path(mirrors_root).resolve(), work / "repos", work / "logs"))
    out = open(log or work / "olah.out", "ab")
    proc = subprocess.Popen([str(BIN / "olah-cli"), "-c", str(work / "olah.toml")], cwd=work, stdout=out,
                            stderr=subprocess.STDOUT, start_new_session=True)
    probe_host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    url = "http://%s:%d" % (probe_host, port)
    _wait_http(url + "/api/models/%s/revision/main" % (probe_repo or "none/none"), proc)
    return Server(proc, url, work)


def start_modelscope(mirrors_root, host="127.0.0.1", port=0, rate=None, log=None):
    work = Path(tempfile.mkdtemp(prefix="llmfleet-ms-"))
    cmd = [sys.executable, str(HERE / "modelscope_server.py"), "--root", str(mirrors_root), "--host", host,
           "--port", str(port), "--port-file", str(work / "port")]
    if rate:
        cmd += ["--rate", str(rate)]
    out = open(log or work / "ms.out", "ab")
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    bound = _wait_port_file(work / "port", proc)
    probe_host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    return Server(proc, "http://%s:%d" % (probe_host, bound), work)


def start_throttle(target_url, rate, shared=False, host="127.0.0.1", stats=False):
    """A proxy in front of target_url (http://host:port or rsync://host:port) limiting the bytes/s sent back
    (rate 0: unlimited). stats=True: Server.bytes_sent() reads the bytes it sent back so far."""
    work = Path(tempfile.mkdtemp(prefix="llmfleet-thr-"))
    scheme, target = target_url.split("://", 1)
    target = target.split("/", 1)[0]
    extra = (["--shared"] if shared else []) + (["--stats-file", str(work / "stats.json")] if stats else [])
    proc = subprocess.Popen([sys.executable, str(HERE / "throttle_proxy.py"), "--target", target, "--rate",
                             str(rate), "--host", host, "--port-file", str(work / "port")] + extra,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    port = _wait_port_file(work / "port", proc)
    probe_host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    srv = Server(proc, "%s://%s:%d" % (scheme, probe_host, port), work)
    srv.port = port
    return srv
