"""Provoke real failures on the vLLM CPU engine, then run playbooks/diagnose.yml and check its output.

Each case runs the test-bed image (the real vLLM engine, CPU build) with one bad configuration, as the
service would run it (container llmfleet-vllm-<replica>), waits until it fails (at most ~90 s), then
one run of the diagnose play (through ansible-runner, as a user would) must print the right diagnosis
first for every replica. The flag check module is run against the same image.

Needs: the image (LLMFLEET_TEST_VLLM_IMAGE, default llmfleet-testbed/vllm-cpu:latest) and the tiny
model (LLMFLEET_TEST_MODEL_DIR, default .cache/models/tiny-qwen3-moe) - both made by `make testbed`.
LLMFLEET_DIAG_CASE_TIMEOUT (default 90 s) bounds each case; LLMFLEET_DIAG_PARALLEL (default 2) cases run at once.
"""
import concurrent.futures
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import pytest

pytestmark = pytest.mark.integration

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# `make testbed` writes LLMFLEET_TEST_VLLM_IMAGE and LLMFLEET_TEST_MODEL_DIR into .cache/testbed.env.
IMAGE = os.environ.get("LLMFLEET_TEST_VLLM_IMAGE") or "llmfleet-testbed/vllm-cpu:latest"
MODEL_DIR = os.environ.get("LLMFLEET_TEST_MODEL_DIR") or os.path.join(ROOT, ".cache", "models", "tiny-qwen3-moe")
CASE_TIMEOUT = int(os.environ.get("LLMFLEET_DIAG_CASE_TIMEOUT", "90"))
PARALLEL = int(os.environ.get("LLMFLEET_DIAG_PARALLEL", "2"))
RUN_ID = uuid.uuid4().hex[:6]
sys.path.insert(0, os.path.join(ROOT, "collections"))  # ansible_collections.llmfleet.vllm = this checkout
# ansible-runner starts `ansible` / `ansible-playbook` from PATH: use the ones next to this interpreter.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
# Fast start-up on two CPU cores (TESTBED.md: healthy in 20-35 s).
BASE = {"--enforce-eager": None, "--distributed-executor-backend": "uni", "--kv-cache-memory-bytes": "64M",
        "--max-model-len": "512", "--served-model-name": "tiny"}


def flags(**override):
    """BASE with overrides (max_model_len="4096" -> --max-model-len 4096), each flag once."""
    merged = dict(BASE)
    merged.update({"--" + k.replace("_", "-"): v for k, v in override.items()})
    out = []
    for flag, value in merged.items():
        out += [flag] if value is None else [flag, value]
    return out


BASE_FLAGS = flags()
BASE_ENV = ["-e", "VLLM_ENABLE_V1_MULTIPROCESSING=0", "-e", "HF_HUB_OFFLINE=1"]


def _docker(*args, check=True, timeout=120):
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check, timeout=timeout)


def _have_image():
    return shutil.which("docker") and _docker("image", "inspect", IMAGE, check=False).returncode == 0


requires_testbed = pytest.mark.skipif(
    not (_have_image() and os.path.isfile(os.path.join(MODEL_DIR, "config.json"))),
    reason="vLLM CPU image %s or tiny model %s absent: run `make testbed` (the integration target builds both)"
           % (IMAGE, MODEL_DIR),
)


requires_image = pytest.mark.skipif(
    not _have_image(), reason="vLLM CPU image %s absent: run `make testbed` (the integration target builds it)" % IMAGE)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _copy_model(tmp_path_factory, name, drop=(), edit_config=None, source=MODEL_DIR):
    target = tmp_path_factory.mktemp(name) / "model"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(*drop) if drop else None)
    if edit_config:
        path = target / "config.json"
        config = json.loads(path.read_text())
        edit_config(config)
        path.write_text(json.dumps(config))
    os.chmod(target, 0o755)
    return str(target)


