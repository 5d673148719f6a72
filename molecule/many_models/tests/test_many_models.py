"""Many models on one host (issue #39 item 3): three models at once (two generative ones and an embedding model on
the pooling runner), each its own unit, container and port; a re-run changes nothing; adding a model leaves the
others' containers as they were; removing one removes its units, files and port; the one-model variables again remove
the list's instances. Order matters: each test starts from the one before."""
import datetime
import json
import os
import re
import subprocess
import time

import yaml

API_KEY = "llmfleet-sentinel-api-key-4f1c"
SCENARIO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(SCENARIO, "vars", "models.yml")) as fh:
    MODELS = yaml.safe_load(fh)
MOE, LLAMA, BERT = MODELS["llmfleet_models"]
INSTANCES = ("tiny-0", "tiny-llama-0", "tiny-bert-0")
# A fourth model: the tiny Llama again under another served name (its own unit, container, port and directory), without
# the adapter (an adapter's name is served once).
THIRD = dict(LLAMA, name="tiny-llama-b", weights_dir="/srv/llmfleet/models/tiny-llama-b", adapters=[])


def _site(extra, playbook="site.yml"):
    """A playbook (site.yml) against this scenario's host with extra vars (None: the one-model shorthand) ->
    (rc, output, seconds)."""
    inventory = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "inventory")
    cmd = ["ansible-playbook", os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], playbook), "-i", inventory]
    if extra is not None:
        cmd += ["-e", json.dumps(extra)]
    started = time.monotonic()
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=2400, check=False)
    return run.returncode, run.stdout + run.stderr, time.monotonic() - started


def _models(*entries):
    return {"llmfleet_models": list(entries)}


def _unchanged(out):
    recap = [line for line in out.splitlines() if "changed=" in line]
    return recap and all("changed=0" in line for line in recap)


def _started(host, instance):
    return host.check_output("docker inspect -f '{{.Id}} {{.State.StartedAt}}' llmfleet-vllm-%s" % instance).strip()


def _ports(host):
    return json.loads(host.file("/etc/llmfleet/ports.json").content_string)


def _chat(host, model, port, edge=False):
    """A chat completion of model at port (a replica's vLLM port: port + the edge's offset; or the edge's, over TLS
    verified against the fleet's CA), the model's name back."""
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
    url = ("https" if edge else "http") + "://127.0.0.1:%d/v1/chat/completions" % port
    out = host.check_output("curl -fsS --cacert /etc/llmfleet/tls/ca.crt -H 'Authorization: Bearer %s' "
                            "-H 'Content-Type: application/json' -d '%s' %s" % (API_KEY, body, url))
    return json.loads(out)["model"]


def test_each_model_has_its_own_unit_container_port_and_answers_by_its_name(host):
    assert _ports(host) == {"tiny-0": 8001, "tiny-llama-0": 8002, "tiny-bert-0": 8003}
    for instance in INSTANCES:
        assert host.service("llmfleet-vllm@%s.service" % instance).is_running
    for model, port in (("tiny", 18001), ("tiny-llama", 18002)):
        assert _chat(host, model, port) == model
    served = json.loads(host.file("/etc/llmfleet/serving.json").content_string)
    assert [(m["name"], m["runner"], m["adapters"]) for m in served["models"]] == [
        ("tiny", "generate", []), ("tiny-llama", "generate", ["tiny-llama-sql"]), ("tiny-bert", "pooling", [])]
    assert served["served_model_name"] == "tiny" and served["models"][1]["model_path"].endswith("/tiny-llama")
    assert "--max-model-len 256" in host.file("/etc/llmfleet/vllm-tiny-llama-0.run").content_string
    assert "--runner pooling" in host.file("/etc/llmfleet/vllm-tiny-bert-0.run").content_string


def _when(stamp):
    """A docker timestamp (RFC 3339, nanoseconds, UTC) as a datetime (microseconds: all Python parses)."""
    return datetime.datetime.fromisoformat(re.sub(r"(\.\d{6})\d*", r"\1", stamp.replace("Z", "+00:00")))


def test_the_engines_started_one_after_another(host):
    """Two CPU engines starting at once on 2 cores fail to initialise: each container started only after the one
    before it logged that it serves (uvicorn's "Application startup complete")."""
    for before, after in zip(INSTANCES, INSTANCES[1:]):
        logs = host.check_output("docker logs -t llmfleet-vllm-%s 2>&1" % before)
        up = [line.split()[0] for line in logs.splitlines() if "Application startup complete" in line]
        started = _started(host, after).split()[1]
        assert up and _when(up[0]) <= _when(started), (before, up[:1], after, started)


def test_a_rerun_changes_nothing_and_restarts_nothing(host):
    before = {i: _started(host, i) for i in INSTANCES}
    rc, out, wall = _site(_models(*MODELS["llmfleet_models"]))
    print("no-op re-run with three models: %.0fs" % wall)
    assert rc == 0 and _unchanged(out), out[-3000:]
    assert {i: _started(host, i) for i in before} == before


