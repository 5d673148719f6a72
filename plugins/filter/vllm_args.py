# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters that render vLLM flag dicts (see plugins/module_utils/checks/vllm_args.py)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.input_checks import port_problems
from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent.conventions import REPLICA_PORT_BASE
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_args import (
    VllmArgsError,
    argv_groups,
    merge_vllm_args,
    render_vllm_args,
    replica_specs,
)

# Each filter's documentation: plugins/filter/<filter name>.yml.


def vllm_argv(flags):
    try:
        return render_vllm_args(flags)
    except VllmArgsError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def vllm_args_merge(base, *overrides):
    try:
        return merge_vllm_args(base, *overrides)
    except VllmArgsError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def vllm_replicas(plan_replicas, accelerator="gpu", port_base=REPLICA_PORT_BASE):
    try:
        return replica_specs(plan_replicas, accelerator, port_base)
    except VllmArgsError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def replica_port_problems(replicas, edge=True, offset=0, replicas_var="vllm_server_port_base"):
    return port_problems(replicas, edge=edge, offset=offset, replicas_var=replicas_var)


class FilterModule:
    def filters(self):
        return {"vllm_argv": vllm_argv, "vllm_args_merge": vllm_args_merge,
                "vllm_replicas": vllm_replicas,
                "vllm_argv_groups": argv_groups, "replica_port_problems": replica_port_problems}
