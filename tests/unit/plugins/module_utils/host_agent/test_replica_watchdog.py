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
        self.models = []
        self.paths = []


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
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        self.server.models.append(body.get("model"))
        self.server.paths.append(self.path)
        self.server.auth.append(self.headers.get("Authorization"))
        if self.server.mode in ("hang", "busy"):
            time.sleep(1.5)
            return
        # An embedding engine pools its input (vLLM's /pooling), a generative one completes it.
        answer = {"data": [{"data": [0.1, 0.2]}]} if self.path == "/pooling" else {"choices": [{"text": "!"}]}
        if self.server.mode == "pooling-only" and self.path != "/pooling":
            self.send_error(400)
            return
        body = json.dumps(answer).encode()
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
    monkeypatch.setattr(watchdog, "unit_state", lambda unit: "active")
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
    assert replica.models == ["tiny"]  # a host of one model: the config's model
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
    monkeypatch.setattr(watchdog, "unit_state", lambda unit: "inactive")
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


def many_models(setup, tmp_path, gpus):
    """The setup's config as a host of several models writes it: three replicas of two models (one test double
    behind all three URLs), each with its model and GPUs."""
    watchdog, replica, calls, config = setup
    first = config["replicas"][0]
    config["replicas"] = [dict(first, name=name, model=model, gpus=gpu, unit="llmfleet-vllm@%s.service" % name,
                               container="llmfleet-vllm-%s" % name)
                          for (name, model), gpu in zip([("chat-0", "chat"), ("embed-0", "embed"), ("chat-1", "chat")], gpus)]
    (tmp_path / "watchdog.json").write_text(json.dumps(config))
    return watchdog, replica, calls, config


def restarted(calls):
    return [argv[-1] for argv in calls if argv[:2] == ["systemctl", "restart"]]


def test_each_replica_is_probed_with_its_own_model_and_its_metrics_name_it(setup, tmp_path):
    watchdog, replica, calls, config = many_models(setup, tmp_path, [[0], [0], [1]])
    watchdog.main()
    assert sorted(replica.models) == ["chat", "chat", "embed"]
    assert metrics(config)['llmfleet_watchdog_probe_success{replica="embed-0",model="embed"}'] == 1


def test_two_hung_replicas_of_one_gpu_are_restarted_one_run_after_the_other(setup, tmp_path, monkeypatch, capsys):
    watchdog, replica, calls, config = many_models(setup, tmp_path, [[0], [0], [1]])
    replica.mode = "hang"
    watchdog.main()
    watchdog.main()
    # chat-0 and embed-0 share GPU 0: only the first restarts; chat-1 (GPU 1) restarts beside it.
    assert restarted(calls) == ["llmfleet-vllm@chat-0.service", "llmfleet-vllm@chat-1.service"]
    assert ["/usr/bin/docker", "kill", "llmfleet-vllm-embed-0"] not in calls
    assert "replica embed-0 is hung but shares a GPU with replica chat-0" in capsys.readouterr().out
    # Next run: chat-0 is still starting (its unit activating): embed-0 keeps waiting.
    calls.clear()
    monkeypatch.setattr(watchdog, "unit_state", lambda unit: "activating" if "chat" in unit else "active")
    watchdog.main()
    assert restarted(calls) == []
    # chat-0 is up again: embed-0, still hung, is restarted now.
    monkeypatch.setattr(watchdog, "unit_state", lambda unit: "active")
    watchdog.main()
    assert restarted(calls) == ["llmfleet-vllm@embed-0.service"]
    assert metrics(config)['llmfleet_watchdog_restarts_total{replica="embed-0",model="embed"}'] == 1


def test_replicas_without_gpus_restart_together(setup, tmp_path):
    watchdog, replica, calls, config = many_models(setup, tmp_path, [[], [], []])
    replica.mode = "hang"
    watchdog.main()
    watchdog.main()
    assert len(restarted(calls)) == 3


def test_restart_turns_allow_one_start_per_gpu():
    from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent.replica_watchdog import restart_turns
    replicas = [{"name": "a", "gpus": [0, 1]}, {"name": "b", "gpus": [1]}, {"name": "c", "gpus": [2]},
                {"name": "d", "gpus": [2]}, {"name": "e", "gpus": [3]}]
    # a spans GPUs 0-1, so b (GPU 1) waits; d waits for c, which is still starting; e's GPU is free.
    assert restart_turns(["a", "b", "d", "e"], replicas, {"c": {"state": "activating"}}) == (
        ["a", "e"], {"b": "a", "d": "c"})
    assert restart_turns([], replicas, {}) == ([], {})


def test_a_pooling_model_is_probed_by_pooling_its_input_not_by_a_completion(setup, tmp_path):
    watchdog, replica, calls, config = many_models(setup, tmp_path, [[0], [1], [2]])
    config["replicas"][1]["runner"] = "pooling"
    (tmp_path / "watchdog.json").write_text(json.dumps(config))
    # The engine double refuses completions (as an embedding model does): only a wrong probe would fail.
    replica.mode = "pooling-only"
    for _unused in range(3):
        watchdog.main()
    assert "/pooling" in replica.paths
    m = metrics(config)
    assert m['llmfleet_watchdog_probe_success{replica="embed-0",model="embed"}'] == 1
    assert m['llmfleet_watchdog_probe_success{replica="chat-0",model="chat"}'] == 0
    assert restarted(calls) == ["llmfleet-vllm@chat-0.service", "llmfleet-vllm@chat-1.service"]
