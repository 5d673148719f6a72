#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Documentation only: the work is done by the action plugin plugins/action/model_fetch_wait.py (controller side).
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: model_fetch_wait
version_added: "1.0.0"
short_description: Follow a background model_fetch job, printing its progress, and return its result
description:
  - Controller-side action for the C(model_weights) role. Use after C(llmfleet.vllm.model_fetch) ran with
    C(async) and C(poll=0).
  - Every O(poll_interval) seconds it reads the job status and model_fetch's progress JSON on the host and prints
    one line (bytes, percent, rate, ETA) when it changed; when the job ends it returns model_fetch's result.
options:
  jid:
    description: The C(ansible_job_id) of the started model_fetch.
    type: str
    required: true
  progress_file:
    description: model_fetch's O(llmfleet.vllm.model_fetch#module:progress_file) (default C(<dest parent>/.<dest name>.progress.json)).
    type: path
    required: true
  poll_interval:
    description: Seconds between polls.
    type: int
    default: 10
  timeout:
    description: Give up (and fail) after this many seconds; the background job keeps running.
    type: int
    default: 14400
author:
  - llmfleet maintainers (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.vllm.attributes
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
  - ansible.builtin.action_common_attributes.flow
attributes:
  check_mode:
    support: full
    details: It only reads the job's status and progress.
  action:
    support: full
    details: The whole module is an action plugin that runs on the controller and polls the host.
  async:
    support: none
  bypass_host_loop:
    support: none
"""

EXAMPLES = r"""
- name: Start model_fetch in the background
  llmfleet.vllm.model_fetch:
    source: hf
    repo_id: Qwen/Qwen3.5-35B-A3B
    dest: /srv/llmfleet/models/qwen
  async: 14400
  poll: 0
  register: job

- name: Follow it
  llmfleet.vllm.model_fetch_wait:
    jid: "{{ job.ansible_job_id }}"
    progress_file: /srv/llmfleet/models/.qwen.progress.json
"""

RETURN = r"""
polls:
  description: How many times the job was polled. All other keys are model_fetch's own RETURN values.
  returned: always
  type: int
"""
