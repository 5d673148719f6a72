"""bench_report: vllm bench serve result documents -> rows, SLO verdicts, comparisons, Markdown.

Real result documents (from `vllm bench serve` 0.32.0 against the tiny CPU deployment) live in
tests/fixtures/bench/; `result()` below builds a document with the same keys for edge cases.
"""

import json
from pathlib import Path

import pytest

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import bench_report as br

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "bench"


def result(concurrency, ttft=(50.0, 90.0), itl=(10.0, 20.0), tput=100.0, completed=16, failed=0, n=16, **extra):
    doc = {
        "date": "20261130-150000", "backend": "openai", "model_id": "tiny", "num_prompts": n,
        "request_rate": "inf", "burstiness": 1.0, "max_concurrency": concurrency, "duration": 10.0,
        "completed": completed, "failed": failed, "total_input_tokens": 64 * n, "total_output_tokens": 32 * n,
        "request_throughput": 1.6, "output_throughput": tput, "total_token_throughput": tput * 3,
        "input_len": "64", "output_len": "32",
    }
    for metric, (p50, p99) in (("ttft", ttft), ("itl", itl), ("tpot", itl), ("e2el", (1000.0, 2000.0))):
        doc.update({f"mean_{metric}_ms": p50, f"median_{metric}_ms": p50, f"std_{metric}_ms": 1.0,
                    f"p50_{metric}_ms": p50, f"p90_{metric}_ms": (p50 + p99) / 2, f"p99_{metric}_ms": p99})
    doc.update(extra)
    return doc


def real_results():
    files = sorted(FIXTURES.glob("concurrency-*.json"))
    assert files, "tests/fixtures/bench must hold real vllm bench serve results"
    return [(p.name, json.loads(p.read_text())) for p in files]


def test_real_results_become_rows_sorted_by_concurrency():
    rows = br.rows_from_results(real_results())
    assert [r["concurrency"] for r in rows] == sorted(r["concurrency"] for r in rows)
    for row in rows:
        assert row["completed"] == row["num_prompts"] and row["failed"] == 0
        assert row["output_throughput"] > 0
        # percentiles are ordered, as they must be for any real distribution
        for metric in ("ttft", "itl", "tpot", "e2el"):
            assert row[f"{metric}_p50_ms"] <= row[f"{metric}_p90_ms"] <= row[f"{metric}_p99_ms"]


def test_row_takes_percentiles_and_falls_back_to_median_for_p50():
    doc = result(4, ttft=(40.0, 80.0))
    del doc["p50_ttft_ms"]
    row = br.result_row(doc, "a.json")
    assert row["ttft_p50_ms"] == 40.0 and row["ttft_p99_ms"] == 80.0
    assert row["concurrency"] == 4 and row["input_len"] == 64


def test_unlimited_concurrency_counts_as_all_prompts_in_flight():
    assert br.result_row(result(None, n=32), "x")["concurrency"] == 32


def test_missing_percentiles_get_an_error_that_says_which_flags_to_pass():
    doc = result(1)
    del doc["p99_itl_ms"]
    with pytest.raises(br.BenchReportError, match="--percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99"):
        br.result_row(doc, "c1.json")


def test_a_file_that_is_not_a_result_is_named_in_the_error():
    with pytest.raises(br.BenchReportError, match="plan-copy.json: not a `vllm bench serve --save-result` document"):
        br.rows_from_results([("plan-copy.json", {"image": "x"})])


def test_two_results_for_one_level_are_refused():
    with pytest.raises(br.BenchReportError, match="two results for concurrency 4"):
        br.rows_from_results([("a.json", result(4)), ("b.json", result(4))])


