#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: model_fetch
short_description: Place a verified model directory on a host, from Hugging Face, ModelScope, a host path or an archive
version_added: "1.0.0"
description:
  - Builds the model directory in a staging directory on the same filesystem as O(dest), verifies it, and
    only then moves it into place with a rename (an atomic swap when O(dest) already exists), so O(dest)
    is never a half-written model.
  - One writer at a time. Outside check mode the module holds an exclusive lock (C(.<name>.lock) next to O(dest),
    holding its process id) from its first write until the directory is in place. A second run finds the lock and
    fails at once, naming the holder and changing nothing. That second run may be a background fetch left running
    by an interrupted or failed play, or another ansible-playbook run on the same host.
  - Downloads use the official clients only (C(huggingface_hub), which uses C(hf-xet) when the hub lists
    Xet hashes; the C(modelscope) SDK). They must be importable by the Python that runs this module
    (the C(model_weights) role installs them into a virtualenv and points C(ansible_python_interpreter) at it).
  - "Verification: every file the hub lists (after O(allow_patterns)/O(ignore_patterns)) is present with its
    size; LFS files are checked against the hub's sha256 (Hugging Face tree C(lfs.oid), ModelScope C(Sha256)),
    small Hugging Face files against their git blob id; C(config.json), tokenizer files and every shard named
    in C(model.safetensors.index.json) must be there, and each shard's safetensors header must match its size."
  - "Resume: a re-run keeps every finished file in the staging directory and fetches only the rest.
    A file that was cut off midway is resumed with HTTP Range by the ModelScope SDK; huggingface_hub 2.4
    restarts such a file from byte 0 (its partial C(.incomplete) files cannot be resumed across processes,
    so this module deletes them and reports their size as RV(partial_bytes_discarded))."
  - "Preflight, before any byte is fetched: the bytes still to fetch times O(space_margin) must fit the free
    space of O(dest)'s filesystem; a rotational disk under O(dest) is a warning, or a failure with O(require_ssd)."
  - Progress is written once a second as JSON to O(progress_file) (bytes, percent, rate, ETA) so a play
    running this module with C(async) can show it while it runs.
  - "Peers (O(peers), O(peer_timeout), O(peer_bwlimit_kib), shared with M(llmfleet.vllm.model_peer_pull)): here
    only for the sources C(hf) and C(modelscope), tried before the hub. Whatever a peer sends is verified like a hub
    download, against the manifest this module gets from the hub (sizes, sha256, git blob ids), never against the
    peer's word; files no peer delivers, or that fail that check, are fetched from the hub. No token goes to a peer."
