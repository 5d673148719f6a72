# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark results of ``vllm bench serve`` -> table rows, SLO verdicts, run-to-run ratios, Markdown.

Pure functions only (no file or network access): the report CLI (plugins/cli/bench_report.py) reads
the files and draws the plots; the benchmark role writes the files.

A result is the JSON document ``vllm bench serve --save-result`` writes (vllm/benchmarks/serve.py):
top-level ``max_concurrency``, ``num_prompts``, ``completed``, ``failed``, ``duration``,
``request_throughput``, ``output_throughput``, ``total_token_throughput`` and per metric
(ttft, tpot, itl, e2el) ``mean_<m>_ms``, ``median_<m>_ms``, ``std_<m>_ms``, ``p<N>_<m>_ms`` for the
percentiles asked with ``--metric-percentiles``; ``--metadata k=v`` pairs are top-level keys too.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math

METRICS = ("ttft", "tpot", "itl", "e2el")
METRIC_TITLES = {
    "ttft": "time to first token",
    "tpot": "time per output token",
    "itl": "inter-token latency",
    "e2el": "end-to-end latency",
}
STATS = ("mean", "p50", "p90", "p99")
THROUGHPUT_FIELDS = ("request_throughput", "output_throughput", "total_token_throughput")
# The seed's health rule of thumb ("first token under 300 ms is healthy"), as a p99 objective.
DEFAULT_SLOS = {"ttft_p99_ms": 300.0}
# Fields the comparison reports, with the direction that counts as better.
COMPARE_FIELDS = (
    ("output_throughput", "higher"),
    ("request_throughput", "higher"),
    ("ttft_p50_ms", "lower"),
    ("ttft_p99_ms", "lower"),
    ("tpot_p50_ms", "lower"),
    ("tpot_p99_ms", "lower"),
    ("itl_p50_ms", "lower"),
    ("itl_p99_ms", "lower"),
    ("e2el_p99_ms", "lower"),
)


class BenchReportError(ValueError):
    """A result file or an objective that cannot be used, with what to do about it."""


def _number(value):
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _stat(result, metric, stat):
    if stat == "mean":
        return _number(result.get("mean_%s_ms" % metric))
    if stat == "p50":
        value = _number(result.get("p50_%s_ms" % metric))
        return value if value is not None else _number(result.get("median_%s_ms" % metric))
    return _number(result.get("%s_%s_ms" % (stat, metric)))


def result_row(result, source="result"):
    """One table row (a flat dict) from one ``vllm bench serve`` result document.

    Raises BenchReportError when the document is not a bench serve result or lacks TTFT/ITL
    percentiles (the role passes --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99).
    """
    if not isinstance(result, dict):
        raise BenchReportError("%s: not a JSON object" % source)
    missing = [k for k in ("completed", "num_prompts", "duration", "output_throughput") if k not in result]
    if missing:
        raise BenchReportError(
            "%s: not a `vllm bench serve --save-result` document (missing %s)" % (source, ", ".join(missing))
        )
    concurrency = result.get("max_concurrency")
    if concurrency is None:
        # No --max-concurrency: all prompts were in flight at once.
        concurrency = result.get("num_prompts")
    row = {
        "source": source,
        "concurrency": int(concurrency),
        "num_prompts": int(result["num_prompts"]),
        "completed": int(result.get("completed") or 0),
        "failed": int(result.get("failed") or 0),
        "duration_s": _number(result.get("duration")),
        "input_len": _number(result.get("input_len")),
        "output_len": _number(result.get("output_len")),
        "total_input_tokens": result.get("total_input_tokens"),
        "total_output_tokens": result.get("total_output_tokens"),
        "date": result.get("date"),
    }
    for field in THROUGHPUT_FIELDS:
        row[field] = _number(result.get(field))
    for metric in METRICS:
        for stat in STATS:
            row["%s_%s_ms" % (metric, stat)] = _stat(result, metric, stat)
    absent = [m for m in ("ttft", "itl") if row["%s_p99_ms" % m] is None or row["%s_p50_ms" % m] is None]
    if absent and row["completed"]:
        raise BenchReportError(
            "%s: no p50/p99 for %s; run vllm bench serve with --percentile-metrics ttft,tpot,itl,e2el "
            "--metric-percentiles 50,90,99" % (source, ", ".join(absent))
        )
    return row


