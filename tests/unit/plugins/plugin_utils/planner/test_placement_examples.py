"""The "Many models" example of docs/PLANNER.md, replayed (issue #39, proof on paper): the example inventory's
llmfleet_models (inventories/examples/many_models) planned from the models' published config.json files
(tests/fixtures/model_configs) on 8x H100 SXM fits (a 70B model at TP4 on one NVLink island, two 8B-class models at TP2,
an embedding model packed beside one of them and started after it); the same list on 4x L40S PCIe is refused with a
suggestion; the tables in the docs are the ones the code prints."""
import json
import os

import yaml

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.model_list import model_list
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import engine_memory as EM
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import model_profiles as M
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import placement as PL
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.gpu_catalogue import annotate_gpu_facts, load_catalogue
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.topology import gpu_facts_from_spec

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
EXAMPLE = os.path.join(ROOT, "inventories", "examples", "many_models", "group_vars", "all", "main.yml")
CAT = load_catalogue()


def profile(repo):
    with open(os.path.join(ROOT, "tests", "fixtures", "model_configs", repo.replace("/", "--") + ".json")) as fh:
        config = json.load(fh)
    arch = M.normalize_config(config, repo)
    return M.profile_from_model_dir(config, weights_bytes=EM.weights_from_config(arch, None), name=repo)


def placed(hardware):
    with open(EXAMPLE) as fh:
        group_vars = yaml.safe_load(fh)
    checked = model_list(group_vars["llmfleet_models"], gpu_count=int(hardware.split("x")[0]))
    assert checked["problems"] == []
    inputs = {e["name"]: {"profile": profile(e["model"]), "plan_args": {
        "max_model_len": e["max_model_len"] or group_vars["llmfleet_max_model_len"]}} for e in checked["models"]}
    facts = annotate_gpu_facts(gpu_facts_from_spec(hardware, CAT), CAT)
    return PL.place(facts, checked["models"], inputs, budget=group_vars["llmfleet_gpu_memory_utilization"])


def docs_rows():
    with open(os.path.join(ROOT, "docs", "PLANNER.md")) as fh:
        text = fh.read()
    block = text.split("<!-- many-models-table -->")[1]
    return [line for line in block.strip().splitlines() if line.startswith("| ") and "---" not in line][1:]


def test_eight_h100_hold_the_list():
    r = placed("8x H100 SXM")
    assert r["fits"], r["problems"]
    got = {i["model"]: i for i in r["instances"]}
    assert got["llama-3.1-70b"]["gpus"] == [0, 1, 2, 3]
    assert len(got["llama-3.1-8b"]["gpus"]) == len(got["mistral-7b"]["gpus"]) == 2
    embed = got["embed"]
    [beside] = [i for i in r["instances"] if i["model"] != "embed" and set(i["gpus"]) & set(embed["gpus"])]
    assert beside["model"] in ("llama-3.1-8b", "mistral-7b")
    assert embed["start_after"] == [beside["instance"]] and embed["shared"] and beside["shared"]
    assert all(g["share_used"] <= 1.0 for g in r["gpus"])
    assert all(i["max_concurrency"] >= 1 for i in r["instances"])


def test_four_l40s_refuse_it_with_a_suggestion():
    r = placed("4x L40S PCIe")
    assert not r["fits"]
    text = " ".join(r["problems"])
    assert "llama-3.1-8b (replica 0) does not fit beside the other models" in text and "short by 2 GPUs" in text
    assert "What would fit: a host with room: alone on a host like this one it fits as 1 x TP1" in text
    # the 70B model takes all four 48 GB GPUs at TP4: the other three each get their refusal and their fix
    assert [i["model"] for i in r["instances"]] == ["llama-3.1-70b"] and r["instances"][0]["gpus"] == [0, 1, 2, 3]
    assert len(r["problems"]) == 3 and all("What would fit: " in p for p in r["problems"])


def test_the_docs_tables_are_the_ones_the_code_prints():
    rows = PL.placement_rows("8x H100 SXM", placed("8x H100 SXM")) \
        + PL.placement_rows("4x L40S PCIe", placed("4x L40S PCIe"))
    assert docs_rows() == rows
