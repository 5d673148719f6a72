# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters for one model over several hosts; the logic lives in plugins/module_utils/host_agent/multinode.py."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent import multinode

# Each filter's documentation: plugins/filter/<filter name>.yml.


def multinode_layout(hosts, hostname, addresses=None, group="", leader_address=None):
    if not group:
        return multinode.single_layout(hostname)
    try:
        return multinode.group_layout(list(hosts or []), str(hostname), dict(addresses or {}), group, leader_address)
    except multinode.MultinodeError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def multinode_addresses(hosts, hostvars):
    return multinode.group_addresses(list(hosts or []), hostvars)


def multinode_args(layout, master_port=29500, accelerator="gpu", plan=None, backend="mp"):
    tensor_parallel_size, pipeline_parallel_size = multinode.plan_sizes(layout, plan)
    try:
        return multinode.rank_args(layout, master_port, accelerator, tensor_parallel_size,
                                   pipeline_parallel_size, backend)
    except multinode.MultinodeError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def multinode_ray(layout, backend="mp", ray_port=6379):
    try:
        return multinode.ray_commands(layout, backend or "mp", ray_port)
    except (multinode.MultinodeError, TypeError, ValueError) as exc:
        raise AnsibleFilterError(str(exc)) from exc


def multinode_ray_problems(probe, image, accelerator="gpu"):
    probe = dict(probe or {})
    return multinode.ray_problems(image, probe.get("rc", 1), probe.get("stderr", ""), accelerator)


def multinode_env(layout, interface="", accelerator="gpu"):
    return multinode.rank_env(layout, interface or "", accelerator)


def multinode_problems(layout, replicas, user_args=None, interface="", accelerator="gpu", master_port=29500,
                       plan=None, play_batch=None):
    return multinode.group_problems(layout, list(replicas or []), dict(user_args or {}), interface or "",
                                    accelerator, master_port, plan=dict(plan or {}),
                                    play_batch=None if play_batch is None else list(play_batch))


class FilterModule:
    def filters(self):
        return {"multinode_layout": multinode_layout, "multinode_args": multinode_args,
                "multinode_env": multinode_env, "multinode_ray": multinode_ray,
                "multinode_ray_problems": multinode_ray_problems,
                "multinode_addresses": multinode_addresses, "multinode_problems": multinode_problems}
