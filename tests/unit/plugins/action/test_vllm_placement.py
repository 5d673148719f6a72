"""The vllm_placement action's inputs per entry: the model read like vllm_plan reads it (here a model directory on
the controller: a published config.json and a safetensors index giving the weights' size), and the entry's args_extra
read as plan inputs, except the ones the placement decides."""
import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.llmfleet.vllm.plugins.action.vllm_placement import _inputs
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.plan_inputs import load_all_profiles as _load_all
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.model_list import model_list
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
ARGS = dict(objective="throughput", max_model_len=32768, vllm_version=None, hub_source="hf", hub_revision=None,
            hub_endpoint=None, hub_token=None, metadata_cache_dir="~/.cache/llmfleet/hub-metadata")


def model_dir(tmp_path):
    with open(os.path.join(ROOT, "tests", "fixtures", "model_configs", "meta-llama--Llama-3.1-8B-Instruct.json")) as fh:
        config = json.load(fh)
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 16060522496},
                                                                      "weight_map": {}}))
    return str(tmp_path)


def entry(path, **kw):
    return model_list([dict({"name": "llama", "model": path}, **kw)])["models"][0]


def test_an_entrys_args_extra_are_plan_inputs(tmp_path):
    given = _inputs(ARGS, 0, entry(model_dir(tmp_path), args_extra={"kv-cache-dtype": "fp8"}, max_model_len=8192),
                    _load_all([]))
    assert given["profile"]["weights_bytes"] == 16060522496
    assert given["plan_args"]["kv_cache_dtype"] == "fp8" and given["plan_args"]["max_model_len"] == 8192


def test_a_pooling_entry_plans_prefix_caching_as_vllm_sets_it_and_adapters_plan_lora_slots(tmp_path):
    path = model_dir(tmp_path)
    pooled = _inputs(ARGS, 0, entry(path, runner="pooling"), _load_all([]))
    # a decoder (LlamaForCausalLM) pooled on its LAST token: prefix caching on, as vLLM's default
    assert pooled["plan_args"]["features"] == {"prefix_caching": True} and "lora" not in pooled
    own = _inputs(ARGS, 0, entry(path, runner="pooling", features={"prefix_caching": False}), _load_all([]))
    assert own["plan_args"]["features"] == {"prefix_caching": False}
    adapters = [{"name": "sql", "model": "org/sql-lora"}, {"name": "de", "model": "org/de-lora", "rank": 64}]
    given = _inputs(ARGS, 0, entry(path, adapters=adapters), _load_all([]))
    assert given["lora"] == {"max_loras": 2, "max_lora_rank": 64}
    assert _inputs(ARGS, 0, entry(path, adapters=adapters[:1]), _load_all([]))["lora"]["max_lora_rank"] == 16


def test_an_encoder_only_pooling_model_is_planned_from_its_config_without_a_kv_cache(tmp_path):
    with open(os.path.join(ROOT, "tests", "fixtures", "model_configs", "pooling",
                           "microsoft--xtremedistil-l12-h384-uncased.json")) as fh:
        (tmp_path / "config.json").write_text(fh.read())
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 1000)
    given = _inputs(ARGS, 0, entry(str(tmp_path), runner="pooling"), _load_all([]))
    assert given["encoder"]["weights_bytes"] == 1000 and given["encoder"]["config"]["architectures"] == ["BertModel"]
    # the same model as a generator is refused by the planner (it models decoders' KV caches)
    with pytest.raises(PlanError, match="architecture BertModel is not one the planner models"):
        _inputs(ARGS, 0, entry(str(tmp_path)), _load_all([]))


@pytest.mark.parametrize("flag", ["tensor-parallel-size", "gpu-memory-utilization", "kv-cache-memory-bytes"])
def test_what_the_placement_decides_is_refused_in_args_extra(tmp_path, flag):
    with pytest.raises(PlanError, match=r"llmfleet_models\[3\]\.args_extra sets .* use the entry's tensor_parallel"):
        _inputs(ARGS, 3, entry(model_dir(tmp_path), args_extra={flag: 2}), _load_all([]))


def test_a_model_that_cannot_be_read_names_its_entry(tmp_path):
    with pytest.raises(PlanError, match=r"^llmfleet_models\[1\] \(llama\), model .*: unknown model .*not a path on the controller"):
        _inputs(ARGS, 1, entry(str(tmp_path / "missing") + "/"), _load_all([]))


def test_plan_playbook_places_every_hosts_models_on_described_hardware(tmp_path):
    """playbooks/plan.yml with an inventory whose two hosts set llmfleet_models: one row per instance per host."""
    llama = model_dir(tmp_path)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {
        "big": {"llmfleet_models": [{"name": "a", "model": llama, "tensor_parallel_size": 2},
                                    {"name": "b", "model": llama, "max_model_len": 8192}]},
        "small": {"llmfleet_models": [{"name": "c", "model": llama, "gpus": [1]}]}}}}))
    report = tmp_path / "plan.md"
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    r = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "playbooks/plan.yml",
                        "-i", str(inventory), "-e", '{"plan_hardware": ["2x H100 SXM"]}',
                        "-e", "plan_report_path=%s" % report], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=120, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = report.read_text().splitlines()
    assert rows[0].startswith("| hardware | GPUs | model | instance |")
    assert [row.split(" | ")[:4] for row in rows[2:]] == [
        ["| big on 2x H100 SXM", "0,1 (TP2)", "a", "a-0"], ["| big on 2x H100 SXM", "1 (TP1)", "b", "b-0"],
        ["| small on 2x H100 SXM", "1 (TP1)", "c", "c-0"]]
    assert rows[3].endswith("| a-0 |")  # b starts after a, whose GPU it shares
