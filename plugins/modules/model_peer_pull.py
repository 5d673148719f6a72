#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: model_peer_pull
short_description: Pull a controller-uploaded model from the fleet's peers into the staging directory
version_added: "1.0.0"
description:
  - The puller's half of a controller upload spread over the LAN (the C(model_weights) role with
    C(model_weights_peer_transfer) and a C(local) or C(archive) source on the controller).
  - Writes O(manifest) (the controller's sizes and sha256, from M(llmfleet.vllm.model_manifest)) into the staging
    directory next to O(dest) as the marker M(llmfleet.vllm.model_fetch) reads there, then pulls the files still
    missing from O(peers), in order, with C(rsync --partial) (a transfer cut off by a peer that dies is continued
    by the next peer). It verifies nothing itself and places nothing; M(llmfleet.vllm.model_fetch) with
    C(source=local) and C(local_path) the staging directory then checks every file against the controller's
    sha256 and renames the directory into place.
  - With no O(peers) it only writes the marker (the host that received the upload from the controller).
  - "Peers (O(peers), O(peer_timeout), O(peer_bwlimit_kib), shared with M(llmfleet.vllm.model_fetch)): here for any
    source the controller uploaded; what a peer sends is checked afterwards against the controller's manifest (by
    M(llmfleet.vllm.model_fetch)), not against a hub's."
options:
  dest:
    description: The final model directory (absolute); the staging directory is C(<parent>/.<name>.partial).
    type: path
    required: true
  staging_dir:
    description: Where the directory is assembled. Default C(<dest parent>/.<dest name>.partial).
    type: path
  manifest:
    description: The controller's manifest, C([{path, size, sha256}]), every file with its sha256.
    type: list
    elements: dict
    required: true
author:
  - llmfleet maintainers (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.vllm.peers
  - llmfleet.vllm.attributes
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  check_mode:
    support: full
    details: Reports the files it would pull; writes nothing.
"""

EXAMPLES = r"""
- name: Pull the uploaded model from the host that received it
  llmfleet.vllm.model_peer_pull:
    dest: /srv/llmfleet/models/qwen3.5-35b-a3b
    manifest: "{{ controller_manifest.files }}"
    peers:
      - host: gpu1
        url: rsync://10.0.0.11:8873/llmfleet-weights-qwen3.5-35b-a3b-1a2b3c4d/
"""

RETURN = r"""
staging_dir:
  description: The staging directory the files were pulled into.
  returned: always
  type: str
files_to_pull:
  description: Paths that were missing (absent or of another size) before the pull.
  returned: always
  type: list
  elements: str
peer_transfer:
  description: What the peers delivered, C(bytes), C(files), C(left) (paths no peer delivered), C(tried) (one entry
    per peer tried, with rsync's exit code and reason).
  returned: when peers were given and files were missing, outside check mode
  type: dict
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import peer_fetch
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import peer_upload
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import peer_weights
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import weights as W


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dest=dict(type="path", required=True),
            staging_dir=dict(type="path"),
            manifest=dict(type="list", elements="dict", required=True),
            peers=dict(type="list", elements="dict", default=[],
                       options=dict(url=dict(type="str", required=True), host=dict(type="str"))),
            peer_timeout=dict(type="int", default=30),
            peer_bwlimit_kib=dict(type="int", default=0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    dest = os.path.normpath(p["dest"])
    if not os.path.isabs(dest) or dest == "/":
        module.fail_json(msg="dest must be an absolute directory path other than /, got %r" % p["dest"])
    staging = os.path.normpath(p["staging_dir"] or os.path.join(os.path.dirname(dest), ".%s.partial"
                                                                % os.path.basename(dest)))
    try:
        marker = peer_upload.staging_marker(p["manifest"])
    except peer_upload.ManifestError as exc:
        module.fail_json(msg="manifest: %s" % exc)
    sizes = dict((m["path"], m["size"]) for m in marker["files"])
    present = {}
    for rel in sizes:
        try:
            present[rel] = os.path.getsize(os.path.join(staging, rel))
        except OSError:
            pass
    todo = peer_weights.remaining(sizes, present)
    result = {"changed": False, "staging_dir": staging, "files_to_pull": todo}
    if module.check_mode:
        module.exit_json(**result)
    os.makedirs(staging, mode=0o755, exist_ok=True)
    marker_path = os.path.join(staging, W.MARKER_NAME)
    try:
        with open(marker_path) as handle:
            result["changed"] = json.load(handle) != marker
    except (OSError, ValueError):
        result["changed"] = True
    if result["changed"]:
        with open(marker_path + ".tmp", "w") as handle:
            json.dump(marker, handle)
        os.replace(marker_path + ".tmp", marker_path)
    if todo and p["peers"]:
        result["peer_transfer"] = peer_fetch.pull(p["peers"], staging, dict((x, sizes[x]) for x in todo),
                                                  p["peer_timeout"], min(10, p["peer_timeout"]),
                                                  p["peer_bwlimit_kib"])
        result["changed"] = True
    module.exit_json(**result)


if __name__ == "__main__":
    main()
