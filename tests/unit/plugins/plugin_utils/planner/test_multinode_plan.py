"""One model over several hosts (issue #30): vLLM's pipeline-parallel layer split, each stage sized on its own, the
plan tables of docs/PLANNER.md ("More than one host") replayed from the published config.json files, and the
one-host refusal that names the host count."""
import copy
import json
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import model_profiles as M
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import multinode_plan as MN
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import planner as P
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.gpu_catalogue import annotate_gpu_facts, load_catalogue
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.topology import gpu_facts_from_spec

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
CAT = load_catalogue()
H100X8 = annotate_gpu_facts(gpu_facts_from_spec("8x H100 SXM", CAT), CAT)


def config_profile(name):
    with open(os.path.join(ROOT, "tests", "fixtures", "model_configs", name + ".json")) as fh:
        config = json.load(fh)
    return M.profile_from_model_dir(config, name=name.replace("--", "/"), count_weights=True)


DSV3 = config_profile("deepseek-ai--DeepSeek-V3")
L405 = config_profile("uiuc-convai--CoALM-405B")
QWEN3 = config_profile("Qwen--Qwen3-1.7B")


# --- vLLM's get_pp_indices -----------------------------------------------------------------------------------

@pytest.mark.parametrize("layers,pp,parts", [
    (61, 2, [31, 30]),        # DeepSeek-V3: the odd layer goes to the stage before the last
    (126, 2, [63, 63]),       # Llama-3.1-405B
    (32, 3, [11, 11, 10]),    # remainder 2 over the stages before the last
    (10, 4, [2, 3, 3, 2]),    # remainder 2 <= pp - 2: the middle stages
    (7, 7, [1] * 7),
])
def test_layers_split_as_vllm_splits_them(layers, pp, parts):
    assert MN.pp_partitions(layers, pp) == parts
    assert sum(parts) == layers
    starts = [MN.pp_indices(layers, r, pp) for r in range(pp)]
    assert starts[0][0] == 0 and starts[-1][1] == layers
    assert all(a[1] == b[0] for a, b in zip(starts, starts[1:]))


def test_the_partition_override_is_checked_like_vllm():
    assert MN.pp_partitions(61, 2, "30,31") == [30, 31]
    with pytest.raises(PlanError, match="sums to 60"):
        MN.pp_partitions(61, 2, "30,30")
    with pytest.raises(PlanError, match="3 entries for 2"):
        MN.pp_partitions(61, 2, [20, 20, 21])
    with pytest.raises(PlanError, match="every stage needs a layer"):
        MN.pp_partitions(3, 4)


# --- the host list --------------------------------------------------------------------------------------------

def test_host_list_from_a_count_or_from_several_hosts_facts():
    assert len(MN.host_facts(H100X8)) == 1
    assert len(MN.host_facts(H100X8, 3)) == 3
    assert len(MN.host_facts([H100X8, H100X8])) == 2
    with pytest.raises(PlanError, match="hosts is 3 but gpu_facts lists 2"):
        MN.host_facts([H100X8, H100X8], 3)
    with pytest.raises(PlanError, match="hosts must be between 1"):
        MN.host_facts(H100X8, 0)
    with pytest.raises(PlanError, match="entry 1 lists no GPUs"):
        MN.host_facts([H100X8, {"gpus": []}])


# --- stage weights ----------------------------------------------------------------------------------------------

def test_stage_weights_add_up_and_follow_the_layers():
    arch = DSV3["arch"]
    total = DSV3["weights_bytes"]
    w0 = MN.stage_weight_bytes(arch, 0, 31, 2, total)
    w1 = MN.stage_weight_bytes(arch, 31, 61, 2, total)
    assert abs((w0 + w1) - total) / total < 1e-6          # untied head: nothing counted twice
    # stage 0 has one layer more but holds the three dense (light) layers; stage 1 is 30 MoE layers + the head
    assert w1 > w0
    sa = MN.stage_arch(arch, 0, 31)
    assert sa["num_layers"] == 31 and sa["moe_sizes"]["dense_layers"] == 3 and sa["layer_counts"] == {"mla": 31}
    assert MN.stage_arch(arch, 31, 61)["moe_sizes"]["dense_layers"] == 0