def test_upgrading_one_model_restarts_only_its_replicas(host):
    """upgrade.yml -e upgrade_models=[tiny-llama] with a change every replica would take (an environment variable):
    only the Llama's replica restarts on it; the other models keep their containers and their files."""
    before = {i: _started(host, i) for i in ("tiny-0", "tiny-bert-0")}
    llama_before = _started(host, "tiny-llama-0")
    extra = dict(_models(*MODELS["llmfleet_models"]), vllm_server_env={"LLMFLEET_ROLL_MARK": "1"},
                 upgrade_models=["tiny-llama"])
    rc, out, wall = _site(extra, "playbooks/upgrade.yml")
    print("upgrading one model of three: %.0fs" % wall)
    assert rc == 0, out[-3000:]
    assert {i: _started(host, i) for i in before} == before, "a model not named was restarted"
    assert _started(host, "tiny-llama-0") != llama_before
    assert "LLMFLEET_ROLL_MARK" in host.check_output("cat /etc/llmfleet/vllm-tiny-llama-0.env")
    assert "LLMFLEET_ROLL_MARK" not in host.check_output("cat /etc/llmfleet/vllm-tiny-0.env")
    # Back to the inventory's configuration: the Llama only (the other model never took the change).
    rc, out, _wall = _site(_models(*MODELS["llmfleet_models"]))
    assert rc == 0 and {i: _started(host, i) for i in before} == before, out[-3000:]


def test_adding_a_model_starts_only_its_unit(host):
    before = {i: _started(host, i) for i in INSTANCES}
    rc, out, wall = _site(_models(*MODELS["llmfleet_models"], THIRD))
    print("adding a model: %.0fs" % wall)
    assert rc == 0, out[-3000:]
    assert {i: _started(host, i) for i in before} == before, "adding a model restarted another"
    assert _ports(host) == {"tiny-0": 8001, "tiny-llama-0": 8002, "tiny-bert-0": 8003, "tiny-llama-b-0": 8004}
    assert _chat(host, "tiny-llama-b", 18004) == "tiny-llama-b"


def test_removing_a_model_removes_its_unit_container_files_and_port_only(host):
    before = {i: _started(host, i) for i in ("tiny-0", "tiny-bert-0", "tiny-llama-b-0")}
    rc, out, wall = _site(_models(MOE, BERT, THIRD))
    print("removing a model: %.0fs" % wall)
    assert rc == 0, out[-3000:]
    assert {i: _started(host, i) for i in before} == before, "removing a model restarted another"
    assert _ports(host) == {"tiny-0": 8001, "tiny-bert-0": 8003, "tiny-llama-b-0": 8004}
    assert not host.service("llmfleet-vllm@tiny-llama-0.service").is_running
    assert host.run("docker inspect llmfleet-vllm-tiny-llama-0").rc != 0
    for suffix in (".run", ".env", ".unit.conf"):
        assert not host.file("/etc/llmfleet/vllm-tiny-llama-0" + suffix).exists
    # Its weights and its adapter's stay (the weights role's).
    assert host.file("/srv/llmfleet/models/tiny-llama/config.json").exists
    assert host.file("/srv/llmfleet/models/tiny-llama.adapters/tiny-llama-sql/adapter_config.json").exists


def test_back_to_the_one_model_variables_removes_the_lists_instances(host):
    rc, out, wall = _site(None)
    print("back to the shorthand: %.0fs" % wall)
    assert rc == 0, out[-3000:]
    assert host.service("llmfleet-vllm@0.service").is_running
    for instance in ("tiny-0", "tiny-bert-0", "tiny-llama-b-0"):
        assert not host.service("llmfleet-vllm@%s.service" % instance).is_running
        assert host.run("docker inspect llmfleet-vllm-%s" % instance).rc != 0
    assert not host.file("/etc/llmfleet/ports.json").exists
    assert "models" not in json.loads(host.file("/etc/llmfleet/serving.json").content_string)
    assert _chat(host, "tiny", 8000, edge=True) == "tiny"
    rc, out, wall = _site(None)
    # Beside the three-model re-run's time above: issue #39 item 9's ratio (same host, same run).
    print("no-op re-run with the one model: %.0fs" % wall)
    assert rc == 0 and _unchanged(out), out[-3000:]


def test_from_the_one_model_variables_to_a_list_removes_the_shorthands_instance(host):
    rc, out, wall = _site(_models(*MODELS["llmfleet_models"]))
    print("from the shorthand to the list: %.0fs" % wall)
    assert rc == 0, out[-3000:]
    assert not host.service("llmfleet-vllm@0.service").is_running
    assert host.run("docker inspect llmfleet-vllm-0").rc != 0
    assert not host.file("/etc/llmfleet/vllm-0.run").exists
    assert sorted(_ports(host)) == sorted(INSTANCES)
