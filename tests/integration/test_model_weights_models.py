"""The model_weights role with llmfleet_models (issue #39 item 7, weights side), on a Debian 12 systemd test host,
against the test bed's Hugging Face mirror (olah, offline, real huggingface_hub clients from the wheelhouse):

- two models by repo id, pinned to their commits (the tiny Llama and the tiny Gemma 3 of the test bed), plus the
  tiny Qwen3-MoE directory uploaded from the controller with a LoRA adapter (a PEFT directory made here): each is
  fetched, verified and placed in its own directory, the adapter beside its model, and the role publishes
  model_weights_paths and model_weights_adapter_paths;
- a re-run changes nothing and goes through no per-model fetch; its task-host pairs are the same with one model as
  with three (one model_fetch_plan call checks them all);
- a model removed from the list keeps its weights and the run says where they are; llmfleet_purge_weights removes
  them.

Needs `make testbed` (LLMFLEET_TEST_HUB_ARCH_REPOS, LLMFLEET_TEST_HF_ENDPOINT_FROM_HOSTS, LLMFLEET_TEST_WHEELHOUSE,
LLMFLEET_TEST_MODEL_DIR, MOLECULE_HOST_IMAGE). Run it under the shared lock:
flock /tmp/llmfleet-molecule.lock .venv/bin/pytest tests/integration/test_model_weights_models.py
"""
import json
import os
import shutil
import struct
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability_common as C  # noqa: E402

ENV = C.load_env()
REPOS = [r.split("@", 1) for r in (ENV.get("LLMFLEET_TEST_HUB_ARCH_REPOS") or "").split(",") if "@" in r]
# The test bed's LoRA adapter of the tiny Llama on the mirror (tests/testbed/up.d/41-tiny-pooling-model.sh), if any.
LORA = dict(r.split("@", 1) for r in (ENV.get("LLMFLEET_TEST_HUB_EXTRA_REPOS") or "").split(",") if "@" in r)
LLAMA_LORA = "llmfleet-test/tiny-llama-lora"
HOST = os.environ.get("LLMFLEET_WEIGHTS_TEST_HOST", "llmfleet-weights-models")
ROOT = "/srv/llmfleet/models"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(len(REPOS) < 2 or not C.testbed_ready(ENV) or not ENV.get("LLMFLEET_TEST_HF_ENDPOINT_FROM_HOSTS"),
                       reason="needs `make testbed` with its hub mirror and two tiny architectures"),
]

PLAY = """
- name: Weights of llmfleet_models
  hosts: gpu_nodes
  become: true
  gather_facts: false
  tasks:
    - name: The weights
      ansible.builtin.import_role:
        name: llmfleet.vllm.model_weights
    - name: Write down what the role published
      ansible.builtin.copy:
        dest: /root/published.json
        content: "{{ {'paths': model_weights_paths, 'adapters': model_weights_adapter_paths | default({}),
                      'path': model_weights_path} | to_nice_json }}"
        mode: "0644"
      changed_when: false
"""


def adapter_dir(root):
    """A PEFT LoRA adapter directory (its config and a real safetensors file of random-looking bytes)."""
    os.makedirs(root)
    with open(os.path.join(root, "adapter_config.json"), "w") as fh:
        json.dump({"peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"],
                   "base_model_name_or_path": "tiny"}, fh)
    tensor = {"dtype": "U8", "shape": [256], "data_offsets": [0, 256]}
    header = json.dumps({"base_model.model.q_proj.lora_A.weight": tensor}).encode()
    with open(os.path.join(root, "adapter_model.safetensors"), "wb") as fh:
        fh.write(struct.pack("<Q", len(header)) + header + bytes(range(256)))
    return root