class Case:
    def __init__(self, name, expect, args, model=None, env=(), docker_opts=(), healthy=False, ask_model=None):
        self.name, self.expect, self.args = name, expect, list(args)
        self.model, self.env, self.docker_opts, self.healthy = model or MODEL_DIR, list(env), list(docker_opts), healthy
        self.replica = "diagt-%s-%s" % (name, RUN_ID)
        self.container = "llmfleet-vllm-" + self.replica
        self.port = None
        self.ask_model = ask_model  # once healthy, send one chat request naming this model
        self.body_404 = None
        self.waited = None

    def start(self):
        opts = ["run", "-d", "--name", self.container, "-v", "%s:/models/tiny:ro" % self.model] + BASE_ENV
        for item in self.env:
            opts += ["-e", item]
        if not any(o.startswith("--network") for o in self.docker_opts):
            self.port = _free_port()
            opts += ["-p", "127.0.0.1:%d:8000" % self.port]
        _docker(*(opts + self.docker_opts + [IMAGE] + self.args))

    def wait(self):
        """Until the container exits (failure cases) or answers /health (the healthy case)."""
        start = time.monotonic()
        while time.monotonic() - start < CASE_TIMEOUT:
            state = json.loads(_docker("inspect", "--format", "{{json .State}}", self.container).stdout)
            if not state["Running"]:
                break
            if self.healthy and self.port:
                try:
                    with urllib.request.urlopen("http://127.0.0.1:%d/health" % self.port, timeout=2) as r:
                        if r.status == 200:
                            break
                except (urllib.error.URLError, OSError):
                    pass
            time.sleep(2)
        else:
            _docker("stop", "-t", "1", self.container, check=False)  # bounded: the log so far is the evidence
        self.waited = time.monotonic() - start
        if self.healthy and self.port and self.ask_model:
            self.body_404 = _request_model(self.port, self.ask_model)
        return self

    def remove(self):
        _docker("rm", "-f", self.container, check=False)


def _request_model(port, model):
    req = urllib.request.Request(
        "http://127.0.0.1:%d/v1/chat/completions" % port,
        data=json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}],
                         "max_tokens": 4}).encode(),
        headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return "HTTP %d %s" % (r.status, r.read().decode())
    except urllib.error.HTTPError as err:
        return err.read().decode()
    except (urllib.error.URLError, OSError) as err:
        return "request failed: %s" % err


def _run_diagnose(replicas, extravars, tmp_path):
    import ansible_runner
    inventory = "localhost ansible_connection=local ansible_python_interpreter=%s" % sys.executable
    (tmp_path / "runner").mkdir()
    run = ansible_runner.run(
        private_data_dir=str(tmp_path / "runner"),
        playbook=os.path.join(ROOT, "playbooks", "diagnose.yml"),
        inventory=inventory,
        extravars=dict({"diagnose_hosts": "all", "diagnose_replicas": replicas, "llmfleet_accelerator": "cpu",
                        "diagnose_become": False}, **extravars),
        envvars={"ANSIBLE_COLLECTIONS_PATH": os.path.join(ROOT, "collections"),
                 "ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg")},
        quiet=True,
    )
    reports = {}
    for event in run.events:
        data = event.get("event_data", {})
        if event.get("event") == "runner_item_on_ok" and data.get("task", "").endswith(
                "Print the diagnosis of each replica"):
            report = data["res"]["msg"]
            replica = report[0].split(":", 1)[0]
            reports[replica] = report
    stdout = run.stdout.read()
    return run, reports, stdout


