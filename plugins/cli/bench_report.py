# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Render a benchmark report from `vllm bench serve` result files.

    python -m llmfleet_cli.bench_report RESULTS_DIR [--out DIR] [--slo ttft_p99_ms=300 ...]
                                        [--compare BEFORE_DIR] [--title TEXT] [--fail-on-slo]

RESULTS_DIR holds one result JSON per concurrency level (what playbooks/bench.yml collects) and,
optionally, plan.json (the deployment that was measured). Writes into --out (default RESULTS_DIR):
README.md (the report: plan, table, SLO verdicts, plots, comparison), throughput.png, latency.png and
summary.json (the same numbers for machines). With --compare, prints after/before ratios per level.
Exit status: 0; 1 with --fail-on-slo when a level misses an objective; 2 for unusable input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PLAN_FILE = "plan.json"


def _bench():
    from ._collection import import_plugin_code

    return import_plugin_code("plugin_utils.fleet.bench_report")


def load_results(directory: Path) -> list[tuple[str, dict]]:
    """[(file name, result document)] for every *.json in directory except the plan."""
    if not directory.is_dir():
        raise ValueError(f"{directory} is not a directory of benchmark results")
    named = []
    for path in sorted(directory.glob("*.json")):
        if path.name in (PLAN_FILE, "summary.json"):
            continue
        try:
            named.append((path.name, json.loads(path.read_text(encoding="utf-8"))))
        except ValueError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    return named


def load_plan(directory: Path, explicit: str | None) -> dict:
    path = Path(explicit) if explicit else directory / PLAN_FILE
    if not path.is_file():
        if explicit:
            raise ValueError(f"--plan {explicit}: no such file")
        return {}
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(plan, dict):
        raise ValueError(f"{path}: the plan must be a JSON object")
    return plan


def plan_with_result_facts(plan: dict, named_results: list[tuple[str, dict]]) -> dict:
    """Fill what the plan file does not say from the result documents themselves."""
    plan = dict(plan)
    if not named_results:
        return plan
    first = named_results[0][1]
    plan.setdefault("model", first.get("model_id"))
    if "dataset" not in plan and first.get("input_len"):
        plan["dataset"] = "random prompts, %s input / %s output tokens, %s requests per level" % (
            first.get("input_len"), first.get("output_len"), first.get("num_prompts"))
    plan.setdefault("backend", first.get("backend"))
    return plan


def plan_caption(plan: dict, rows: list[dict]) -> str:
    """One line under each plot, so that a PNG seen on its own still says what was measured."""
    parts = [str(plan.get("served_model_name") or plan.get("model") or "")]
    layout = []
    for key, short in (("tensor_parallel_size", "TP"), ("data_parallel_size", "DP"), ("replicas", "replicas ")):
        if plan.get(key) not in (None, ""):
            layout.append(f"{short}{plan[key]}" if short != "replicas " else f"{plan[key]} replica(s)")
    if layout:
        parts.append(" ".join(layout))
    if plan.get("accelerator"):
        parts.append(str(plan["accelerator"]).upper())
    image = str(plan.get("image") or "")
    if image:
        parts.append(image.rsplit("/", maxsplit=1)[-1].split("@", maxsplit=1)[0] + (" (pinned by digest)" if "@sha256:" in image else ""))
    if rows and rows[0].get("input_len") and rows[0].get("output_len"):
        parts.append("%d in / %d out tokens" % (rows[0]["input_len"], rows[0]["output_len"]))
    return "  \u00b7  ".join(p for p in parts if p)


def _concurrency_axis(ax, ylabel, ticks):
    """A log2 x axis of the concurrency levels (ticks), a y axis from 0."""
    from matplotlib.ticker import FixedLocator, NullLocator

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(t) for t in ticks])
    ax.set_xlabel("concurrent requests")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)
    ax.set_ylim(bottom=0)


def _series(rows, field):
    """(concurrency levels, values) of one field, where the rows have it."""
    pts = [(r["concurrency"], r[field]) for r in rows if r.get(field) is not None]
    return [p[0] for p in pts], [p[1] for p in pts]


def _save(plt, fig, path: Path, caption: str) -> None:
    if caption:
        fig.text(0.5, 0.01, caption, ha="center", fontsize=8, color="dimgray")
    fig.tight_layout(rect=(0, 0.04 if caption else 0, 1, 1))
    fig.savefig(path)
    plt.close(fig)


def _plot_throughput(plt, rows, before_rows, ticks, path: Path, caption: str) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    x, y = _series(rows, "output_throughput")
    ax.plot(x, y, marker="o", linewidth=2, color="tab:blue", label="this run")
    for xi, yi in zip(x, y):
        ax.annotate(f"{yi:.3g}", (xi, yi), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=9)
    if before_rows:
        bx, by = _series(before_rows, "output_throughput")
        ax.plot(bx, by, marker="s", linestyle="--", color="tab:gray", label="before")
        ax.legend(loc="lower right")
    _concurrency_axis(ax, "output tokens / s", ticks)
    ax.set_title("Output throughput vs concurrency")
    ax.set_ylim(top=max(y + [0]) * 1.18 or 1)
    _save(plt, fig, path, caption)


