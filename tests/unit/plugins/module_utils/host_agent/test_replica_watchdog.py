"""roles/vllm_server/files/llmfleet-watchdog (llmfleet_host.replica_watchdog, installed as the role does): the
hang watchdog's decisions.

The replica is a TEST DOUBLE here (a small HTTP server that answers, hangs, or hangs while its token counters
move), and systemctl / docker are recorded instead of run, because the point is the decision: a completion
that does not come back while the engine produces no token counts, N in a row restart the replica (container
killed, unit restarted, reason + diagnosis in the journal, llmfleet_watchdog_* metrics); a saturated replica
whose counters move is never counted. The real engine (SIGSTOP of its engine core) is exercised by
tests/integration/test_watchdog.py.
"""
import http.server
import importlib
import json
import sys
import threading
import time

import pytest


def load(libexec, monkeypatch):
    """The watchdog module of the host package installed under libexec (a fresh import)."""
    for name in [n for n in sys.modules if n == "llmfleet_host" or n.startswith("llmfleet_host.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(libexec))
    return importlib.import_module("llmfleet_host.replica_watchdog")


class Replica(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.mode = "ok"
        self.tokens = 0.0
        self.auth = []


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.server.mode == "busy":
            self.server.tokens += 7
        body = ("vllm:prompt_tokens_total{model_name=\"tiny\"} %s\n"
                "vllm:generation_tokens_total{model_name=\"tiny\"} 3.0\n" % self.server.tokens).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.auth.append(self.headers.get("Authorization"))
        if self.server.mode in ("hang", "busy"):
            time.sleep(1.5)
            return
        body = json.dumps({"choices": [{"text": "!"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def setup(tmp_path, monkeypatch, host_install):
    replica = Replica()
    threading.Thread(target=replica.serve_forever, daemon=True).start()
    env_file = tmp_path / "vllm-0.env"
    env_file.write_text("HF_HUB_OFFLINE=1\nVLLM_API_KEY='s3cret key'\n")
    config = {"model": "tiny", "timeout": 1, "failures": 2, "textfile": str(tmp_path / "watchdog.prom"),
              "state": str(tmp_path / "state" / "watchdog.json"), "diagnose": False,
              "replicas": [{"name": "0", "url": "http://127.0.0.1:%d" % replica.server_address[1],
                            "unit": "llmfleet-vllm@0.service", "container": "llmfleet-vllm-0",
                            "env_file": str(env_file)}]}
    path = tmp_path / "watchdog.json"
    path.write_text(json.dumps(config))
    watchdog = load(host_install(tmp_path / "libexec"), monkeypatch)
    calls = []
    monkeypatch.setattr(watchdog, "unit_active", lambda unit: True)
    monkeypatch.setattr(watchdog, "run", lambda argv, limit=20000: calls.append(argv) or "")
    monkeypatch.setattr(watchdog.sys, "argv", ["llmfleet-watchdog", str(path)])
    yield watchdog, replica, calls, config
    replica.shutdown()


def metrics(config):
    with open(config["textfile"]) as fh:
        return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
                for line in fh if not line.startswith("#")}


def test_a_replica_that_answers_is_left_alone_and_gets_the_api_key(setup):
    watchdog, replica, calls, config = setup
    assert watchdog.main() == 0
    assert calls == []
    assert replica.auth == ["Bearer s3cret key"]
    m = metrics(config)
    assert m['llmfleet_watchdog_probe_success{replica="0"}'] == 1
    assert m['llmfleet_watchdog_consecutive_failures{replica="0"}'] == 0


def test_a_hung_replica_is_restarted_after_n_failures_in_a_row(setup, capsys):
    watchdog, replica, calls, config = setup
    replica.mode = "hang"
    watchdog.main()
    assert calls == []  # 1 of 2: counted, nothing done yet
    assert metrics(config)['llmfleet_watchdog_consecutive_failures{replica="0"}'] == 1
    watchdog.main()
    assert ["/usr/bin/docker", "kill", "llmfleet-vllm-0"] in calls
    assert ["systemctl", "restart", "--no-block", "llmfleet-vllm@0.service"] in calls
    out = capsys.readouterr().out
    assert "<3>replica 0 is hung" in out and "the engine produced no token meanwhile" in out
    m = metrics(config)
    assert m['llmfleet_watchdog_restarts_total{replica="0"}'] == 1
    assert m['llmfleet_watchdog_probe_success{replica="0"}'] == 0
    assert m['llmfleet_watchdog_consecutive_failures{replica="0"}'] == 0
    # It answers again: the count stays reset, the restart counter stays.
    replica.mode = "ok"
    watchdog.main()
    assert metrics(config)['llmfleet_watchdog_restarts_total{replica="0"}'] == 1


def test_a_saturated_replica_that_still_produces_tokens_is_not_counted(setup, capsys):
    watchdog, replica, calls, config = setup
    replica.mode = "busy"
    for _unused in range(3):
        watchdog.main()
    assert calls == []
    assert metrics(config)['llmfleet_watchdog_consecutive_failures{replica="0"}'] == 0
    assert "busy producing tokens: not counted" in capsys.readouterr().out


def test_a_replica_whose_unit_is_not_active_is_skipped(setup, monkeypatch):
    watchdog, replica, calls, config = setup
    replica.mode = "hang"
    monkeypatch.setattr(watchdog, "unit_active", lambda unit: False)
    for _unused in range(3):
        watchdog.main()
    assert calls == [] and replica.auth == []


def test_the_diagnosis_goes_to_the_journal_line_by_line(setup, capsys, tmp_path):
    watchdog, replica, calls, config = setup
    # The diagnosis comes from the installed package's own diagnose_evidence module, not the collection's.
    assert watchdog.diagnose_replica.__module__ == "llmfleet_host.diagnose_evidence"
    text = watchdog.diagnose({"name": "0", "unit": "llmfleet-vllm@0.service", "container": "llmfleet-vllm-0"},
                             "replica 0 is hung")
    assert isinstance(text, str) and "watchdog: replica 0 is hung" in text
    assert not text.startswith("[")