options:
  source:
    description: Where the weights come from. C(local) is a directory already on the host (O(local_path)),
      C(archive) a tar archive on the host (O(archive_path)).
    type: str
    required: true
    choices: [hf, modelscope, local, archive]
  repo_id:
    description: Hub repository, C(owner/name). Required for C(hf) and C(modelscope).
    type: str
  revision:
    description:
      - Branch, tag or commit. A 40-hex commit is recommended; with O(environment=prod) anything else warns.
      - Default is the hub's default branch (C(main) on Hugging Face, C(master) on ModelScope).
    type: str
  allow_patterns:
    description: Only files matching one of these fnmatch patterns (C(dir/) means everything under dir).
    type: list
    elements: str
    default: []
  ignore_patterns:
    description: Skip files matching any of these patterns.
    type: list
    elements: str
    default: []
  token:
    description: Hub access token. Never logged, never put on a command line.
    type: str
  endpoint:
    description: Hub URL, e.g. an internal mirror (C(http://mirror.example:8090)). Default is the public hub,
      or C(HF_ENDPOINT) / C(MODELSCOPE_ENDPOINT) from the environment.
    type: str
  dest:
    description: Final model directory (absolute). Its parent must exist or be creatable.
    type: path
    required: true
  local_path:
    description: For O(source=local), the directory on the host to place at O(dest). When it is the staging
      directory itself (an upload the role made there) it is verified and renamed in place, else it is copied.
    type: path
  archive_path:
    description: For O(source=archive), a tar archive (optionally gz/bz2/xz compressed) on the host.
      A single top-level directory inside it is stripped; links, devices and paths leaving it are refused.
    type: path
  origin:
    description: A label for where a C(local)/C(archive) source really came from (e.g. C(controller:/data/m)),
      recorded in the marker so a re-run can tell that O(dest) already holds it. Default O(local_path) or
      O(archive_path) with the archive's size and mtime.
    type: str
  staging_dir:
    description: Where the directory is assembled. Default C(<dest parent>/.<dest name>.partial). Must be on the
      same filesystem as O(dest) (checked).
    type: path
  progress_file:
    description: Progress JSON, rewritten once a second. Default C(<dest parent>/.<dest name>.progress.json).
    type: path
  space_margin:
    description: Free space needed = bytes still to fetch x this factor (>= 1.0).
    type: float
    default: 1.05
  require_ssd:
    description: Fail (instead of warn) when O(dest) lies on a rotational disk.
    type: bool
    default: false
  environment:
    description: C(prod) turns an unpinned revision into a warning.
    type: str
    choices: [prod, dev]
    default: dev
  verify_existing:
    description: Re-hash an existing O(dest) even when its manifest marker matches (finds silent corruption;
      reads every byte). Without it an existing matching O(dest) is checked by sizes only.
    type: bool
    default: false
  keep_previous:
    description:
      - When O(dest) already holds another model directory, keep it next to O(dest) as C(.<name>.previous) (one
        generation; an older one is removed) instead of deleting it, so that the serve stage can roll a replica
        back to the weights it served. Unchanged files are hard links shared by both directories.
    type: bool
    default: false
  max_workers:
    description: Parallel file downloads / hashes.
    type: int
    default: 8
  kind:
    description:
      - C(model), or C(adapter) for a LoRA adapter directory (PEFT) - it needs C(adapter_config.json) and its weights
        instead of C(config.json) and tokenizer files; every file is verified the same way.
    type: str
    choices: [model, adapter]
    default: model
    version_added: 1.1.0
author:
  - llmfleet maintainers (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.vllm.peers
  - llmfleet.vllm.attributes
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
  - ansible.builtin.action_common_attributes.flow
attributes:
  check_mode:
    support: full
    details: Reports what would be fetched and how big it is (RV(files_to_fetch), RV(bytes_to_fetch)); changes nothing.
  action:
    support: none
  async:
    support: full
    details: Run it with C(async) and C(poll=0), then follow it with M(llmfleet.vllm.model_fetch_wait).
  bypass_host_loop:
    support: none
"""

EXAMPLES = r"""
- name: Fetch Qwen3.5-35B-A3B from an internal Hugging Face mirror, pinned to a commit
  llmfleet.vllm.model_fetch:
    source: hf
    repo_id: Qwen/Qwen3.5-35B-A3B
    revision: 0123456789abcdef0123456789abcdef01234567
    endpoint: http://hf-mirror.internal:8090
    token: "{{ vault_hf_token }}"
    dest: /srv/llmfleet/models/qwen3.5-35b-a3b
    environment: prod
  no_log: false

- name: Show what would be fetched and how big it is
  llmfleet.vllm.model_fetch:
    source: modelscope
    repo_id: Qwen/Qwen3.5-35B-A3B
    revision: master
    dest: /srv/llmfleet/models/qwen3.5-35b-a3b
  check_mode: true

- name: Place a directory that is already on the host
  llmfleet.vllm.model_fetch:
    source: local
    local_path: /mnt/nfs/models/qwen3.5-35b-a3b
    dest: /srv/llmfleet/models/qwen3.5-35b-a3b
"""

RETURN = r"""
path:
  description: The final, verified model directory (O(dest)).
  returned: success
  type: str
revision:
  description: The revision asked for (or the hub default).
  returned: always
  type: str
commit:
  description: The commit the revision resolved to (Hugging Face; ModelScope and local sources give null).
  returned: always
  type: str
files_total:
  description: Files in the model directory.
  returned: always
  type: int
bytes_total:
  description: Bytes in the model directory.
  returned: always
  type: int
files_to_fetch:
  description: Paths that were (or, in check mode, would be) fetched; empty when nothing was missing.
  returned: always
  type: list
  elements: str
bytes_to_fetch:
  description: Their total size.
  returned: always
  type: int
bytes_fetched:
  description: Bytes actually written by this run's downloads (0 in check mode).
  returned: always
  type: int
files_reused:
  description: Finished files kept from an earlier, interrupted run or from the old O(dest).
  returned: always
  type: list
  elements: str
refetched:
  description: Files that failed verification (size or digest) and were fetched again.
  returned: always
  type: list
  elements: str
partial_bytes_discarded:
  description: Bytes of partial Hugging Face downloads from an interrupted run that were deleted (restarted from 0).
  returned: always
  type: int
verified:
  description: How many files were checked by which means in this run (sha256, git_sha1, size).
  returned: always
  type: dict
free_bytes:
  description: Free bytes on O(dest)'s filesystem before fetching.
  returned: always
  type: int
needed_bytes:
  description: bytes_to_fetch x space_margin.
  returned: always
  type: int
rotational:
  description: Whether O(dest) is on a rotational disk (null when unknown, e.g. tmpfs/overlay).
  returned: always
  type: bool
seconds:
  description: Wall time of the download phase.
  returned: always
  type: float
throughput_bps:
  description: bytes_fetched / seconds.
  returned: always
  type: int
peer_transfer:
  description:
    - "What the peers delivered (O(peers) given): C(bytes) and C(files) received from peers, C(left) (paths no
      peer delivered, fetched from the hub), C(tried) (one entry per peer tried: host, url, rc, reason, seconds,
      files, stderr)."
  returned: when O(peers) was given and files were fetched
  type: dict
peer_tool:
  description: Path of the rsync the O(peers) transfer uses on this host (null when it is not installed).
  returned: always
  type: str
leftovers_removed:
  description:
    - What an interrupted or refused placement had left next to O(dest) (the staging directory, the lock file, the
      progress file) and this run removed (in check mode, would remove) because O(dest) is complete. A placement
      that fails removes its lock file; its staging directory and progress file stay for the next run to resume.
  returned: always
  type: list
  elements: str
streamed_hashes:
  description: Files whose sha256 was computed while they were being written (no verification tail).
  returned: when files were fetched
  type: int
"""

import shutil
import traceback

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights.hub_fetch import FetchError, fetch


def main():
    module = AnsibleModule(
        argument_spec=dict(
            source=dict(type="str", required=True, choices=["hf", "modelscope", "local", "archive"]),
            repo_id=dict(type="str"),
            revision=dict(type="str"),
            allow_patterns=dict(type="list", elements="str", default=[]),
            ignore_patterns=dict(type="list", elements="str", default=[]),
            token=dict(type="str", no_log=True),
            endpoint=dict(type="str"),
            dest=dict(type="path", required=True),
            local_path=dict(type="path"),
            archive_path=dict(type="path"),
            origin=dict(type="str"),
            staging_dir=dict(type="path"),
            progress_file=dict(type="path"),
            space_margin=dict(type="float", default=1.05),
            require_ssd=dict(type="bool", default=False),
            environment=dict(type="str", choices=["prod", "dev"], default="dev"),
            verify_existing=dict(type="bool", default=False),
            max_workers=dict(type="int", default=8),
            peers=dict(type="list", elements="dict", default=[],
                       options=dict(url=dict(type="str", required=True), host=dict(type="str"))),
            peer_timeout=dict(type="int", default=30),
            peer_bwlimit_kib=dict(type="int", default=0),
            keep_previous=dict(type="bool", default=False),
            kind=dict(type="str", choices=["model", "adapter"], default="model"),
        ),
        required_if=[("source", "hf", ["repo_id"]), ("source", "modelscope", ["repo_id"]),
                     ("source", "local", ["local_path"]), ("source", "archive", ["archive_path"])],
        supports_check_mode=True,
    )
    try:
        msg, result = fetch(module.params, check_mode=module.check_mode, warn=module.warn)
    except FetchError as e:
        module.fail_json(msg=str(e))
    except Exception as e:  # a hub or OS error: say which, keep the traceback for -vvv
        module.fail_json(msg="model_fetch failed: %s: %s" % (type(e).__name__, e), exception=traceback.format_exc())
    result["peer_tool"] = shutil.which("rsync")
    module.exit_json(msg=msg, **result)


if __name__ == "__main__":
    main()