@pytest.fixture(scope="module")
def host():
    work = tempfile.mkdtemp(prefix="llmfleet-weights-models-")
    inventory = os.path.join(work, "hosts.yml")
    with open(inventory, "w") as fh:
        json.dump(C.docker_inventory([HOST]), fh)
    C.start_host(HOST, ENV["MOLECULE_HOST_IMAGE"])
    yield {"work": work, "inventory": inventory, "adapter": adapter_dir(os.path.join(work, "lora-sql"))}
    if not os.environ.get("LLMFLEET_KEEP_TEST_HOST"):
        C.remove_host(HOST)
        shutil.rmtree(work, ignore_errors=True)


def hub_model(name, index):
    repo, commit = REPOS[index]
    return {"name": name, "model": repo, "revision": commit}


def run(host, models, **extra):
    extravars = {"llmfleet_models": models, "model_weights_endpoint": ENV["LLMFLEET_TEST_HF_ENDPOINT_FROM_HOSTS"],
                 "model_weights_wheelhouse": ENV["LLMFLEET_TEST_WHEELHOUSE"], "model_weights_poll_interval": 1}
    extravars.update(extra)
    result = C.run_playbook(PLAY, host["inventory"], extravars=extravars, timeout=1200, keep=True)
    # Task-host pairs the run went through (ok, changed, skipped, failed), and the tasks among them.
    events = [e for e in result.runner.events
              if e.get("event") in ("runner_on_ok", "runner_on_skipped", "runner_on_failed")]
    result.pairs = (len(events), [(e.get("event_data") or {}).get("task") for e in events])
    shutil.rmtree(result.data_dir, ignore_errors=True)
    return result


def published():
    return json.loads(C.host_exec(HOST, "cat", "/root/published.json", check=True).stdout)


def marker(path):
    out = C.host_exec(HOST, "cat", path + "/.llmfleet-weights.json")
    return json.loads(out.stdout) if out.returncode == 0 else None


def three(host):
    local = {"name": "tiny", "model": "tiny-qwen3-moe", "source": "local", "local_path": ENV["LLMFLEET_TEST_MODEL_DIR"],
             "adapters": [{"name": "tiny-sql", "local_path": host["adapter"]}]}
    llama = hub_model("llama", 0)
    if LLAMA_LORA in LORA:  # an adapter from the hub, pinned to its commit
        llama["adapters"] = [{"name": "llama-lora", "model": LLAMA_LORA, "revision": LORA[LLAMA_LORA]}]
    return [llama, hub_model("gemma", 1), local]


def test_every_model_and_adapter_is_fetched_verified_and_published(host):
    first = run(host, three(host))
    assert first.status == "successful", first.message
    done = published()
    assert done["paths"] == {"llama": ROOT + "/llama", "gemma": ROOT + "/gemma", "tiny": ROOT + "/tiny"}
    llama_adapters = {"llama-lora": ROOT + "/llama.adapters/llama-lora"} if LLAMA_LORA in LORA else {}
    assert done["adapters"] == {"llama": llama_adapters, "gemma": {},
                                "tiny": {"tiny-sql": ROOT + "/tiny.adapters/tiny-sql"}}
    if llama_adapters:
        hub_lora = marker(ROOT + "/llama.adapters/llama-lora")
        assert hub_lora["identity"]["repo_id"] == LLAMA_LORA and hub_lora["identity"]["commit"] == LORA[LLAMA_LORA]
        assert "adapter_config.json" in [f["path"] for f in hub_lora["files"]]
    assert done["path"] == ROOT + "/llama"
    for name, (repo, commit) in zip(("llama", "gemma"), REPOS):
        identity = marker(ROOT + "/" + name)["identity"]
        assert identity["repo_id"] == repo and identity["commit"] == commit
    assert marker(ROOT + "/tiny")["identity"]["origin"] == "controller:" + ENV["LLMFLEET_TEST_MODEL_DIR"].rstrip("/")
    lora = marker(ROOT + "/tiny.adapters/tiny-sql")
    assert sorted(f["path"] for f in lora["files"]) == ["adapter_config.json", "adapter_model.safetensors"]
    record = json.loads(C.host_exec(HOST, "cat", "/etc/llmfleet/model_weights.json", check=True).stdout)
    assert [m["name"] for m in record["models"]] == ["llama", "gemma", "tiny"] and record["removed"] == []