def rows_from_results(named_results):
    """Rows sorted by concurrency from [(source_name, result_document), ...].

    One result per concurrency level: two for the same level mean two runs were mixed in one
    directory, and a table of them would mislead.
    """
    rows = [result_row(result, source) for source, result in named_results]
    if not rows:
        raise BenchReportError("no benchmark results found (expected vllm bench serve result JSON files)")
    seen = {}
    for row in rows:
        if row["concurrency"] in seen:
            raise BenchReportError(
                "two results for concurrency %d (%s and %s): keep one run per results directory"
                % (row["concurrency"], seen[row["concurrency"]], row["source"])
            )
        seen[row["concurrency"]] = row["source"]
    return sorted(rows, key=lambda r: r["concurrency"])


def parse_slos(items):
    """SLOs from ``name=value`` strings or a dict: ``<metric>_<stat>_ms`` (ttft_p99_ms=300: at most),
    ``output_throughput`` / ``request_throughput`` / ``total_token_throughput`` (at least),
    ``failed`` (at most this many failed requests)."""
    pairs = items.items() if isinstance(items, dict) else [str(i).split("=", 1) for i in items]
    slos = {}
    for pair in pairs:
        if len(pair) != 2:
            raise BenchReportError("SLO %r: write it as name=value, e.g. ttft_p99_ms=300" % "=".join(pair))
        name, value = str(pair[0]).strip(), _number(pair[1])
        if value is None or value < 0:
            raise BenchReportError("SLO %s: %r is not a non-negative number" % (name, pair[1]))
        if slo_direction(name) is None:
            raise BenchReportError(
                "SLO %s: unknown objective; use <metric>_<stat>_ms with metric in %s and stat in %s, "
                "one of %s, or failed" % (name, "/".join(METRICS), "/".join(STATS), "/".join(THROUGHPUT_FIELDS))
            )
        slos[name] = value
    return slos


def slo_direction(name):
    """'max' when the objective is an upper bound, 'min' when a lower bound, None when unknown."""
    if name in THROUGHPUT_FIELDS:
        return "min"
    if name == "failed":
        return "max"
    parts = name.split("_")
    if len(parts) == 3 and parts[0] in METRICS and parts[1] in STATS and parts[2] == "ms":
        return "max"
    return None


def slo_verdicts(rows, slos):
    """Per concurrency level, each objective's value and whether it holds; plus the overall picture.

    Returns {"levels": [{"concurrency", "pass", "checks": [{"slo", "limit", "direction", "value", "pass"}]}],
    "max_concurrency_passing": the highest level at and below which every level passes (None if the
    first fails), "all_pass": bool}. A level with failed requests never passes: its latencies describe
    only the requests that succeeded.
    """
    levels = []
    for row in rows:
        checks = []
        for name in sorted(slos):
            limit = slos[name]
            direction = slo_direction(name)
            value = row.get(name)
            if value is None:
                ok = False
            elif direction == "max":
                ok = value <= limit
            else:
                ok = value >= limit
            checks.append({"slo": name, "limit": limit, "direction": direction, "value": value, "pass": ok})
        if row["failed"] and "failed" not in slos:
            checks.append({"slo": "failed", "limit": 0, "direction": "max", "value": row["failed"], "pass": False})
        levels.append({"concurrency": row["concurrency"], "pass": all(c["pass"] for c in checks), "checks": checks})
    passing = None
    for level in levels:
        if not level["pass"]:
            break
        passing = level["concurrency"]
    return {
        "levels": levels,
        "max_concurrency_passing": passing,
        "all_pass": bool(levels) and all(level["pass"] for level in levels),
    }


def _ratio(after, before):
    if after is None or before is None or before == 0:
        return None
    return after / before


def compare_rows(before_rows, after_rows):
    """Ratios after/before for each concurrency level both runs measured.

    Each entry: {"concurrency", "fields": [{"field", "before", "after", "ratio", "better": bool|None}]}.
    Levels present in only one run are listed under "only_before" / "only_after".
    """
    before = dict((r["concurrency"], r) for r in before_rows)
    after = dict((r["concurrency"], r) for r in after_rows)
    common = sorted(set(before) & set(after))
    levels = []
    for level in common:
        fields = []
        for field, better_when in COMPARE_FIELDS:
            b, a = before[level].get(field), after[level].get(field)
            ratio = _ratio(a, b)
            better = None
            if ratio is not None and ratio != 1:
                better = ratio > 1 if better_when == "higher" else ratio < 1
            fields.append({"field": field, "before": b, "after": a, "ratio": ratio, "better": better,
                           "better_when": better_when})
        levels.append({"concurrency": level, "fields": fields})
    return {
        "levels": levels,
        "only_before": sorted(set(before) - set(after)),
        "only_after": sorted(set(after) - set(before)),
    }


