"""Placement of several models on one host (issue #39 item 2), planned from each model's published config.json
(tests/fixtures/model_configs) on described hardware: TP groups inside NVLink islands, pinned GPUs honoured and
checked, co-tenants packed with shares that never exceed a GPU's budget, each with the planner's KV cache bytes,
started one after another; a list that does not fit names the model, by how much, and what would fit."""
import json
import math
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.model_list import model_list
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import engine_memory as EM
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import model_profiles as M
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import placement as PL
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import planner as P
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import capacity as CAP
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.gpu_catalogue import annotate_gpu_facts, load_catalogue
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.topology import gpu_facts_from_spec

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
CAT = load_catalogue()
GIB = 1 << 30


def facts(spec):
    return annotate_gpu_facts(gpu_facts_from_spec(spec, CAT), CAT)


def profile(repo):
    with open(os.path.join(ROOT, "tests", "fixtures", "model_configs", repo.replace("/", "--") + ".json")) as fh:
        config = json.load(fh)
    arch = M.normalize_config(config, repo)
    return M.profile_from_model_dir(config, weights_bytes=EM.weights_from_config(arch, None), name=repo)


def place(hardware, models, max_model_len=32768):
    checked = model_list(models)
    assert checked["problems"] == []
    entries = checked["models"]
    inputs = {e["name"]: {"profile": profile(e["model"]),
                          "plan_args": {"max_model_len": e["max_model_len"] or max_model_len}} for e in entries}
    return PL.place(facts(hardware) if isinstance(hardware, str) else hardware, entries, inputs)


def by_instance(result):
    return {i["instance"]: i for i in result["instances"]}


LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
MISTRAL = "mistralai/Mistral-7B-Instruct-v0.3"
MIXTRAL = "mistralai/Mixtral-8x7B-v0.1"
QWEN = "Qwen/Qwen3-1.7B"


def test_shares_of_every_gpu_stay_within_its_budget_counting_each_process_context():
    r = place("1x H100 SXM", [{"name": "a", "model": LLAMA}, {"name": "b", "model": MISTRAL}, {"name": "c",
                                                                                               "model": QWEN}])
    assert r["fits"], r["problems"]
    assert len(r["gpus"][0]["tenants"]) == 3
    total = CAP.cuda_total_bytes(facts("1x H100 SXM")["gpus"][0])
    used = sum(i["gpu_memory_utilization"] * total + PL.CUDA_CONTEXT_HEADROOM_BYTES for i in r["instances"])
    assert used <= 0.9 * total + 1
    assert r["gpus"][0]["share_used"] <= 1.0


def test_each_instance_gets_the_planners_kv_cache_bytes_for_its_share():
    r = place("1x H100 SXM", [{"name": "a", "model": LLAMA}, {"name": "b", "model": QWEN, "max_model_len": 8192}])
    gpu = facts("1x H100 SXM")
    total = CAP.cuda_total_bytes(gpu["gpus"][0])
    for inst in r["instances"]:
        util = math.floor((inst["share"] * 0.9 - PL.CUDA_CONTEXT_HEADROOM_BYTES / float(total)) * 1e4) / 1e4
        assert inst["gpu_memory_utilization"] == util
        alone = P.plan(gpu, profile(LLAMA if inst["model"] == "a" else QWEN), gpu_memory_utilization=util,
                       tensor_parallel_size=1, replicas=1, max_model_len=inst["max_model_len"])
        assert inst["kv_cache_memory_bytes"] == alone["available_kv_cache_memory_bytes"] > 0
        assert inst["vllm_args"]["kv-cache-memory-bytes"] == inst["kv_cache_memory_bytes"]


def test_co_tenants_start_one_after_another():
    r = place("1x H100 SXM", [{"name": "a", "model": LLAMA}, {"name": "b", "model": MISTRAL}, {"name": "c",
                                                                                               "model": QWEN}])
    order = r["start_order"]
    got = by_instance(r)
    assert got[order[0]]["start_after"] == []
    assert [got[n]["start_after"] for n in order[1:]] == [[order[0]], [order[1]]]


def test_packing_takes_the_smallest_share_and_the_incumbent_gives_it_up():
    r = place("1x H100 SXM", [{"name": "a", "model": LLAMA}, {"name": "b", "model": LLAMA}])
    a, b = by_instance(r)["a-0"], by_instance(r)["b-0"]
    assert a["shared"] and b["shared"] and a["share"] + b["share"] == pytest.approx(1.0)
    # one step less than b's share does not hold b
    smaller = P.plan(facts("1x H100 SXM"), profile(LLAMA), tensor_parallel_size=1, replicas=1, max_model_len=32768,
                     gpu_memory_utilization=(b["share"] - PL.SHARE_STEP) * 0.9 - PL.CUDA_CONTEXT_HEADROOM_BYTES
                     / float(CAP.cuda_total_bytes(facts("1x H100 SXM")["gpus"][0])))
    assert not smaller["fits"]


