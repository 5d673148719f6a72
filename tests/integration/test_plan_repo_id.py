"""llmfleet.vllm.vllm_plan given a repo id that has no profile file: the controller reads config.json,
generation_config.json and the safetensors index from a hub mirror (a private olah on this test bed, the same
mirror software the test bed serves models from), caches them, and plans with the engine options every model has.
A missing repo or revision is one clear line before anything changes."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "testbed"))

import hub_repo  # noqa: E402
import hubs  # noqa: E402

REPO = "google/gemma-3-1b-it"
PLAYBOOK = """
- name: Plan a model by repo id
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Plan
      llmfleet.vllm.vllm_plan: "{{ plan_args }}"
      register: planned
    - name: Keep the result
      ansible.builtin.copy:
        content: "{{ {'plan': planned.plan, 'hub_metadata': planned.hub_metadata} | to_json }}"
        dest: "{{ out_path }}"
        mode: "0644"
"""


@pytest.fixture(scope="module")
def olah(tmp_path_factory):
    model = tmp_path_factory.mktemp("model")
    with open(ROOT / "tests" / "fixtures" / "model_configs" / "google--gemma-3-1b-it.json") as fh:
        (model / "config.json").write_text(fh.read())
    (model / "generation_config.json").write_text(json.dumps({"bos_token_id": 2, "eos_token_id": [1, 106]}))
    # The published checkpoint's index total (google/gemma-3-1b-it ships one safetensors file: no index); a
    # small index stands in so the weight size comes from the hub's metadata, as it does for sharded models.
    (model / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 1999811072},
                                                                    "weight_map": {}}))
    root = tmp_path_factory.mktemp("mirrors")
    commit = hub_repo.publish(model, root, REPO)
    srv = hubs.start_olah(root, probe_repo=REPO)
    yield srv, commit
    srv.stop()


def run_plan(tmp_path, args):
    pb = tmp_path / "plan.yml"
    pb.write_text(PLAYBOOK)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"), ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
               ANSIBLE_LOCALHOST_WARNING="0")
    cmd = [str(ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(pb),
           "-e", json.dumps({"plan_args": args, "ansible_python_interpreter": sys.executable,
                             "out_path": str(tmp_path / "out.json")})]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=False)


def test_a_repo_id_without_a_profile_is_planned_from_the_hub(olah, tmp_path):
    srv, commit = olah
    cache = tmp_path / "cache"
    args = {"model": REPO, "hardware": "1x H200", "hub_endpoint": srv.url, "metadata_cache_dir": str(cache),
            "max_model_len": 32768, "features": {"prefix_caching": False}}
    r = run_plan(tmp_path, args)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads((tmp_path / "out.json").read_text())
    plan, meta = out["plan"], out["hub_metadata"]
    assert meta["commit"] == commit and not meta["cached"]
    assert plan["fits"] and plan["weights_bytes"] == 1999811072
    assert plan["kv_cache_layout"]["kind_groups"] == {"sliding": 6, "full": 1}
    assert plan["vllm_args"]["enable-prefix-caching"] is False
    assert (cache / "hf" / "google--gemma-3-1b-it" / commit / "config.json").is_file()
    # The pinned commit is now read from the controller's cache, without the hub (an endpoint nothing answers).
    r = run_plan(tmp_path, dict(args, hub_revision=commit, hub_endpoint="http://127.0.0.1:9"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads((tmp_path / "out.json").read_text())["hub_metadata"]["cached"] is True


def test_a_missing_repo_is_one_clear_line(olah, tmp_path):
    srv, _commit = olah
    r = run_plan(tmp_path, {"model": "google/no-such-model", "hardware": "1x H200", "hub_endpoint": srv.url,
                            "metadata_cache_dir": str(tmp_path / "cache")})
    assert r.returncode != 0
    assert "google/no-such-model at revision 'main' was not found" in r.stdout + r.stderr
