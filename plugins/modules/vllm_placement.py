#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_placement
short_description: Place all of a host's models (llmfleet_models) on its GPUs in one plan (changes nothing)
version_added: "1.1.0"
description:
  - Checks C(llmfleet_models) (the llmfleet.vllm.model_list filter's rules, with the host's GPU count), plans each
    model with the planner (llmfleet.vllm.vllm_plan's arithmetic, from each model's own config.json) and places them
    together on the GPUs of one host, real (I(gpu_facts)) or described (I(hardware)).
  - "Whole GPUs first, largest model first: tensor-parallel groups inside one NVLink island (NUMA node over PCIe);
    C(gpus) of an entry are honoured and checked. Then C(gpu_share) entries, then packing: a model that found no free
    GPU and fits one GPU shares a GPU with the smallest share that holds it, the tenant it joins re-planned with the
    rest. The shares of a GPU never exceed its budget (CUDA memory x I(gpu_memory_utilization)); each co-tenant
    plans with its share less a per-process CUDA-context headroom (1 GiB) and gets C(kv_cache_memory_bytes)
    (vLLM's --kv-cache-memory-bytes); co-tenants start one after another (C(start_after))."
  - One entry without gpus or gpu_share is planned as a one-model host is today (one llmfleet.vllm.vllm_plan).
  - "A list that does not fit is returned with C(placement.fits) false and C(placement.problems), each naming the
    model, by how much it misses, and what would fit (the planner's suggestions: a shorter context, a smaller
    checkpoint of the family; fewer replicas; a host with room)."
  - Runs on the Ansible controller (action plugin); touches no host.
options:
  models:
    description: C(llmfleet_models) (see the llmfleet.vllm.model_list filter for the keys of an entry).
    type: list
    elements: raw
    required: true
  gpu_facts:
    description: One host's C(gpu_facts) (from llmfleet.vllm.gpu_facts).
    type: raw
  gpu_facts_file:
    description: A JSON or YAML file holding one host's C(gpu_facts).
    type: path
  hardware:
    description: Described hardware, as llmfleet.vllm.vllm_plan's I(hardware) (e.g. C(8x H100 SXM)).
    type: raw
  hardware_label:
    description: The hardware's name in the table (default the I(hardware) string, else the GPU count and name).
    type: str
  objective:
    description: The planner's objective for every model.
    type: str
    choices: [throughput, latency]
    default: throughput
  max_model_len:
    description: The context of an entry that sets no C(max_model_len); unset, the model's native context.
    type: int
  gpu_memory_utilization:
    description: Each GPU's budget, a fraction of its CUDA memory (the shares of a GPU are fractions of it).
    type: float
    default: 0.9
  vllm_version:
    description: The vLLM version that will serve (a model newer than it does not fit).
    type: str
  hub_source:
    description: The hub a repo id is read from.
    type: str
    choices: [hf, modelscope]
    default: hf
  hub_endpoint:
    description: A mirror of the hub.
    type: str
  hub_revision:
    description: The revision of an entry that sets no C(revision).
    type: str
  hub_token:
    description: Hub token (gated repos).
    type: str
  metadata_cache_dir:
    description: Where the hub's config.json files are cached on the controller.
    type: path
    default: ~/.cache/llmfleet/hub-metadata
  profiles_path:
    description: More directories of model profiles.
    type: list
    elements: path
    default: []
  fail_if_not_fits:
    description: Fail, with every problem, when the list does not fit.
    type: bool
    default: false
author: llmfleet maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Place the inventory's models on described hardware
  llmfleet.vllm.vllm_placement:
    models: "{{ llmfleet_models }}"
    hardware: 8x H100 SXM
    max_model_len: 32768
  register: placed
"""

RETURN = r"""
placement:
  description:
    - C(fits), C(problems) (sentences), C(instances) (each C(model), C(instance), C(gpus), C(tensor_parallel_size),
      C(share) of its GPUs' budget, C(shared), C(gpu_memory_utilization), C(kv_cache_memory_bytes) per GPU,
      C(kv_cache_tokens), C(max_concurrency), C(max_num_seqs), C(max_model_len), C(runner), C(start_after),
      C(vllm_args)), C(gpus) (each C(index), C(budget_bytes), C(tenants), C(share_used)), C(start_order),
      C(budget), C(cuda_context_headroom_bytes).
  returned: always
  type: dict
table_header:
  description: The Markdown header of the placement table.
  returned: always
  type: str
table_rows:
  description: One Markdown row per instance (GPUs, model, instance, share, memory, concurrency), then per refusal.
  returned: always
  type: list
  elements: str
"""

ARGUMENT_SPEC = dict(
    models=dict(type="list", elements="raw", required=True),
    gpu_facts=dict(type="raw"),
    gpu_facts_file=dict(type="path"),
    hardware=dict(type="raw"),
    hardware_label=dict(type="str"),
    objective=dict(type="str", choices=["throughput", "latency"], default="throughput"),
    max_model_len=dict(type="int"),
    gpu_memory_utilization=dict(type="float", default=0.9),
    vllm_version=dict(type="str"),
    hub_source=dict(type="str", choices=["hf", "modelscope"], default="hf"),
    hub_endpoint=dict(type="str"),
    hub_revision=dict(type="str"),
    hub_token=dict(type="str", no_log=True),
    metadata_cache_dir=dict(type="path", default="~/.cache/llmfleet/hub-metadata"),
    profiles_path=dict(type="list", elements="path", default=[]),
    fail_if_not_fits=dict(type="bool", default=False),
)
MUTUALLY_EXCLUSIVE = [("gpu_facts", "gpu_facts_file", "hardware")]
REQUIRED_ONE_OF = [("gpu_facts", "gpu_facts_file", "hardware")]

from ansible.module_utils.basic import AnsibleModule  # noqa: E402


def main():
    # The placement runs on the controller in the action plugin of the same name.
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, mutually_exclusive=MUTUALLY_EXCLUSIVE,
                           required_one_of=REQUIRED_ONE_OF, supports_check_mode=True)
    module.fail_json(msg="llmfleet.vllm.vllm_placement runs on the controller through its action plugin")


if __name__ == "__main__":
    main()