def test_slo_verdicts_find_the_highest_level_within_objectives():
    rows = br.rows_from_results([("1", result(1, ttft=(50, 120))), ("4", result(4, ttft=(90, 280))),
                                 ("16", result(16, ttft=(200, 450))), ("64", result(64, ttft=(900, 2500)))])
    verdicts = br.slo_verdicts(rows, {"ttft_p99_ms": 300})
    assert [lv["pass"] for lv in verdicts["levels"]] == [True, True, False, False]
    assert verdicts["max_concurrency_passing"] == 4 and verdicts["all_pass"] is False
    assert verdicts["levels"][2]["checks"][0] == {"slo": "ttft_p99_ms", "limit": 300, "direction": "max",
                                                  "value": 450, "pass": False}


def test_throughput_objective_is_a_lower_bound_and_failed_requests_fail_a_level():
    rows = br.rows_from_results([("1", result(1, tput=50.0)), ("4", result(4, tput=150.0, failed=2, completed=14))])
    verdicts = br.slo_verdicts(rows, br.parse_slos(["output_throughput=100"]))
    assert verdicts["levels"][0]["pass"] is False  # 50 tok/s < 100
    level4 = verdicts["levels"][1]
    assert [c["slo"] for c in level4["checks"]] == ["output_throughput", "failed"]
    assert level4["checks"][0]["pass"] is True and level4["pass"] is False
    assert verdicts["max_concurrency_passing"] is None


@pytest.mark.parametrize("bad, message", [
    (["ttft_p99=300"], "unknown objective"),
    (["ttft_p99_ms"], "name=value"),
    (["ttft_p99_ms=fast"], "not a non-negative number"),
    (["itl_p42_ms=10"], "unknown objective"),
])
def test_bad_slos_are_rejected_with_the_accepted_form(bad, message):
    with pytest.raises(br.BenchReportError, match=message):
        br.parse_slos(bad)


def test_compare_prints_ratios_and_says_which_way_is_better():
    before = br.rows_from_results([("1", result(1, ttft=(50, 100), tput=100.0)), ("4", result(4)),
                                   ("16", result(16))])
    after = br.rows_from_results([("1", result(1, ttft=(40, 150), tput=125.0)), ("4", result(4)),
                                  ("64", result(64))])
    comparison = br.compare_rows(before, after)
    assert [lv["concurrency"] for lv in comparison["levels"]] == [1, 4]
    assert comparison["only_before"] == [16] and comparison["only_after"] == [64]
    level1 = dict((f["field"], f) for f in comparison["levels"][0]["fields"])
    assert level1["output_throughput"]["ratio"] == pytest.approx(1.25) and level1["output_throughput"]["better"] is True
    assert level1["ttft_p50_ms"]["ratio"] == pytest.approx(0.8) and level1["ttft_p50_ms"]["better"] is True
    assert level1["ttft_p99_ms"]["ratio"] == pytest.approx(1.5) and level1["ttft_p99_ms"]["better"] is False
    level4 = dict((f["field"], f) for f in comparison["levels"][1]["fields"])
    assert level4["output_throughput"]["ratio"] == 1.0 and level4["output_throughput"]["better"] is None
    text = br.comparison_text(comparison)
    assert "1.25x" in text and "1.50x  WORSE" in text and "levels in only one run" in text


def test_markdown_report_states_plan_table_verdicts_and_plots():
    rows = br.rows_from_results(real_results())
    verdicts = br.slo_verdicts(rows, {"ttft_p99_ms": 300})
    plan = {"image": "reg/vllm-cpu@sha256:abc", "model": "tiny-qwen3-moe", "tensor_parallel_size": 1,
            "data_parallel_size": 1, "key_flags": ["--enforce-eager", "--max-model-len", "512"]}
    md = br.markdown_report(rows, verdicts, plan=plan, plots=[("Throughput", "throughput.png")],
                            slos={"ttft_p99_ms": 300})
    assert "| Image | `reg/vllm-cpu@sha256:abc` |" in md
    assert "| Tensor parallel (TP) | `1` |" in md and "`--enforce-eager --max-model-len 512`" in md
    assert "![Throughput](throughput.png)" in md
    assert "`ttft_p99_ms \u2264 300 ms`" in md
    table_lines = [line for line in md.splitlines() if line.startswith("| ") and line.split("|")[1].strip().isdigit()]
    # one results row and one verdict row per level
    assert len(table_lines) == 2 * len(rows)
    first = rows[0]
    assert f"| {first['concurrency']} | {first['completed']}/{first['num_prompts']} | {first['output_throughput']:.1f} |" in md