@requires_testbed
def test_provoked_failures_get_the_right_diagnosis_in_the_play_output(tmp_path_factory, tmp_path):
    holder = "llmfleet-vllm-diagt-portholder-" + RUN_ID
    # A private snapshot: the shared test-bed model may be regenerated while the cases run.
    model = _copy_model(tmp_path_factory, "base")
    cases = [
        Case("badpath", "model_path_missing", ["/models/tiny/does-not-exist"] + BASE_FLAGS, model=model),
        # With no tokenizer file at all vLLM 0.32 starts anyway (output is then garbage): only the model
        # directory check can say it, so this case waits for /health like a healthy one.
        Case("notokenizer", "tokenizer_missing", ["/models/tiny"] + BASE_FLAGS, healthy=True,
             model=_copy_model(tmp_path_factory, "notok", source=model,
                               drop=("tokenizer*", "vocab*", "merges*", "special_tokens_map.json"))),
        # tokenizer_config.json without tokenizer.json: the engine fails while loading the tokenizer.
        Case("halftokenizer", "tokenizer_missing", ["/models/tiny"] + BASE_FLAGS,
             model=_copy_model(tmp_path_factory, "halftok", source=model, drop=("tokenizer.json",))),
        Case("badarch", "architecture_unsupported", ["/models/tiny"] + BASE_FLAGS,
             model=_copy_model(tmp_path_factory, "badarch", source=model,
                               edit_config=lambda c: c.update(architectures=["LlmfleetImaginaryForCausalLM"]))),
        Case("portinuse", "port_in_use", ["/models/tiny"] + BASE_FLAGS, model=model,
             docker_opts=["--network", "container:" + holder]),
        Case("kvbudget", "kv_cache_too_small_for_max_model_len",
             # The tiny model needs 2 KiB of KV per token (4 layers x K,V x 2 heads x 64 x bf16): 4096 tokens
             # need 8 MiB, the budget is 1 MiB.
             ["/models/tiny"] + flags(max_model_len="4096", kv_cache_memory_bytes="1M"), model=model),
        Case("maxlen", "max_model_len_exceeds_model", ["/models/tiny"] + flags(max_model_len="100000000"),
             model=model),
        Case("badflag", "unrecognized_vllm_argument", ["/models/tiny"] + BASE_FLAGS + ["--enable-prefix-cachng"],
             model=model),
        Case("wrongname", "served_model_name_mismatch", ["/models/tiny"] + BASE_FLAGS, model=model,
             env=["VLLM_ENABLE_PREFIX_CACHING=1"], healthy=True, ask_model="qwen35-a3b"),
    ]
    if os.environ.get("LLMFLEET_DIAG_CASES"):  # e.g. "kvbudget,wrongname" while debugging one case
        wanted = set(os.environ["LLMFLEET_DIAG_CASES"].split(","))
        cases = [c for c in cases if c.name in wanted]
    try:
        # Something already listening on 8000 in the network namespace the vLLM container joins.
        _docker("run", "-d", "--name", holder, "--entrypoint", "python3", IMAGE, "-m", "http.server", "8000")
        # Two at a time: each engine start takes most of a CPU core for 10-30 s.
        with concurrent.futures.ThreadPoolExecutor(max_workers=PARALLEL) as pool:
            list(pool.map(lambda c: c.start() or c.wait(), cases))
        run, reports, stdout = _run_diagnose(
            [c.replica for c in cases],
            # The inventory's name: the wrong-name case is found from the engine's own 404 log line, after a
            # client asked for the seed's name (qwen35-a3b).
            {"diagnose_expected_served_model_name": "tiny"}, tmp_path)
        assert run.rc == 0, stdout[-3000:]
        failures = []
        for case in cases:
            report = reports.get(case.replica) or ["(no report for %s)" % case.replica]
            first = next((line for line in report if line.startswith("DIAGNOSIS 1/")), "")
            if "[%s]" % case.expect not in first:
                slow = " (stopped at the %d s bound: the engine had not got that far)" % CASE_TIMEOUT \
                    if case.waited >= CASE_TIMEOUT else ""
                failures.append("%s: expected %s first%s, got:\n  %s" % (case.name, case.expect, slow,
                                                                         "\n  ".join(report)))
        assert not failures, "\n\n".join(failures)
        gate_case = next((c for c in cases if not c.healthy), None)
        if gate_case:
            _check_health_gate_failure_path(gate_case, tmp_path)
        wrongname = next((c for c in cases if c.name == "wrongname"), None)
        if wrongname:
            # The real 404 body the engine returned names the model that does not exist; it classifies alone.
            assert "The model `qwen35-a3b` does not exist" in wrongname.body_404, wrongname.body_404
            from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent.diagnostics import classify
            body = classify(wrongname.body_404, {"served_model_name": "tiny"})
            assert body and body[0]["id"] == "served_model_name_mismatch" and "tiny" in body[0]["fix"]
            wrong_report = "\n".join(reports[wrongname.replica])
            assert "Use the served name in requests (tiny)" in wrong_report
            assert "[unknown_vllm_env_var]" in wrong_report and "--enable-prefix-caching" in wrong_report
    finally:
        for case in cases:
            case.remove()
        _docker("rm", "-f", holder, check=False)


