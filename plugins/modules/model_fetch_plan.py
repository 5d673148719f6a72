#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: model_fetch_plan
short_description: Check every model directory of a host in one call, as model_fetch's check mode does for one
version_added: "1.1.0"
description:
  - The C(model_weights) role runs it once per host for all models of C(llmfleet_models) and their adapters, so that
    a re-run that finds every directory complete pays for one task, whatever the number of models; only the items
    it finds incomplete go through M(llmfleet.vllm.model_fetch).
  - For an item the host can check on its own (a hub repository, a directory or archive already on the host) it
    runs M(llmfleet.vllm.model_fetch)'s plan (its check mode, the hub's metadata only), with the same verdict.
  - For an upload from the controller (O(items[].upload)) it returns the directory's marker and what an interrupted
    placement left beside it; the role compares them with the controller's files.
  - Also reads the JSON files of O(read) (the role's record of the models it placed, the serve role's serving.json).
  - Changes nothing.
options:
  items:
    description: One entry per model directory.
    type: list
    elements: dict
    required: true
    suboptions:
      key:
        description: The item's name in the result (a model's served name, C(<model>:<adapter>) for an adapter).
        type: str
        required: true
      dest:
        description: The model directory on the host.
        type: path
        required: true
      kind:
        description: C(model) or C(adapter) (O(llmfleet.vllm.model_fetch#module:kind)).
        type: str
        choices: [model, adapter]
        default: model
      upload:
        description: The directory comes from the controller; only its marker and leftovers are read.
        type: bool
        default: false
      source:
        description: hf | modelscope | local | archive.
        type: str
        choices: [hf, modelscope, local, archive]
        default: hf
      repo_id:
        description: Hub repository owner/name.
        type: str
      revision:
        description: Branch, tag or commit.
        type: str
      local_path:
        description: A model directory on the host (source local).
        type: path
      archive_path:
        description: A tar archive on the host (source archive).
        type: path
      allow_patterns:
        description: fnmatch patterns of files to fetch.
        type: list
        elements: str
        default: []
      ignore_patterns:
        description: fnmatch patterns of files to skip.
        type: list
        elements: str
        default: []
  token:
    description: Hub token for every hub item (never logged).
    type: str
  endpoint:
    description: Hub or mirror URL for every hub item.
    type: str
  space_margin:
    description: Free space needed = bytes to fetch x margin (an item that does not fit fails the task).
    type: float
    default: 1.05
  require_ssd:
    description: Fail when a directory is on a rotational disk.
    type: bool
    default: false
  environment:
    description: prod | dev (prod warns about a revision that is not a commit).
    type: str
    choices: [prod, dev]
    default: dev
  verify_existing:
    description: Re-hash every existing directory.
    type: bool
    default: false
  max_workers:
    description: Parallel hashes.
    type: int
    default: 8
  read:
    description: JSON files on the host to return under RV(files) (C(null) for one that is missing or not JSON).
    type: list
    elements: path
    default: []
author:
  - llmfleet maintainers (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.vllm.attributes
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  check_mode:
    support: full
    details: Reads only; the same result in check mode.
"""

EXAMPLES = r"""
- name: Check every model directory of the host
  llmfleet.vllm.model_fetch_plan:
    items:
      - {key: chat, source: hf, repo_id: Qwen/Qwen3-8B, dest: /srv/llmfleet/models/chat}
      - {key: embed, source: hf, repo_id: Qwen/Qwen3-Embedding-0.6B, dest: /srv/llmfleet/models/embed}
    endpoint: http://hf-mirror.internal:8090
    read: [/etc/llmfleet/model_weights.json]
  register: plans
"""

RETURN = r"""
items:
  description:
    - One state per item, in order - C(key), C(dest), C(kind), C(changed) (the directory needs work), C(msg), and
      from the plan C(files_total), C(bytes_total), C(files_to_fetch) (a count), C(bytes_to_fetch), C(free_bytes),
      C(commit), C(revision); for an upload C(marker) (C(identity), C(files)) and C(leftovers).
  returned: success
  type: list
  elements: dict
files:
  description: The files of O(read), parsed ({path - content or null}).
  returned: success
  type: dict
"""

import traceback

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights.fetch_place import FetchError
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights.fetch_plans import plan_items, read_state_files

ITEM_SPEC = dict(
    key=dict(type="str", required=True, no_log=False),  # a served name, not a secret
    dest=dict(type="path", required=True),
    kind=dict(type="str", choices=["model", "adapter"], default="model"),
    upload=dict(type="bool", default=False),
    source=dict(type="str", choices=["hf", "modelscope", "local", "archive"], default="hf"),
    repo_id=dict(type="str"),
    revision=dict(type="str"),
    local_path=dict(type="path"),
    archive_path=dict(type="path"),
    allow_patterns=dict(type="list", elements="str", default=[]),
    ignore_patterns=dict(type="list", elements="str", default=[]),
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            items=dict(type="list", elements="dict", required=True, options=ITEM_SPEC),
            token=dict(type="str", no_log=True),
            endpoint=dict(type="str"),
            space_margin=dict(type="float", default=1.05),
            require_ssd=dict(type="bool", default=False),
            environment=dict(type="str", choices=["prod", "dev"], default="dev"),
            verify_existing=dict(type="bool", default=False),
            max_workers=dict(type="int", default=8),
            read=dict(type="list", elements="path", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    shared = dict((k, p[k]) for k in ("token", "endpoint", "space_margin", "require_ssd", "environment",
                                      "verify_existing", "max_workers"))
    try:
        states = plan_items(p["items"], shared, warn=module.warn)
    except FetchError as e:
        module.fail_json(msg=str(e))
    except Exception as e:  # a hub or OS error: say which, keep the traceback for -vvv
        module.fail_json(msg="model_fetch_plan failed: %s: %s" % (type(e).__name__, e), exception=traceback.format_exc())
    module.exit_json(changed=False, items=states, files=read_state_files(p["read"]))


if __name__ == "__main__":
    main()