def test_a_model_without_room_is_refused_by_how_much_and_what_would_fit():
    r = place("1x RTX 4090", [{"name": "a", "model": LLAMA}, {"name": "b", "model": MISTRAL}])
    assert not r["fits"]
    [text] = r["problems"]
    assert text.startswith("b (replica 0) does not fit beside the other models")
    assert "short by" in text and "GiB" in text
    assert "a host with room: alone on a host like this one it fits as 1 x TP1" in text


def test_a_share_that_does_not_hold_the_model_gets_the_planners_suggestions():
    # a's 0.3 holds its weights and vLLM's profile terms, not a 131072-token context (#40's terms leave 0.25 none)
    r = place("1x H100 SXM", [{"name": "a", "model": LLAMA, "gpu_share": 0.3},
                              {"name": "b", "model": QWEN, "gpu_share": 0.65, "max_model_len": 8192}],
              max_model_len=131072)
    assert not r["fits"]
    text = " ".join(r["problems"])
    assert "a (replica 0) does not fit" in text and "Lower max_model_len to" in text


def test_gpu_shares_are_planned_at_their_share():
    r = place("2x H100 SXM", [{"name": "a", "model": LLAMA, "gpu_share": 0.6, "gpus": [1]},
                              {"name": "b", "model": QWEN, "gpu_share": 0.4, "gpus": [1]}])
    assert r["fits"], r["problems"]
    got = by_instance(r)
    assert got["a-0"]["gpus"] == got["b-0"]["gpus"] == [1]
    assert (got["a-0"]["share"], got["b-0"]["share"]) == (0.6, 0.4)
    assert r["gpus"][0]["tenants"] == []