def _check_health_gate_failure_path(case, tmp_path):
    """vllm_server's rescue (tasks/diagnose.yml) prints the classified diagnosis and fails with its id."""
    import ansible_runner
    private = tmp_path / "runner-gate"
    private.mkdir()
    (private / "project").mkdir()
    (private / "project" / "gate.yml").write_text(
        "- hosts: all\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.include_role:\n        name: llmfleet.vllm.vllm_server\n        tasks_from: diagnose\n")
    run = ansible_runner.run(
        private_data_dir=str(private), playbook="gate.yml",
        inventory="localhost ansible_connection=local ansible_python_interpreter=%s" % sys.executable,
        extravars={"vllm_server_replicas": [{"name": case.replica, "port": 8000, "gpus": []}],
                   "vllm_server_model_path": MODEL_DIR, "vllm_server_image": IMAGE,
                   "llmfleet_accelerator": "cpu", "llmfleet_served_model_name": "tiny"},
        envvars={"ANSIBLE_COLLECTIONS_PATH": os.path.join(ROOT, "collections"),
                 "ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg")},
        quiet=True)
    stdout = run.stdout.read()
    assert run.rc != 0, stdout[-2000:]
    failed = [e["event_data"]["res"]["msg"] for e in run.events if e.get("event") == "runner_on_failed"]
    assert failed and "Diagnosis: %s" % case.expect in failed[-1], stdout[-3000:]
    assert "DIAGNOSIS 1/" in stdout and "[%s]" % case.expect in stdout


def _flag_check(tmp_path, args, **extra):
    import ansible_runner
    module_args = dict({"image": IMAGE, "args": args, "cache_dir": str(tmp_path / "cache")}, **extra)
    private = tmp_path / ("runner-" + uuid.uuid4().hex[:6])
    private.mkdir()
    run = ansible_runner.run(
        private_data_dir=str(private),
        host_pattern="localhost",
        inventory="localhost ansible_connection=local ansible_python_interpreter=%s" % sys.executable,
        module="llmfleet.vllm.vllm_flag_check",
        module_args=json.dumps(module_args),
        envvars={"ANSIBLE_COLLECTIONS_PATH": os.path.join(ROOT, "collections")},
        quiet=True,
    )
    results = [e["event_data"]["res"] for e in run.events
               if e.get("event") in ("runner_on_ok", "runner_on_failed")]
    return run, results[-1] if results else {}