def test_headline_when_nothing_passes():
    rows = br.rows_from_results([("1", result(1, ttft=(500, 900)))])
    md = br.markdown_report(rows, br.slo_verdicts(rows, {"ttft_p99_ms": 300}))
    assert "not met even at the lowest concurrency (1)" in md


# --- the report CLI (plugins/cli/bench_report.py): real files in, real PNGs out -------------------
def cli():
    from ansible_collections.llmfleet.vllm.plugins.cli import bench_report as cli_module
    return cli_module


def copy_fixtures(dest):
    dest.mkdir(parents=True)
    for path in FIXTURES.glob("concurrency-*.json"):
        (dest / path.name).write_text(path.read_text())
    return dest


def test_cli_renders_report_plots_and_summary(tmp_path, capsys):
    results = copy_fixtures(tmp_path / "run")
    (results / "plan.json").write_text(json.dumps({"image": "reg/vllm-cpu@sha256:abc", "tensor_parallel_size": 1}))
    assert cli().main([str(results), "--out", str(tmp_path / "report"), "--slo", "ttft_p99_ms=100000"]) == 0
    out = tmp_path / "report"
    for png in ("throughput.png", "latency.png"):
        data = (out / png).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000
    report = (out / "README.md").read_text()
    assert "`reg/vllm-cpu@sha256:abc`" in report and "![" in report
    assert "Every concurrency level met its objectives" in report
    summary = json.loads((out / "summary.json").read_text())
    assert [r["concurrency"] for r in summary["rows"]] == sorted(r["concurrency"] for r in summary["rows"])
    assert "all levels pass" in capsys.readouterr().out


def test_cli_fail_on_slo_exits_1_when_an_objective_is_missed(tmp_path):
    results = copy_fixtures(tmp_path / "run")
    # an objective no real server meets: first token within 0.001 ms
    assert cli().main([str(results), "--out", str(tmp_path / "r"), "--slo", "ttft_p99_ms=0.001", "--fail-on-slo"]) == 1
    assert cli().main([str(results), "--out", str(tmp_path / "r"), "--slo", "ttft_p99_ms=0.001"]) == 0


def test_cli_compare_prints_ratios_between_two_runs(tmp_path, capsys):
    before = copy_fixtures(tmp_path / "before")
    after = copy_fixtures(tmp_path / "after")
    doc = json.loads((after / "concurrency-1.json").read_text())
    doc["output_throughput"] *= 2
    (after / "concurrency-1.json").write_text(json.dumps(doc))
    assert cli().main([str(after), "--compare", str(before)]) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.strip().startswith("output_throughput"))
    assert "2.00x" in line and "better" in line
    assert "## Compared with the previous run" in (after / "README.md").read_text()


def test_cli_refuses_a_directory_without_results(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert cli().main([str(tmp_path / "empty")]) == 2
    assert "no benchmark results found" in capsys.readouterr().err


def test_plan_flags_render_from_the_planners_dict_form():
    flags = {"max_model_len": 32768, "enable_expert_parallel": True, "enable_prefix_caching": False,
             "quantization": None, "compilation_config": {"mode": 3}, "middleware": ["a", "b"]}
    assert br.flags_text(flags) == ('--compilation-config {"mode":3} --enable-expert-parallel '
                                    '--no-enable-prefix-caching --max-model-len 32768 --middleware a --middleware b')
    assert br.flags_text(["--enforce-eager", "--max-model-len", "512"]) == "--enforce-eager --max-model-len 512"
