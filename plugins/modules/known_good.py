#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: known_good
short_description: Keep the configuration a vLLM replica serves with, and put it back when its replacement fails
description:
  - With O(state=saved), copies each named replica's files (C(vllm-<name>.run), C(.env), C(.unit.conf) in
    O(config_dir)) and the unit template into O(keep_dir), with a record of the model directory and the manifest
    digest it serves. Only what differs from the copy already kept is written, so a run that changes nothing
    changes nothing here either.
  - With O(state=restored), copies the kept files back over the replica's files (the caller then reloads systemd
    and restarts the replica). When the model directory no longer holds the manifest the kept configuration
    served, and the previous generation the weights role kept next to it (C(.<name>.previous)) does, the two
    directories are swapped back in one atomic rename.
  - The environment files hold secrets; their copies get the same 0600 mode in a 0700 directory, and no content
    is returned.
version_added: "1.0.0"
options:
  state:
    description: Keep the current configuration (C(saved)) or put the kept one back (C(restored)).
    type: str
    choices: [saved, restored]
    required: true
  replicas:
    description:
      - The replicas to keep or restore, each a dict with C(name) (other keys are ignored, so the serve role's replica
        list can be given as it is).
      - With O(state=saved), a replica's C(model_manifest) is the manifest digest its running container serves (its
        C(llmfleet.vllm.model-manifest) label, see the C(llmfleet.vllm.known_good_replicas) filter); without one,
        O(model_manifest) applies.
    type: list
    elements: dict
    required: true
  model_manifest:
    description: With O(state=saved), the manifest digest of replicas that do not carry their own.
    type: str
  config_dir:
    description: Where the replicas' files live.
    type: path
    default: /etc/llmfleet
  keep_dir:
    description: Where the known-good copies live (made 0700). Default C(<config_dir>/known-good).
    type: path
  unit_file:
    description: The replicas' systemd unit template, kept and restored with them.
    type: path
    default: /etc/systemd/system/llmfleet-vllm@.service
  model_dir:
    description: The model directory the replicas mount (its manifest is compared with the kept one on restore).
    type: path
  replica_model_dirs:
    description:
      - "Many models: the model directory of each replica, C({name: directory}); a replica not named mounts
        O(model_dir). On restore each directory is compared with the manifest its own replicas served."
    type: dict
    default: {}
    version_added: 1.1.0
  model_manifests:
    description:
      - "Many models, with O(state=saved): the manifest digest of each model directory, C({directory: digest}), for
        replicas that do not carry their own (before O(model_manifest))."
    type: dict
    default: {}
    version_added: 1.1.0
author:
  - llmfleet maintainers (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.vllm.attributes
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  check_mode:
    support: full
    details: Reports what would be kept or restored and writes nothing.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Keep the configuration the serving replicas run
  llmfleet.vllm.known_good:
    state: saved
    replicas: [{name: "0", model_manifest: "sha256:..."}]
    model_dir: /srv/llmfleet/models/qwen3.5-35b-a3b

- name: Put it back after the new one failed
  llmfleet.vllm.known_good:
    state: restored
    replicas: [{name: "0"}]
    model_dir: /srv/llmfleet/models/qwen3.5-35b-a3b
  register: rolled_back
"""

RETURN = r"""
kept:
  description: With O(state=saved), the replicas whose kept copy was written now (it differed or did not exist).
  returned: always
  type: list
  elements: str
restored:
  description: With O(state=restored), the replicas whose kept configuration was put back.
  returned: always
  type: list
  elements: str
missing:
  description: With O(state=restored), the replicas that had no kept configuration (nothing to roll back to).
  returned: always
  type: list
  elements: str
model_restored:
  description:
    - With O(state=restored), true when the model directory was swapped back to the previous generation that
      holds the manifest the kept configuration served.
  returned: always
  type: bool
model_manifest:
  description: The manifest digest of the model directory after this call (null without O(model_dir)).
  returned: always
  type: str
  sample: "sha256:4f3c..."
"""

import json
import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.vllm.plugins.module_utils.serving.host_files import model_dir_digest, read_text
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights.fetch_place import exchange_dirs, previous_generation
from ansible_collections.llmfleet.vllm.plugins.module_utils.serving.serving_identity import replica_files

UNIT_COPY = "unit-template.service"


def _same(a, b):
    """Do files a and b have the same bytes and mode (b may be missing)?"""
    try:
        if os.stat(a).st_mode & 0o7777 != os.stat(b).st_mode & 0o7777:
            return False
        with open(a, "rb") as fa, open(b, "rb") as fb:
            return fa.read() == fb.read()
    except OSError:
        return False


def _copy(src, dest):
    """Copy src over dest atomically, keeping src's mode (a secret stays 0600 at every moment)."""
    mode = os.stat(src).st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(dest), prefix=".known-good.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as out, open(src, "rb") as inp:
            shutil.copyfileobj(inp, out)
        os.rename(tmp, dest)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _write_text(path, text):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".known-good.")
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(tmp, 0o600)
    os.rename(tmp, path)