@requires_image
def test_flag_check_against_the_cpu_image(tmp_path):
    valid = ["/models/tiny"] + BASE_FLAGS + ["--enable-prefix-caching", "--max_num_seqs", "4", "-tp", "1",
                                             "--compilation-config.mode", "0"]
    run, res = _flag_check(tmp_path, valid, min_vllm_version="0.17.0", model="tiny")
    assert run.rc == 0, res.get("msg")
    assert res["problems"] == [] and res["flags_known"] > 100 and res["from_cache"] is False
    assert res["vllm_version"].startswith("0.")
    assert os.path.isfile(res["help_cache"])

    run, res = _flag_check(tmp_path, ["/models/tiny", "--enable-prefix-cachng", "--max-model-len", "512"])
    assert run.rc != 0
    assert res["from_cache"] is True  # the help text is read once per image ID
    assert "--enable-prefix-cachng is not a `vllm serve` flag in %s" % IMAGE in res["msg"]
    assert "did you mean --enable-prefix-caching?" in res["msg"]
    assert [p["flag"] for p in res["problems"]] == ["--enable-prefix-cachng"]

    run, res = _flag_check(tmp_path, ["/models/tiny"], min_vllm_version="99.0", model="tiny")
    assert run.rc != 0
    assert "tiny needs vLLM >= 99.0" in res["msg"]


def _serving_of_two_models(tmp_path):
    """serving.json as vllm_server writes it on a host of two models (the first model's keys at the top)."""
    models = [{"name": name, "runner": runner, "model_path": str(tmp_path / name),
               "replicas": [{"name": "%s-0" % name, "port": port, "gpus": []}],
               "base_urls": ["http://127.0.0.1:%d/v1" % port], "adapters": []}
              for name, runner, port in (("chat", "generate", 8001), ("embed", "pooling", 8002))]
    serving = dict(served_model_name="chat", model_path=models[0]["model_path"], replicas=models[0]["replicas"],
                   base_urls=models[0]["base_urls"], image=IMAGE, models=models)
    path = tmp_path / "serving.json"
    path.write_text(json.dumps(serving))
    return path


def test_diagnose_model_selects_that_model_s_replicas_and_refuses_an_unknown_name(tmp_path):
    """-e diagnose_model=NAME on a host of two models: that model's replicas only; an unknown name fails first,
    listing the served names (no unit or container of this host is looked at)."""
    serving = _serving_of_two_models(tmp_path)
    (tmp_path / "ok").mkdir()
    run, _reports, stdout = _run_diagnose([], {"diagnose_model": "embed", "diagnose_serving_file": str(serving),
                                               "diagnose_probe_api": False}, tmp_path / "ok")
    assert run.rc == 0, stdout[-3000:]
    (said,) = [e["event_data"]["res"]["msg"] for e in run.events if e.get("event") == "runner_on_ok"
               and e["event_data"].get("task") == "Print the host's GPU memory and disk space"]
    assert said[0] == "replicas found: embed-0", said
    assert "model %s, served as embed, replicas embed-0" % (tmp_path / "embed") in said[-1], said
    # Without diagnose_model: every replica against its own model's directory (embed's is missing here).
    (tmp_path / "chat").mkdir()
    (tmp_path / "all").mkdir()
    settings = {"diagnose_serving_file": str(serving), "diagnose_probe_api": False}
    run, reports, stdout = _run_diagnose(["chat-0", "embed-0"], settings, tmp_path / "all")
    assert run.rc == 0, stdout[-3000:]
    assert "model directory %s does not exist" % (tmp_path / "embed") in "\n".join(reports["embed-0"])
    assert str(tmp_path / "embed") not in "\n".join(reports["chat-0"])
    (tmp_path / "unknown").mkdir()
    run, _reports, stdout = _run_diagnose([], {"diagnose_model": "llama", "diagnose_serving_file": str(serving)},
                                          tmp_path / "unknown")
    assert run.rc != 0
    failed = [e["event_data"] for e in run.events if e.get("event") == "runner_on_failed"]
    assert [f["task"] for f in failed] == ["Decode the deployment description (of the model diagnose_model names)"]
    assert "does not serve a model named 'llama'; it serves: chat, embed" in failed[0]["res"]["msg"]
    ran = [e["event_data"]["task"] for e in run.events if e.get("event") == "runner_on_ok"]
    assert not any(task.startswith("List the vLLM") for task in ran), ran