# ---------------------------------------------------------------------------------------------
# Text rendering
# ---------------------------------------------------------------------------------------------
def fmt(value, digits=1):
    """A number for a table cell; an em dash when unknown."""
    if value is None:
        return "\u2014"
    if isinstance(value, float) and value.is_integer() and digits == 0:
        return "%d" % value
    return "%.*f" % (digits, value)


def _fmt_sig(value):
    return "\u2014" if value is None else "%.4g" % value


def _fmt_ratio(ratio):
    return "\u2014" if ratio is None else "%.2fx" % ratio


def markdown_table(header, rows, align=None):
    align = align or ["---:"] * len(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines)


def results_table(rows):
    header = ["concurrency", "requests ok/sent", "output tok/s", "req/s", "TTFT p50 ms", "TTFT p99 ms",
              "TPOT p50 ms", "TPOT p99 ms", "ITL p50 ms", "ITL p99 ms", "E2E p99 s"]
    body = []
    for r in rows:
        e2e = r["e2el_p99_ms"]
        body.append([
            r["concurrency"], "%d/%d" % (r["completed"], r["num_prompts"]),
            fmt(r["output_throughput"]), fmt(r["request_throughput"], 2),
            fmt(r["ttft_p50_ms"]), fmt(r["ttft_p99_ms"]), fmt(r["tpot_p50_ms"]), fmt(r["tpot_p99_ms"]),
            fmt(r["itl_p50_ms"]), fmt(r["itl_p99_ms"]), fmt(None if e2e is None else e2e / 1000.0, 2),
        ])
    return markdown_table(header, body)


def _slo_text(check):
    unit = "" if check["slo"] in THROUGHPUT_FIELDS or check["slo"] == "failed" else " ms"
    op = "\u2264" if check["direction"] == "max" else "\u2265"
    return "%s %s %s%s" % (check["slo"], op, fmt(check["limit"], 0 if float(check["limit"]).is_integer() else 1), unit)


def verdicts_table(verdicts):
    if not verdicts["levels"]:
        return "_no levels measured_"
    names = [_slo_text(c) for c in verdicts["levels"][0]["checks"]]
    extra = sorted(set(_slo_text(c) for lv in verdicts["levels"] for c in lv["checks"]) - set(names))
    names += extra
    body = []
    for level in verdicts["levels"]:
        cells = dict((_slo_text(c), c) for c in level["checks"])
        row = [level["concurrency"]]
        for name in names:
            check = cells.get(name)
            if check is None:
                row.append("")
            else:
                row.append("%s (%s)" % ("PASS" if check["pass"] else "**FAIL**", fmt(check["value"])))
        row.append("PASS" if level["pass"] else "**FAIL**")
        body.append(row)
    return markdown_table(["concurrency"] + names + ["verdict"], body)


def comparison_table(comparison):
    body = []
    for level in comparison["levels"]:
        for f in level["fields"]:
            mark = "" if f["better"] is None else ("better" if f["better"] else "worse")
            body.append([level["concurrency"], f["field"], _fmt_sig(f["before"]), _fmt_sig(f["after"]),
                         _fmt_ratio(f["ratio"]), mark])
    return markdown_table(["concurrency", "metric", "before", "after", "after/before", ""], body,
                          ["---:", ":---", "---:", "---:", "---:", ":---"])


PLAN_FIELDS = (
    ("image", "Image"),
    ("model", "Model"),
    ("served_model_name", "Served model name"),
    ("accelerator", "Accelerator"),
    ("tensor_parallel_size", "Tensor parallel (TP)"),
    ("data_parallel_size", "Data parallel (DP)"),
    ("replicas", "Replicas"),
    ("layout", "Layout"),
    ("key_flags", "Key server flags"),
    ("target", "Benchmarked endpoint"),
    ("backend", "Bench backend / endpoint"),
    ("dataset", "Workload"),
    ("concurrency", "Concurrency sweep"),
    ("benchmarked_from", "Client ran on"),
    ("date", "Measured"),
    ("run_id", "Run id"),
)


