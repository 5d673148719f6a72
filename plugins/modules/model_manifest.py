#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: model_manifest
short_description: Sizes and sha256 of every file of a model directory or tar archive
version_added: "1.0.0"
description:
  - Reads a model directory, or a tar archive of one, and returns the manifest of the model directory it makes
    (relative path, size and sha256 of every file; client bookkeeping and the C(model_weights) role's markers left
    out; for an archive, one top-level directory stripped, as M(llmfleet.vllm.model_fetch) extracts it).
  - The C(model_weights) role runs it on the controller (C(delegate_to) C(localhost)) before it uploads a model to
    one host of a peer group and spreads it over the LAN (M(llmfleet.vllm.model_peer_pull)); every host then
    verifies its copy against this manifest, never against a peer's word.
  - Reads every byte once. Changes nothing.
options:
  path:
    description: The model directory, or the tar archive (optionally gz/bz2/xz compressed) with O(kind=archive).
    type: path
    required: true
  kind:
    description: C(directory) or C(archive).
    type: str
    choices: [directory, archive]
    default: directory
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
- name: Hash the model directory on the controller
  llmfleet.vllm.model_manifest:
    path: /data/models/qwen3.5-35b-a3b
  delegate_to: localhost
  register: manifest
"""

RETURN = r"""
files:
  description: One entry per file, sorted by path.
  returned: success
  type: list
  elements: dict
  contains:
    path:
      description: Path relative to the model directory.
      type: str
    size:
      description: Bytes.
      type: int
    sha256:
      description: sha256 of the content.
      type: str
bytes:
  description: Total bytes of the files.
  returned: success
  type: int
digest:
  description: A short id of the manifest (paths, sizes, sha256).
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import peer_upload


def main():
    module = AnsibleModule(
        argument_spec=dict(path=dict(type="path", required=True),
                           kind=dict(type="str", choices=["directory", "archive"], default="directory")),
        supports_check_mode=True,
    )
    try:
        files = (peer_upload.archive_manifest if module.params["kind"] == "archive"
                 else peer_upload.dir_manifest)(module.params["path"])
    except peer_upload.ManifestError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, files=files, bytes=sum(f["size"] for f in files),
                     digest=peer_upload.manifest_digest(files))


if __name__ == "__main__":
    main()
