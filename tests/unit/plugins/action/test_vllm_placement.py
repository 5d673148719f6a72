"""The vllm_placement action's inputs per entry: the model read like vllm_plan reads it (here a model directory on
the controller: a published config.json and a safetensors index giving the weights' size), and the entry's args_extra
read as plan inputs, except the ones the placement decides."""
import json
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.action.vllm_placement import _inputs
from ansible_collections.llmfleet.vllm.plugins.action.vllm_plan import _load_all
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


@pytest.mark.parametrize("flag", ["tensor-parallel-size", "gpu-memory-utilization", "kv-cache-memory-bytes"])
def test_what_the_placement_decides_is_refused_in_args_extra(tmp_path, flag):
    with pytest.raises(PlanError, match=r"llmfleet_models\[3\]\.args_extra sets .* use the entry's tensor_parallel"):
        _inputs(ARGS, 3, entry(model_dir(tmp_path), args_extra={flag: 2}), _load_all([]))


def test_a_model_that_cannot_be_read_names_its_entry(tmp_path):
    with pytest.raises(PlanError, match=r"^llmfleet_models\[1\] \(llama\), model .*: unknown model .*not a path on the controller"):
        _inputs(ARGS, 1, entry(str(tmp_path / "missing") + "/"), _load_all([]))