def _pairs(p, name):
    """(live path, kept path) of each file of replica name, the unit template first."""
    pairs = [(p["unit_file"], os.path.join(p["keep_dir"], UNIT_COPY))]
    for kind, live in sorted(replica_files(p["config_dir"], name).items()):
        pairs.append((live, os.path.join(p["keep_dir"], os.path.basename(live))))
    return pairs


def save(module, p):
    kept = []
    for replica in p["replicas"]:
        name = str(replica["name"])
        pairs = [(live, copy) for live, copy in _pairs(p, name) if os.path.exists(live)]
        model_dir = _model_dir(p, name)
        manifest = replica.get("model_manifest") or p["model_manifests"].get(model_dir) or p["model_manifest"]
        record = json.dumps({"model_dir": model_dir, "model_manifest": manifest}, sort_keys=True) + "\n"
        record_path = os.path.join(p["keep_dir"], "vllm-%s.json" % name)
        stale = [pair for pair in pairs if not _same(*pair)]
        if not stale and read_text(record_path) == record:
            continue
        kept.append(name)
        if module.check_mode:
            continue
        if not os.path.isdir(p["keep_dir"]):
            os.makedirs(p["keep_dir"], 0o700)
        for live, copy in stale:
            _copy(live, copy)
        _write_text(record_path, record)
    return {"kept": kept, "changed": bool(kept)}


def _restore_model(module, model_dir, want):
    """Put back the previous generation of model_dir when it, and not model_dir, holds the manifest want."""
    if not model_dir or not want or model_dir_digest(model_dir) == want:
        return False
    previous = previous_generation(model_dir)
    if model_dir_digest(previous) != want:
        module.warn("The model directory %s no longer holds the weights the previous configuration served (%s), and "
                    "no previous generation next to it does: the restored replica serves what it holds now."
                    % (model_dir, want))
        return False
    if module.check_mode:
        return True
    # The rejected directory becomes the previous generation: the next placement replaces it.
    old = exchange_dirs(previous, model_dir)
    if old != previous:
        os.rename(old, previous)
    return True


def _model_dir(p, name):
    """The model directory replica name mounts: its own (replica_model_dirs), else model_dir."""
    return p["replica_model_dirs"].get(name) or p["model_dir"]


def restore(module, p):
    restored, missing, wants = [], [], {}
    for replica in p["replicas"]:
        name = str(replica["name"])
        record_text = read_text(os.path.join(p["keep_dir"], "vllm-%s.json" % name))
        if not record_text:
            missing.append(name)
            continue
        try:
            wants.setdefault(_model_dir(p, name), set()).add(json.loads(record_text).get("model_manifest"))
        except ValueError:
            pass
        restored.append(name)
        for live, copy in _pairs(p, name):
            if os.path.exists(copy) and not _same(copy, live) and not module.check_mode:
                _copy(copy, live)
    model_restored = False
    # Each model directory whose replicas served one manifest gets it back (a directory's previous generation).
    for model_dir, want in sorted(wants.items(), key=lambda kv: str(kv[0])):
        want.discard(None)
        if len(want) == 1 and restored:
            model_restored = _restore_model(module, model_dir, want.pop()) or model_restored
    return {"restored": restored, "missing": missing, "model_restored": model_restored, "changed": bool(restored)}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["saved", "restored"], required=True),
            replicas=dict(type="list", elements="dict", required=True),
            model_manifest=dict(type="str"),
            replica_model_dirs=dict(type="dict", default={}),
            model_manifests=dict(type="dict", default={}),
            config_dir=dict(type="path", default="/etc/llmfleet"),
            keep_dir=dict(type="path"),
            unit_file=dict(type="path", default="/etc/systemd/system/llmfleet-vllm@.service"),
            model_dir=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = dict(module.params)
    unnamed = [r for r in p["replicas"] if r.get("name") in (None, "")]
    if unnamed:
        module.fail_json(msg="each entry of replicas needs a name, got %r" % unnamed[:3])
    p["keep_dir"] = p["keep_dir"] or os.path.join(p["config_dir"], "known-good")
    result = dict(kept=[], restored=[], missing=[], model_restored=False)
    result.update(save(module, p) if p["state"] == "saved" else restore(module, p))
    result["model_manifest"] = model_dir_digest(p["model_dir"]) if p["model_dir"] else None
    module.exit_json(**result)


if __name__ == "__main__":
    main()