def _latency_panel(ax, metric, title, rows, before_rows, slos, ticks) -> None:
    """One latency metric (ttft, itl): p50 and p99 of this run (and before), and its SLO lines."""
    for stat, style in (("p50", {"marker": "o", "color": "tab:blue"}), ("p99", {"marker": "^", "color": "tab:red"})):
        x, y = _series(rows, f"{metric}_{stat}_ms")
        ax.plot(x, y, linewidth=2, label=stat, **style)
        if before_rows:
            bx, by = _series(before_rows, f"{metric}_{stat}_ms")
            ax.plot(bx, by, linestyle="--", alpha=0.6, label=f"{stat} before", marker=style["marker"],
                    color="tab:gray")
    for stat in ("p50", "p90", "p99", "mean"):
        limit = slos.get(f"{metric}_{stat}_ms")
        if limit is not None:
            ax.axhline(limit, color="black", linestyle=":", linewidth=1.2)
            ax.annotate(f"SLO {stat} \u2264 {limit:g} ms", (0.02, limit), xycoords=("axes fraction", "data"),
                        textcoords="offset points", xytext=(0, 4), fontsize=8)
    _concurrency_axis(ax, "milliseconds", ticks)
    ax.set_title(f"{title} (p50 / p99)")
    # headroom above the highest point, so that the legend never sits on a line
    ax.set_ylim(top=max([line_y for line in ax.get_lines() for line_y in line.get_ydata()] + [1]) * 1.25)
    ax.legend(loc="upper left", fontsize=8, ncol=2)


def draw_plots(rows, out: Path, slos: dict, before_rows=None, caption: str = "") -> list[tuple[str, str]]:
    """throughput.png and latency.png; returns [(title, file name)] for the report."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ticks = sorted(set([r["concurrency"] for r in rows] + [r["concurrency"] for r in before_rows or []]))
    _plot_throughput(plt, rows, before_rows, ticks, out / "throughput.png", caption)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), dpi=110)
    for ax, metric, title in ((axes[0], "ttft", "Time to first token"), (axes[1], "itl", "Inter-token latency")):
        _latency_panel(ax, metric, title, rows, before_rows, slos, ticks)
    _save(plt, fig, out / "latency.png", caption)
    return [("Output throughput vs concurrency", "throughput.png"),
            ("Latency vs concurrency: TTFT and ITL, p50 and p99", "latency.png")]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m llmfleet_cli.bench_report",
                                     description="Render a Markdown + PNG report from vllm bench serve results.")
    parser.add_argument("results_dir", help="directory of result JSON files (one per concurrency level) + plan.json")
    parser.add_argument("--out", help="where to write README.md, the PNGs and summary.json (default: RESULTS_DIR)")
    parser.add_argument("--slo", action="append", metavar="NAME=VALUE",
                        help="objective, repeatable: <ttft|tpot|itl|e2el>_<mean|p50|p90|p99>_ms=MAX, "
                             "output_throughput=MIN, failed=MAX (default: ttft_p99_ms=300)")
    parser.add_argument("--plan", help="plan JSON (default: RESULTS_DIR/plan.json when present)")
    parser.add_argument("--compare", metavar="BEFORE_DIR", help="results of an earlier run: print after/before ratios")
    parser.add_argument("--title", default=None, help="report title")
    parser.add_argument("--note", action="append", default=[], help="a line to print under the headline (repeatable)")
    parser.add_argument("--fail-on-slo", action="store_true", help="exit 1 when any level misses an objective")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    bench = _bench()
    results_dir = Path(args.results_dir)
    out = Path(args.out) if args.out else results_dir
    try:
        named = load_results(results_dir)
        rows = bench.rows_from_results(named)
        slos = bench.parse_slos(args.slo) if args.slo else dict(bench.DEFAULT_SLOS)
        plan = plan_with_result_facts(load_plan(results_dir, args.plan), named)
        before_rows = bench.rows_from_results(load_results(Path(args.compare))) if args.compare else None
    except ValueError as exc:  # BenchReportError is a ValueError
        print(f"bench_report: {exc}", file=sys.stderr)
        return 2
    verdicts = bench.slo_verdicts(rows, slos)
    comparison = bench.compare_rows(before_rows, rows) if before_rows is not None else None

    out.mkdir(parents=True, exist_ok=True)
    plots = draw_plots(rows, out, slos, before_rows, caption=plan_caption(plan, rows))
    title = args.title or "Benchmark: %s" % (plan.get("served_model_name") or plan.get("model") or "vLLM")
    report = bench.markdown_report(rows, verdicts, plan=plan, plots=plots, title=title, comparison=comparison,
                                   slos=slos, notes=args.note)
    (out / "README.md").write_text(report, encoding="utf-8")
    summary = {"plan": plan, "slos": slos, "rows": rows, "verdicts": verdicts, "comparison": comparison}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")

    print(f"report: {out / 'README.md'}")
    passing = verdicts["max_concurrency_passing"]
    print("SLOs: " + ("all levels pass" if verdicts["all_pass"] else
                      f"met up to concurrency {passing}" if passing is not None else "missed at every level"))
    if comparison is not None:
        print(bench.comparison_text(comparison))
    return 1 if args.fail_on_slo and not verdicts["all_pass"] else 0


if __name__ == "__main__":
    sys.exit(main())