def test_a_tied_head_is_loaded_again_on_the_last_stage():
    arch = QWEN3["arch"]
    assert arch["tie_word_embeddings"]
    total = QWEN3["weights_bytes"]
    n = arch["num_layers"]
    both = MN.stage_weight_bytes(arch, 0, n // 2, 2, total) + MN.stage_weight_bytes(arch, n // 2, n, 2, total)
    emb = arch["vocab_size"] * arch["hidden_size"] * arch["dtype_bytes"]
    assert both > total and abs(both - total - emb) / emb < 0.01


# --- the plan tables of docs/PLANNER.md -------------------------------------------------------------------------

@pytest.mark.parametrize("profile,tp,layers,ep", [(DSV3, 8, [31, 30], True), (L405, 8, [63, 63], False)])
def test_one_host_refuses_with_the_host_count_and_two_hosts_fit(profile, tp, layers, ep):
    one = P.plan(H100X8, profile, max_model_len=32768)
    assert not one["fits"] and one["nodes"] == 1 and one["pipeline_parallel_size"] == 1
    assert one["suggestions"][0]["set"] == {"hosts": 2}
    want = "Use 2 hosts like this one (8x NVIDIA H100 80GB HBM3): fits as 1 x TP%d x PP2" % tp
    assert one["suggestions"][0]["text"].startswith(want)
    two = P.plan(H100X8, profile, max_model_len=32768, hosts=2)
    assert two["fits"]
    assert (two["nodes"], two["tensor_parallel_size"], two["pipeline_parallel_size"], two["data_parallel_size"]) \
        == (2, tp, 2, 1)
    assert two["enable_expert_parallel"] is ep
    assert [s["num_layers"] for s in two["stages"]] == layers
    assert [s["node_rank"] for s in two["stages"]] == [0, 1]
    assert two["vllm_args"]["tensor-parallel-size"] == tp and two["vllm_args"]["pipeline-parallel-size"] == 2
    # the stage with the fewest blocks sets the instance's capacity (vLLM unifies the KV configs to the minimum)
    assert two["kv_cache_blocks"] == min(s["kv_cache_blocks"] for s in two["stages"])
    assert two["kv_cache_tokens"] == int(two["kv_cache_blocks"] / (32768 // 16) * 32768)
    # per-rank memory: each GPU holds its stage's weights / TP, under the 80 GB a GPU has
    for s in two["stages"]:
        assert s["weights_bytes_per_gpu"] == -(-s["weights_bytes"] // tp)
        assert s["weights_bytes_per_gpu"] < 0.9 * 80 * 1024 ** 3
    # the suggestion was re-planned: it says what the two-host plan gives
    assert "{:,}".format(two["kv_cache_tokens"]) in one["suggestions"][0]["text"]


def test_the_two_host_plans_numbers():
    """The numbers docs/PLANNER.md shows (weights counted from config.json, plan.yml's context and utilisation)."""
    ds = P.plan(H100X8, DSV3, max_model_len=32768, hosts=2)
    assert [s["kv_cache_blocks"] for s in ds["stages"]] == [54027, 51116]
    assert (ds["kv_cache_tokens"], ds["max_concurrency"], ds["max_num_seqs"]) == (817856, 24.96, 256)
    ll = P.plan(H100X8, L405, max_model_len=32768, hosts=2)
    assert [s["kv_cache_blocks"] for s in ll["stages"]] == [43753, 43753]
    assert (ll["kv_cache_tokens"], ll["max_concurrency"]) == (700048, 21.36)


def test_the_docs_table_is_what_the_planner_produces():
    import importlib.util
    spec = importlib.util.spec_from_file_location("plan_table", os.path.join(ROOT, "docs", "plan_table.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with open(os.path.join(ROOT, "docs", "PLANNER.md")) as fh:
        text = fh.read()
    assert "## More than one host" in text
    assert mod.hosts_table() in text


# --- choices ----------------------------------------------------------------------------------------------------

def test_a_model_one_host_holds_stays_on_one_host():
    p = P.plan(H100X8, QWEN3, max_model_len=32768, hosts=2)
    assert p["fits"] and p["nodes"] == 1 and p["pipeline_parallel_size"] == 1 and p["hosts"] == 2
    assert p["stages"] is None and "pipeline-parallel-size" not in p["vllm_args"]
    assert any("no host group is needed" in r for r in p["reasons"])


def test_the_fewest_hosts_that_hold_it_and_the_rest_named():
    p = P.plan(H100X8, DSV3, max_model_len=32768, hosts=4)
    assert p["fits"] and p["nodes"] == 2 and p["hosts"] == 4
    assert any("2 of the 4 hosts are enough" in r and "second group" in r for r in p["reasons"])


def test_each_stage_is_sized_on_its_own_host():
    """Hosts with less memory make their stage the one that sets the capacity."""
    small = copy.deepcopy(H100X8)
    for g in small["gpus"]:
        g["memory_total_mib"] = int(g["memory_total_mib"] * 0.95)
    even = P.plan([H100X8, H100X8], L405, max_model_len=32768)
    mixed = P.plan([H100X8, small], L405, max_model_len=32768)
    assert mixed["fits"]
    s0, s1 = mixed["stages"]
    assert s1["available_kv_cache_memory_bytes"] < s0["available_kv_cache_memory_bytes"]
    assert mixed["kv_cache_blocks"] == s1["kv_cache_blocks"] < even["kv_cache_blocks"]


def test_not_even_all_hosts_hold_it():
    tiny = annotate_gpu_facts(gpu_facts_from_spec("2x RTX 4090 PCIe", CAT), CAT)
    p = P.plan(tiny, L405, max_model_len=32768, hosts=2)
    assert not p["fits"]
    assert any("Across all 2 hosts" in r for r in p["reasons"])
    # the group's own gpu_facts (a list): the same answer, and no "more hosts like this one" to offer
    listed = P.plan([tiny, tiny], L405, max_model_len=32768)
    assert not listed["fits"] and not any("hosts like this one" in s["text"] for s in listed["suggestions"])


def test_forced_settings_across_hosts():
    p = P.plan(H100X8, L405, max_model_len=32768, hosts=2, tensor_parallel_size=8)
    assert p["tensor_parallel_size"] == 8 and p["pipeline_parallel_size"] == 2
    with pytest.raises(PlanError, match="replicas 2: a plan across hosts is one instance"):
        P.plan(H100X8, L405, max_model_len=32768, hosts=2, replicas=2)
    with pytest.raises(PlanError, match="tensor_parallel_size 3 is not possible"):
        P.plan(H100X8, L405, max_model_len=32768, hosts=2, tensor_parallel_size=3)


def test_the_summary_row_of_a_plan_across_hosts():
    p = P.plan(H100X8, DSV3, max_model_len=32768, hosts=2)
    row = P.table_row("2 x (8x H100 SXM)", p)
    assert row.startswith("| 2 x (8x H100 SXM) | deepseek-ai/DeepSeek-V3 | yes | 1 x TP8 x PP2 EP NVLink over 2 hosts |")
    assert "| 24.96 @ 32768 |" in row
