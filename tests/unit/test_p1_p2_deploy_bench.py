"""The deploy benchmark (tests/bench/p1_p2_deploy.py): a cold run against the work it cannot avoid (issue #39 item 9
compares the fixed overhead of one model's cold deploy with three models')."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import p1_p2_deploy  # noqa: E402


def test_one_engine_the_pull_and_weights_overlap_and_the_rest_is_overhead():
    out = p1_p2_deploy.cold_breakdown(84.2, 41.9, 9.7, [(100.0, 118.3)])
    assert out["unavoidable_s"] == 60.2 and out["overhead_s"] == 24.0 and out["P1"] == 1.4
    assert (out["engines"], out["engines_start_s"]) == (1, 18.3)


def test_engines_count_from_the_first_start_to_the_last_health_whether_they_overlap_or_follow():
    at_once = p1_p2_deploy.cold_breakdown(136.0, 12.0, 20.0, [(10.0, 62.0), (11.0, 71.0), (12.0, 70.0)])
    assert at_once["engines_start_s"] == 61.0 and at_once["unavoidable_s"] == 81.0
    in_order = p1_p2_deploy.cold_breakdown(136.0, 12.0, 20.0, [(10.0, 30.0), (31.0, 50.0), (51.0, 70.0)])
    assert in_order["engines_start_s"] == 60.0 and in_order["overhead_s"] == 56.0


def test_without_a_started_engine_only_the_pull_or_weights_count():
    out = p1_p2_deploy.cold_breakdown(50.0, 30.0, 10.0, [])
    assert out["engines"] == 0 and out["unavoidable_s"] == 30.0 and out["P1"] == pytest.approx(1.67)
