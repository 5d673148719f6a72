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
FANCY = "fancy-lab/fancy-new-8b"
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
    # A model the planner does not understand: Llama-3.1-8B-Instruct's published config.json under an architecture
    # name nobody models, with the published checkpoint's index total (16,060,522,496 bytes).
    fancy = tmp_path_factory.mktemp("fancy")
    with open(ROOT / "tests" / "fixtures" / "model_configs" / "meta-llama--Llama-3.1-8B-Instruct.json") as fh:
        (fancy / "config.json").write_text(json.dumps(dict(json.load(fh), architectures=["FancyNewForCausalLM"])))
    (fancy / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 16060522496},
                                                                    "weight_map": {}}))
    hub_repo.publish(fancy, root, FANCY)
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


def test_an_architecture_the_planner_does_not_understand_is_refused_with_the_way_out(olah, tmp_path):
    srv, _commit = olah
    r = run_plan(tmp_path, {"model": FANCY, "hardware": "1x H200", "hub_endpoint": srv.url,
                            "metadata_cache_dir": str(tmp_path / "cache"), "max_model_len": 32768})
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert "architecture FancyNewForCausalLM is not one the planner models" in out
    assert "set kv_cache_memory_bytes" in out and "llmfleet_kv_cache_memory_bytes" in out


def test_with_the_kv_cache_sized_by_hand_it_is_planned_and_marked_not_verified(olah, tmp_path):
    srv, _commit = olah
    r = run_plan(tmp_path, {"model": FANCY, "hardware": "1x H200", "hub_endpoint": srv.url,
                            "metadata_cache_dir": str(tmp_path / "cache"), "max_model_len": 32768,
                            "kv_cache_memory_bytes": 40 * 1024 ** 3})
    assert r.returncode == 0, r.stdout + r.stderr
    plan = json.loads((tmp_path / "out.json").read_text())["plan"]
    assert plan["fits"] and plan["verified"] is False
    assert "FancyNewForCausalLM" in plan["not_understood"] and plan["warnings"][0].startswith("not verified")
    assert plan["weights_bytes"] == 16060522496  # the hub's safetensors index
    assert plan["vllm_args"]["kv-cache-memory-bytes"] == 40 * 1024 ** 3
    assert plan["kv_cache_tokens"] is None and plan["max_concurrency"] is None


def test_the_kv_cache_sized_by_hand_is_refused_for_a_model_the_planner_understands(olah, tmp_path):
    srv, _commit = olah
    r = run_plan(tmp_path, {"model": REPO, "hardware": "1x H200", "hub_endpoint": srv.url,
                            "metadata_cache_dir": str(tmp_path / "cache"), "kv_cache_memory_bytes": 1 << 30})
    assert r.returncode != 0
    assert "sizes the KV cache of google/gemma-3-1b-it itself" in r.stdout + r.stderr


def test_the_deployments_engine_arguments_are_planned_as_vllm_will_run_them(olah, tmp_path):
    srv, _commit = olah
    base = {"model": REPO, "hardware": "1x H200", "hub_endpoint": srv.url,
            "metadata_cache_dir": str(tmp_path / "cache"), "max_model_len": 32768}
    r = run_plan(tmp_path, base)
    assert r.returncode == 0, r.stdout + r.stderr
    plain = json.loads((tmp_path / "out.json").read_text())["plan"]
    r = run_plan(tmp_path, dict(base, engine_args={"kv-cache-dtype": "fp8", "disable-hybrid-kv-cache-manager": True},
                                engine_args_var="vllm_server_args_extra"))
    assert r.returncode == 0, r.stdout + r.stderr
    plan = json.loads((tmp_path / "out.json").read_text())["plan"]
    assert plan["kv_cache_dtype"] == "fp8" and plan["kv_cache_layout"]["kind_layers"] == {"full": 26}
    assert plan["reasons"][0].startswith("Planned for the engine as it will run, with what vllm_server_args_extra")
    assert "--kv-cache-dtype fp8" in plan["reasons"][0] and "--disable-hybrid-kv-cache-manager" in plan["reasons"][0]
    assert plan["kv_cache_tokens"] != plain["kv_cache_tokens"]
    r = run_plan(tmp_path, dict(base, engine_args={"max-num-seqs": "many"}, engine_args_var="vllm_server_args_extra"))
    assert r.returncode != 0
    assert "vllm_server_args_extra: --max-num-seqs must be a whole number, got 'many'" in r.stdout + r.stderr
