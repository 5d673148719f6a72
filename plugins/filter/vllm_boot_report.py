# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The vllm_boot_report filter: vLLM's boot log beside the plan (plugins/plugin_utils/planner/vllm_bootlog.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: vllm_boot_report
author: llmfleet maintainers (!UNKNOWN)
version_added: 1.0.0
short_description: Compare vLLM's boot log with the plan (KV cache memory, tokens, maximum concurrency).
description:
  - Parses what vLLM logs at start-up (C(Available KV cache memory), C(GPU KV cache size),
    C(Maximum concurrency for N tokens per request)) and puts each number beside the plan's.
  - A gap larger than O(tolerance) is a warning that carries both numbers.
options:
  _input:
    description: The replica's boot log (e.g. C(docker logs) of its container).
    type: str
    required: true
  plan:
    description: The plan (the host fact C(llmfleet_plan) that preflight set).
    type: dict
    required: true
  tolerance:
    description: Relative gap above which a number is reported as a warning.
    type: float
    default: 0.03
"""

EXAMPLES = r"""
- name: Compare the plan with what vLLM reports
  ansible.builtin.debug:
    msg: "{{ boot_log.stdout | llmfleet.vllm.vllm_boot_report(llmfleet_plan) }}"
"""

RETURN = r"""
_value:
  description:
    - C(ok) is true when every number is within the tolerance, false when one is not, null when the log has no
      KV cache lines (an engine without them, or a plan without numbers).
    - C(summary) is one line; C(warnings) one line per gap, each with the planned and the logged number;
      C(items) each number as name, planned, actual, unit, ratio and ok.
  type: dict
"""

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import vllm_bootlog


def vllm_boot_report(text, plan, tolerance=vllm_bootlog.DEFAULT_TOLERANCE):
    plan = dict(plan or {})
    if plan.get("max_concurrency") in (None, 0, 0.0):
        return {"ok": None, "summary": "the plan has no KV cache numbers to compare", "warnings": [], "items": []}
    return vllm_bootlog.compare_with_plan(vllm_bootlog.parse_boot_log(text or ""), plan, float(tolerance))


class FilterModule(object):
    def filters(self):
        return {"vllm_boot_report": vllm_boot_report}
