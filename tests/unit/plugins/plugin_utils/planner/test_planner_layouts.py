"""Throughput layouts maximise served capacity (issue #15): replicas x TP scored by full-context sequences."""
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import planner as P
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.gpu_catalogue import annotate_gpu_facts, load_catalogue
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.model_profiles import load_profiles
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.topology import gpu_facts_from_spec

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
PROFILES = load_profiles(os.path.join(ROOT, "profiles"))
BF16 = PROFILES["Qwen/Qwen3.5-35B-A3B"]
FP8 = PROFILES["Qwen/Qwen3.5-35B-A3B-FP8"]
INT4 = PROFILES["Qwen/Qwen3.5-35B-A3B-GPTQ-Int4"]
CAT = load_catalogue()


def hw(text):
    return annotate_gpu_facts(gpu_facts_from_spec(text, CAT), CAT)


def held(p):
    """Full-context sequences the plan holds at once over all replicas (vLLM's concurrency, capped by seqs)."""
    return p["data_parallel_size"] * min(p["max_concurrency"], p["max_num_seqs"])


@pytest.mark.parametrize("hardware", ["8x A100 80GB SXM", "4x H100 SXM", "8x H100 SXM"])
def test_throughput_layout_holds_at_least_as_many_sequences_as_the_best_tp2(hardware):
    facts = hw(hardware)
    chosen = P.plan(facts, BF16, max_model_len=32768)
    tp2 = P.plan(facts, BF16, max_model_len=32768, tensor_parallel_size=2)
    assert chosen["fits"] and tp2["fits"]
    if held(chosen) < held(tp2):
        assert any("holds fewer full-context sequences than" in r for r in chosen["reasons"]), chosen["reasons"]
    else:
        assert held(chosen) >= held(tp2)
    # BF16 at 32k: a TP1 replica keeps a few GB of KV beside 65 GB of weights; TP2 replicas win.
    assert chosen["tensor_parallel_size"] == 2 and chosen["enable_expert_parallel"]
    tp1 = P.plan(facts, BF16, max_model_len=32768, tensor_parallel_size=1)
    assert held(chosen) > 5 * held(tp1)


def test_reasons_compare_every_candidate_layout():
    p = P.plan(hw("8x A100 80GB SXM"), BF16, max_model_len=32768)
    r = next(r for r in p["reasons"] if r.startswith("Objective throughput"))
    for name in ("8 x TP1", "4 x TP2 NVLink", "2 x TP4 NVLink", "1 x TP8 NVLink"):
        assert name in r, r
    assert "Chosen: 4 x TP2 NVLink holds" in r


def test_one_gpu_replicas_stay_when_they_already_hold_the_sequences():
    # GPTQ-Int4 on 8x H100: a TP1 replica keeps 62 full-context sequences; TP2 would hold more but pay TP traffic.
    p = P.plan(hw("8x H100 SXM"), INT4, max_model_len=32768)
    assert p["layout"] == "8 x TP1"
    tp2 = P.plan(hw("8x H100 SXM"), INT4, max_model_len=32768, tensor_parallel_size=2)
    if held(tp2) > held(p):
        assert any("holds fewer full-context sequences than 4 x TP2 NVLink" in r for r in p["reasons"])


def test_pcie_tp_is_discounted_hard():
    p = P.plan(hw("4x L40S"), FP8, max_model_len=32768)
    assert p["layout"] == "4 x TP1"


def test_user_forces_replicas_and_tp():
    facts = hw("8x H100 SXM")
    p = P.plan(facts, BF16, max_model_len=32768, tensor_parallel_size=2, replicas=3)
    assert p["layout"] == "3 x TP2 EP NVLink" and p["unused_gpus"] == [6, 7]
    assert any("the user set 3 replicas" in r for r in p["reasons"])
    p = P.plan(facts, FP8, max_model_len=32768, replicas=2)
    assert p["data_parallel_size"] == 2
    with pytest.raises(PlanError, match="replicas 9 needs at least 9"):
        P.plan(facts, FP8, max_model_len=32768, replicas=9)
    with pytest.raises(PlanError, match="5 replicas of TP2 need 10 GPUs"):
        P.plan(facts, FP8, max_model_len=32768, tensor_parallel_size=2, replicas=5)


def test_fp8_checkpoint_on_ampere_says_weight_only():
    p = P.plan(hw("1x A100 80GB"), FP8, max_model_len=32768)
    assert p["fits"] and any("weight-only" in r for r in p["reasons"])
    p = P.plan(hw("1x H200"), FP8, max_model_len=32768)
    assert not any("weight-only" in r for r in p["reasons"])


def test_mtp_adds_a_drafter_attention_layer_and_speculative_state():
    off = P.plan(hw("1x H200"), BF16, max_model_len=32768, features={"prefix_caching": False})
    on = P.plan(hw("1x H200"), BF16, max_model_len=32768, features={"mtp": True})
    lay = on["kv_cache_layout"]
    assert lay["attention_layers"] == 11 and lay["group_size"] == 11 and lay["state_groups"] == 3
    assert lay["state_blocks_per_request"] == 2  # mode 'none' (MTP turns prefix caching off) + 1 speculative
    assert on["max_concurrency"] < off["max_concurrency"]


def test_layout_per_tp_size_follows_vllms_block_size_rule():
    # Qwen3.5 BF16: TP1/TP2 1056-token blocks, TP4 528 (KV heads replicated), TP8 272.
    sizes = {t: P.layout_for(BF16, t).block_size for t in (1, 2, 4, 8)}
    assert sizes == {1: 1056, 2: 1056, 4: 528, 8: 272}
    # FP8 KV cache halves the attention page: the block doubles.
    assert P.layout_for(BF16, 1, kv_cache_dtype="fp8").block_size == 2096
    # Plain attention (the tiny test model): 16-token blocks, one group of every layer.
    tiny = P.layout_for(PROFILES["llmfleet-test/tiny-qwen3-moe"], 1)
    assert (tiny.block_size, tiny.group_size, tiny.state_groups) == (16, 4, 0)