def _two_islands(memory_mib=81559):
    """8 GPUs: NVLink inside 0-3 and inside 4-7, PCIe across (SYS): two NVLink islands."""
    links = {(a, b): ("NV4" if a // 4 == b // 4 else "SYS") for a in range(8) for b in range(8) if a != b}
    return annotate_gpu_facts(gpu_facts_from_spec({"count": 8, "memory_mib": memory_mib, "links": links}), CAT)


def test_tp_groups_stay_inside_an_nvlink_island():
    r = place(_two_islands(), [{"name": "s", "model": QWEN, "gpus": [2]},
                               {"name": "big", "model": MIXTRAL, "tensor_parallel_size": 4}])
    assert r["fits"], r["problems"]
    assert by_instance(r)["big-0"]["gpus"] == [4, 5, 6, 7]


def test_pinned_gpus_are_honoured_and_a_group_across_islands_is_refused():
    r = place(_two_islands(), [{"name": "a", "model": LLAMA, "gpus": [6, 7], "tensor_parallel_size": 2}])
    assert r["fits"] and by_instance(r)["a-0"]["gpus"] == [6, 7]
    r = place(_two_islands(), [{"name": "a", "model": MIXTRAL, "gpus": [2, 3, 4, 5], "tensor_parallel_size": 4}])
    assert not r["fits"]
    assert "a: gpus [2, 3, 4, 5] cross NVLink islands (0,1,2,3; 4,5,6,7)" in r["problems"][0]


def test_pinned_gpus_outside_the_host_or_taken_are_refused():
    r = place("2x H100 SXM", [{"name": "a", "model": LLAMA, "gpus": [3]}])
    assert "a: gpus [3] are not on this host (GPUs [0, 1])" in r["problems"][0]
    # two entries pinned whole to one GPU: model_list refuses the list; placement checks it too
    entries = model_list([{"name": "a", "model": LLAMA, "gpus": [0]}])["models"] \
        + model_list([{"name": "b", "model": QWEN, "gpus": [0]}])["models"]
    inputs = {"a": {"profile": profile(LLAMA)}, "b": {"profile": profile(QWEN), "plan_args": {"max_model_len": 8192}}}
    r = PL.place(facts("2x H100 SXM"), entries, inputs)
    assert "b: gpus [0] are already taken by a-0" in r["problems"][0]


def test_one_model_the_planner_refuses_is_a_problem_not_an_error():
    r = place("2x RTX 4090", [{"name": "a", "model": LLAMA, "replicas": 3}])
    assert r["problems"] == ["a does not fit: replicas 3 needs at least 3 usable GPUs; this host has 2."]


def test_one_model_is_planned_as_today():
    hw = facts("8x H100 SXM")
    r = place(hw, [{"name": "a", "model": LLAMA}])
    today = P.plan(hw, profile(LLAMA), max_model_len=32768, gpu_memory_utilization=0.9)
    assert [i["gpus"] for i in r["instances"]] == today["replicas"]
    assert r["instances"][0]["vllm_args"] == today["vllm_args"]  # no --kv-cache-memory-bytes added


def test_free_gpus_split_over_two_islands_make_no_tp_group():
    r = place(_two_islands(), [{"name": "a", "model": LLAMA, "gpus": [0, 1], "tensor_parallel_size": 2},
                               {"name": "b", "model": LLAMA, "gpus": [4, 5], "tensor_parallel_size": 2},
                               {"name": "big", "model": MIXTRAL, "tensor_parallel_size": 4}])
    assert not r["fits"]
    [text] = r["problems"]
    assert text.startswith("big (replica 0) does not fit beside the other models: the free GPUs [2, 3, 6, 7] do not "
                           "hold it (tensor_parallel_size 4 cannot share a GPU)")
    assert "it needs 4 whole GPUs of one NVLink island (or NUMA node) per replica, and the free GPUs [2, 3, 6, 7] " \
           "make no such group" in text


def test_a_group_the_planner_would_lay_across_islands_is_refused():
    # 40 GiB GPUs: Mixtral needs TP4; the free GPUs 2, 3, 6, 7 would make one only across the two islands
    models = [{"name": "a", "model": LLAMA, "gpus": [0, 1], "tensor_parallel_size": 2},
              {"name": "b", "model": LLAMA, "gpus": [4, 5], "tensor_parallel_size": 2},
              {"name": "big", "model": MIXTRAL}]
    r = place(_two_islands(40960), models)
    assert not r["fits"]
    assert "(the free GPUs [2, 3, 6, 7] make no TP4 group inside one island (big: gpus [2, 3, 6, 7] " \
           "cross NVLink islands" in r["problems"][0]
    assert by_instance(place(_two_islands(40960), models[2:]))["big-0"]["gpus"] == [0, 1, 2, 3]


def _two_numa_nodes():
    """4 PCIe GPUs of 16 GiB (too small for an 8B model alone): 0-1 on NUMA node 0, 2-3 on node 1 (SYS across)."""
    links = {(a, b): ("PHB" if a // 2 == b // 2 else "SYS") for a in range(4) for b in range(4) if a != b}
    hw = gpu_facts_from_spec({"count": 4, "memory_mib": 16384, "links": links})
    for g in hw["gpus"]:
        g["numa_node"] = g["index"] // 2
    return annotate_gpu_facts(hw, CAT)


def test_tp_groups_over_pcie_stay_inside_a_numa_node():
    r = place(_two_numa_nodes(), [{"name": "a", "model": LLAMA, "max_model_len": 8192}], max_model_len=8192)
    assert r["fits"], r["problems"]
    assert [i["gpus"] for i in r["instances"]] in ([[0, 1], [2, 3]], [[0, 1]])
    r = place(_two_numa_nodes(), [{"name": "a", "model": LLAMA, "gpus": [1, 2], "tensor_parallel_size": 2}],
              max_model_len=8192)
    assert "a: gpus [1, 2] span NUMA nodes (SYS links); pin a TP group inside one NUMA node." in r["problems"][0]


def test_the_one_model_shorthand_keeps_todays_replica_names():
    [entry] = model_list(None, {"llmfleet_model": LLAMA, "model_weights_dir": "/srv/models/llama"})["models"]
    inputs = {"llama": {"profile": profile(LLAMA), "plan_args": {"max_model_len": 32768}}}
    r = PL.place(facts("8x H100 SXM"), [entry], inputs)
    today = P.plan(facts("8x H100 SXM"), profile(LLAMA), max_model_len=32768)
    assert r["start_order"] == [str(i) for i in range(len(today["replicas"]))]
    assert all(i["start_after"] == [] for i in r["instances"])


def test_a_model_too_large_for_its_share_is_offered_the_fp8_checkpoint_of_its_family():
    profiles = M.load_profiles(os.path.join(ROOT, "profiles"))
    entries = model_list([{"name": "qwen", "model": "Qwen/Qwen3.5-35B-A3B", "gpu_share": 0.6},
                          {"name": "llama", "model": LLAMA, "gpu_share": 0.4}])["models"]
    inputs = {"qwen": {"profile": profiles["Qwen/Qwen3.5-35B-A3B"], "plan_args": {"max_model_len": 32768},
                       "alternatives": list(profiles.values())},
              "llama": {"profile": profile(LLAMA), "plan_args": {"max_model_len": 32768}}}
    r = PL.place(facts("1x H100 SXM"), entries, inputs)
    [text] = r["problems"]
    assert text.startswith("qwen (replica 0) does not fit beside the other models")
    assert "its gpu_share is 42.8 GiB: short by" in text
    assert "Serve Qwen/Qwen3.5-35B-A3B-FP8 instead" in text


def test_replicas_that_do_not_all_fit_are_offered_fewer():
    r = place("2x RTX 4090", [{"name": "a", "model": LLAMA, "replicas": 3, "max_model_len": 8192},
                              {"name": "b", "model": QWEN, "max_model_len": 8192}])
    assert [i["instance"] for i in r["instances"]] == ["a-0", "a-1"]
    text = r["problems"][0]
    assert text.startswith("a (replica 2) does not fit") and "replicas: 2 (that many fit beside the others)" in text
    # b (3.2 GiB of weights) needs 0.35 of a GPU; each 8B replica needs 0.90 of its GPU and gives up none of it
    assert r["problems"][1].startswith("b (replica 0) does not fit") and "needs 7.4 GiB (0.35" in r["problems"][1]