def flags_text(vllm_args):
    """vLLM flags as the plan holds them (a dict: True -> --flag, False -> --no-flag, None -> omitted,
    dict -> JSON, list -> repeated) or an argv list, as one line."""
    if isinstance(vllm_args, (list, tuple)):
        return " ".join(str(v) for v in vllm_args)
    if not isinstance(vllm_args, dict):
        return str(vllm_args)
    words = []
    for key in sorted(vllm_args):
        value = vllm_args[key]
        flag = "--" + str(key).replace("_", "-")
        if value is None:
            continue
        if value is True:
            words.append(flag)
        elif value is False:
            words.append("--no-" + flag[2:])
        elif isinstance(value, dict):
            words += [flag, json.dumps(value, sort_keys=True, separators=(",", ":"))]
        elif isinstance(value, (list, tuple)):
            for item in value:
                words += [flag, str(item)]
        else:
            words += [flag, str(value)]
    return " ".join(words)


def plan_lines(plan):
    lines = []
    for key, title in PLAN_FIELDS:
        value = plan.get(key)
        if value in (None, "", [], {}):
            continue
        if key == "key_flags":
            value = flags_text(value)
        if isinstance(value, (list, tuple)):
            value = " ".join(str(v) for v in value)
        lines.append("| %s | `%s` |" % (title, str(value).replace("|", "\\|")))
    other = sorted(k for k in plan if k not in dict(PLAN_FIELDS))
    for key in other:
        value = plan[key]
        if isinstance(value, (dict, list)):
            continue
        lines.append("| %s | `%s` |" % (key, str(value).replace("|", "\\|")))
    if not lines:
        return "_no plan recorded with these results_"
    return "\n".join(["| | |", "|:---|:---|"] + lines)


def markdown_report(rows, verdicts, plan=None, plots=(), title="Benchmark report", comparison=None,
                    slos=None, notes=()):
    """The whole report as Markdown. plots: [(title, relative_png_path), ...]."""
    plan = plan or {}
    out = ["# %s" % title, ""]
    if plan.get("date") or rows and rows[0].get("date"):
        out += ["Measured %s with `vllm bench serve`." % (plan.get("date") or rows[0]["date"]), ""]
    passing = verdicts["max_concurrency_passing"]
    if verdicts["all_pass"]:
        headline = "**Every concurrency level met its objectives** (up to %d concurrent requests)." % rows[-1]["concurrency"]
    elif passing is None:
        headline = "**The objectives were not met even at the lowest concurrency (%d).**" % rows[0]["concurrency"]
    else:
        headline = "**Objectives met up to concurrency %d**; higher levels miss them (see the verdicts)." % passing
    out += [headline, ""]
    for note in notes:
        out += ["> %s" % note, ""]
    out += ["## The deployment measured", "", plan_lines(plan), ""]
    out += ["## Results", "", results_table(rows), "",
            "TTFT: time to first token. TPOT: time per output token after the first. ITL: time between "
            "consecutive streamed tokens. E2E: whole request. Percentiles are over the requests of one level.", ""]
    out += ["## SLO verdicts", ""]
    if slos:
        out += ["Objectives: " + ", ".join("`%s`" % _slo_text({"slo": k, "limit": v, "direction": slo_direction(k)})
                                           for k, v in sorted(slos.items())) + ".", ""]
    out += [verdicts_table(verdicts), ""]
    for plot_title, path in plots:
        out += ["## %s" % plot_title, "", "![%s](%s)" % (plot_title, path), ""]
    if comparison is not None:
        out += ["## Compared with the previous run", ""]
        if comparison["levels"]:
            out += [comparison_table(comparison), ""]
        else:
            out += ["_the two runs share no concurrency level_", ""]
        if comparison["only_before"] or comparison["only_after"]:
            out += ["Levels measured in only one run: before %s, after %s." % (
                comparison["only_before"] or "none", comparison["only_after"] or "none"), ""]
    return "\n".join(out).rstrip() + "\n"


def comparison_text(comparison):
    """Plain-text ratios for a terminal."""
    lines = []
    for level in comparison["levels"]:
        lines.append("concurrency %d" % level["concurrency"])
        for f in level["fields"]:
            mark = "" if f["better"] is None else ("  better" if f["better"] else "  WORSE")
            lines.append("  %-20s %12s -> %12s  %8s%s" % (f["field"], _fmt_sig(f["before"]), _fmt_sig(f["after"]),
                                                          _fmt_ratio(f["ratio"]), mark))
    if comparison["only_before"] or comparison["only_after"]:
        lines.append("levels in only one run: before %s, after %s" % (comparison["only_before"], comparison["only_after"]))
    return "\n".join(lines)