def test_a_rerun_changes_nothing_and_checks_three_models_in_the_tasks_of_one(host):
    again = run(host, three(host))
    assert again.status == "successful", again.message
    assert again.changed_total == 0, again.changed_tasks
    n3, tasks3 = again.pairs
    assert not [t for t in tasks3 if t and t.startswith("Work out what must be fetched")], tasks3
    # One model: the first run drops gemma and tiny from the record (their weights stay), the second is the no-op.
    assert run(host, [hub_model("llama", 0)]).status == "successful"
    one = run(host, [hub_model("llama", 0)])
    assert one.status == "successful" and one.changed_total == 0, (one.message, one.changed_tasks)
    n1, tasks1 = one.pairs
    assert n3 == n1, (tasks3, tasks1)
    C.write_result("model_weights_noop_pairs", {"models_3": {"pairs": n3, "wall_s": round(again.wall_s, 1)},
                                                "models_1": {"pairs": n1, "wall_s": round(one.wall_s, 1)}})


def test_a_removed_model_keeps_its_weights_until_purged(host):
    kept = run(host, [hub_model("llama", 0), hub_model("gemma", 1)])
    assert kept.status == "successful", kept.message
    assert "Kept on disk the weights of tiny at %s/tiny" % ROOT in kept.stdout
    assert marker(ROOT + "/tiny") is not None
    purged = run(host, [hub_model("llama", 0), hub_model("gemma", 1)], llmfleet_purge_weights=True)
    assert purged.status == "successful", purged.message
    assert "Removing the weights of tiny at %s/tiny" % ROOT in purged.stdout
    listing = C.host_exec(HOST, "ls", "-A", ROOT, check=True).stdout.split()
    # llama stays listed: the adapter dropped from its entry stays in llama.adapters (adapters are not purged yet).
    assert sorted(listing) == ["gemma", "llama"] + (["llama.adapters"] if LLAMA_LORA in LORA else []), listing
    # Forgotten once purged: the next run says nothing of it.
    after = run(host, [hub_model("llama", 0), hub_model("gemma", 1)])
    assert after.status == "successful" and "weights of tiny" not in after.stdout and after.changed_total == 0


@pytest.fixture(scope="module")
def second_host(host):
    name = HOST + "-2"
    C.start_host(name, ENV["MOLECULE_HOST_IMAGE"])
    both = os.path.join(host["work"], "two-hosts.yml")
    with open(both, "w") as fh:
        json.dump(C.docker_inventory([HOST, name]), fh)
    yield {"name": name, "inventory": both}
    if not os.environ.get("LLMFLEET_KEEP_TEST_HOST"):
        C.remove_host(name)


def test_each_model_comes_from_the_hub_once_and_over_the_lan_to_the_other_host(host, second_host):
    models = [hub_model("llama", 0), hub_model("gemma", 1)]
    res = run(dict(host, inventory=second_host["inventory"]), models)
    assert res.status == "successful", res.message
    # Per model: one host is the seed (it holds the model, or fetches it from the hub), the other pulls it from it.
    for name in ("llama", "gemma"):
        assert "%s/%s: from peers in round 1: " % (ROOT, name) in res.stdout, res.stdout[-4000:]
        out = C.host_exec(second_host["name"], "cat", "%s/%s/.llmfleet-weights.json" % (ROOT, name), check=True)
        assert json.loads(out.stdout)["identity"]["repo_id"] == dict(zip(("llama", "gemma"), REPOS))[name][0]
    again = run(dict(host, inventory=second_host["inventory"]), models)
    assert again.status == "successful" and again.changed_total == 0, again.changed_tasks
