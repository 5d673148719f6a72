"""tests/bench/prefix_routing.py: the pure parts (vLLM counters from /metrics, hit rate, percentiles, workload)."""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import prefix_routing as pr  # noqa: E402

METRICS = """# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="tiny"} 1200.0
vllm:prefix_cache_queries_total{engine="1",model_name="tiny"} 300.0
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="tiny"} 640.0
vllm:prefix_cache_hits_created{engine="0",model_name="tiny"} 1.7e9
vllm:num_requests_running{engine="0",model_name="tiny"} 0.0
"""


def test_counters_are_summed_over_label_sets_and_others_ignored():
    assert pr.parse_counters(METRICS) == {"vllm:prefix_cache_queries_total": 1500.0,
                                          "vllm:prefix_cache_hits_total": 640.0}


def test_missing_counters_read_as_zero():
    assert pr.parse_counters("") == {"vllm:prefix_cache_queries_total": 0.0, "vllm:prefix_cache_hits_total": 0.0}


def test_hit_rate_between_snapshots():
    before = {"vllm:prefix_cache_queries_total": 100.0, "vllm:prefix_cache_hits_total": 10.0}
    after = {"vllm:prefix_cache_queries_total": 300.0, "vllm:prefix_cache_hits_total": 160.0}
    assert pr.hit_rate(before, after) == (0.75, 200, 150)
    assert pr.hit_rate(before, before) == (None, 0, 0)


def test_snapshots_of_replicas_add_up():
    a = {"vllm:prefix_cache_queries_total": 1.0, "vllm:prefix_cache_hits_total": 2.0}
    assert pr.sum_snapshots([a, a]) == {"vllm:prefix_cache_queries_total": 2.0, "vllm:prefix_cache_hits_total": 4.0}


def test_nearest_rank_percentiles():
    values = list(range(1, 101))
    assert pr.percentile(values, 0.5) == 50
    assert pr.percentile(values, 0.99) == 99
    assert pr.percentile([7], 0.99) == 7
    assert pr.percentile([], 0.5) is None


def test_each_run_opens_its_conversations_with_its_own_nonce():
    one = pr.conversation_turns("0000abcd", 3, 6, random.Random(1))
    other = pr.conversation_turns("1234ffff", 3, 6, random.Random(1))
    assert len(one) == 6 and one[0] != other[0] and "0000abcd-003" in one[0]
    # Same shape in every run: only the nonce differs, never the length.
    assert [len(t) for t in one] == [len(t) for t in other]


def test_pasted_context_lengthens_every_user_turn():
    plain = pr.conversation_turns("0000abcd", 0, 3, random.Random(2))
    pasted = pr.conversation_turns("0000abcd", 0, 3, random.Random(2), paste_words=40)
    assert all(" Context: " in t and len(t) > len(p) for t, p in zip(pasted, plain))


def test_moves_count_turns_served_by_another_replica_than_the_previous_turn():
    rows = [{"conversation": 0, "turn": 1, "replica": "a", "ok": True},
            {"conversation": 0, "turn": 2, "replica": "a", "ok": True},
            {"conversation": 0, "turn": 3, "replica": "b", "ok": True},
            {"conversation": 1, "turn": 1, "replica": "b", "ok": True},
            {"conversation": 1, "turn": 2, "replica": "a", "ok": False},  # failed: not compared
            {"conversation": 2, "turn": 2, "replica": None, "ok": True}]  # no header: not compared
    assert pr.moves(rows) == (1, 2)


def test_kv_cache_tokens_from_vllm_cache_config_info():
    text = ('vllm:cache_config_info{block_size="128",cache_dtype="auto",engine="0",num_gpu_blocks="256"} 1.0\n'
            + METRICS)
    assert pr.cache_tokens(text) == 32768
    assert pr.cache_tokens(METRICS) is None


def test_policy_names_become_playbook_variables():
    assert pr.policy_vars("roundrobin") == ["-e", "loadbalancer_balance=roundrobin",
                                            "-e", "loadbalancer_served_by_header=X-Llmfleet-Served-By"]
    assert pr.policy_vars("prefix:200")[-2:] == ["-e", "loadbalancer_prefix_balance_factor=200"]


def test_occupancy_spreads_time_in_flight_over_replicas():
    rows = [{"replica": "a", "start": 0.0, "end": 4.0},
            {"replica": "a", "start": 1.0, "end": 3.0},
            {"replica": "b", "start": 3.0, "end": 6.0},  # starts as one of a's ends: not counted twice
            {"replica": None, "start": 0.0, "end": 9.0}]  # failed (no replica): left out
    occ = pr.occupancy(rows)
    assert occ["seconds_in_flight"] == 6.0
    assert occ["busy_share"] == {"a": round(4 / 6, 3), "b": 0.5}
    assert occ["mean_in_flight"] == {"a": 1.0, "b": 0.5}
    # 1..3: a has 2 in flight, b none.
    assert occ["idle_while_other_2plus"] == round(2 / 6, 3)
    assert pr.occupancy([])["idle_while_other_2plus"] is None


def _run(policy, tokens, hit, repeat):
    return {"conversations": 32, "policy": policy, "repeat": repeat,
            "later_turns": {"output_tokens_per_s": tokens, "hit_rate": hit, "ttft_p50_ms": 400.0, "ttft_p99_ms": 1500.0,
                            "moved_turns": 0, "load_average_1m": 4.0, "occupancy": {"idle_while_other_2plus": None}}}


def test_repeated_runs_summarise_per_policy_with_ratio_to_round_robin():
    results = [_run("roundrobin", 60.0, 0.3, 1), _run("prefix:200", 54.0, 0.7, 1),
               _run("roundrobin", 70.0, 0.4, 2), _run("prefix:200", 66.0, 0.7, 2)]
    summary = pr.summarize(results)
    assert [(s["policy"], s["runs"]) for s in summary] == [("roundrobin", 2), ("prefix:200", 2)]
    rr, prefix = summary
    assert rr["output_tokens_per_s"] == {"mean": 65.0, "min": 60.0, "max": 70.0}
    assert prefix["ratio_to"] == "roundrobin" and prefix["ratio"]["output_tokens_per_s"] == round(60 / 65, 3)
    assert prefix["ratio"]["hit_rate"] == 2.0 and rr["ratio"]["hit_rate"] == 1.0
    assert prefix["idle_while_other_2plus"] is None and prefix["ratio"]["idle_while_other_2plus"] is None
    text = pr.summary_table(summary)
    assert "60.0 (54.0-66.0)" in text and "prefix:200 vs roundrobin (32 conversations)" in text and "x0.92" in text


def test_report_keeps_plain_lists_on_one_line_and_stays_json():
    report = {"results": [{"requests": [[2, 0, "gpu1_0", 0.1, 0.9, 120.5, 24, 300, True]]}], "policies": "a,[b]"}
    text = pr.dump_report(report)
    assert '[2, 0, "gpu1_0", 0.1, 0.9, 120.5, 24, 300, true]' in text
    assert pr.json.loads(text) == report
