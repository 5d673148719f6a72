#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: host_state
short_description: Read small files, Debian package states and systemd unit states in one call
description:
  - Read-only. Returns the content of each file of O(files), whether each path of O(paths) exists and what it is,
    whether each package of O(packages) is installed (C(dpkg-query)), and the state of each unit of O(units)
    (C(systemctl show)).
  - One module call for what would otherwise be a C(slurp), a C(stat), a C(dpkg-query) command and a
    C(systemd_service) task each, so that a role's re-run that finds everything in place pays for one remote call.
version_added: "1.0.0"
options:
  files:
    description: Small text files to read (a missing or unreadable one is returned as null).
    type: list
    elements: path
    default: []
  missing_msg:
    description:
      - When set, the module fails with this message, followed by the paths, where a file of O(files) is missing or
        cannot be read as text (for a file the caller cannot do without; say in it what the user should do).
      - Empty - a missing file is returned as null.
    type: str
    default: ""
    version_added: "1.0.0"
  paths:
    description:
      - Paths to look at without reading them (as C(ansible.builtin.stat) without checksums, a link not followed).
    type: list
    elements: path
    default: []
    version_added: "1.0.0"
  packages:
    description: Debian package names to look up (a host without C(dpkg-query) reports none installed).
    type: list
    elements: str
    default: []
  units:
    description: systemd units to read (a host without systemd reports each as C({})).
    type: list
    elements: str
    default: []
  unit_properties:
    description:
      - The properties of each unit of O(units) to read (C(systemctl show --property)); empty - LoadState,
        ActiveState, SubState, UnitFileState and NeedDaemonReload.
    type: list
    elements: str
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
    details: It only reads.
"""

EXAMPLES = r"""
- name: Read dockerd's configuration, whether Docker is installed and whether dockerd runs
  llmfleet.vllm.host_state:
    files: [/etc/docker/daemon.json]
    packages: [docker.io]
    units: [docker.service]
  register: docker_state

- name: Read how often a replica's unit restarted and how its last run ended
  llmfleet.vllm.host_state:
    units: [llmfleet-vllm@0.service]
    unit_properties: [LoadState, ActiveState, SubState, Result, ExecMainStatus, NRestarts]
  register: replica_unit

- name: Read the deployment description, which the next tasks cannot do without
  llmfleet.vllm.host_state:
    files: [/etc/llmfleet/serving.json]
    missing_msg: There is no deployment description on this host; run the serve stage first.
  register: deployment

- name: Look for what an interrupted placement left next to a model directory
  llmfleet.vllm.host_state:
    paths: [/srv/models/.qwen.partial, /srv/models/.qwen.lock]
  register: leftovers

- name: Install Docker only where it is missing
  ansible.builtin.apt:
    name: docker.io
  when: not docker_state.packages['docker.io'].installed
"""

RETURN = r"""
files:
  description: Each file's content (null when it does not exist or cannot be read as text).
  returned: always
  type: dict
  sample: {/etc/docker/daemon.json: '{"log-driver": "json-file"}'}
paths:
  description:
    - For each path of O(paths), C(exists), C(type) (C(file), C(directory), C(link), C(other), or null when it does not
      exist), C(size) in bytes, C(mode) (octal string) and C(mtime) (seconds since the epoch).
  returned: always
  type: dict
  sample: {/srv/models/.qwen.partial: {exists: true, type: directory, size: 4096, mode: '0755', mtime: 1767225600.0}}
packages:
  description: For each package, C(installed) (dpkg status C(ii)), C(status) (dpkg's letters, empty when unknown) and C(version).
  returned: always
  type: dict
  sample: {docker.io: {installed: true, status: ii, version: 20.10.24+dfsg1-1+deb12u1}}
units:
  description: For each unit, the properties of O(unit_properties) ({} without systemd).
  returned: always
  type: dict
  sample: {docker.service: {ActiveState: active, SubState: running, UnitFileState: enabled}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.vllm.plugins.module_utils.serving.host_state import (
    DPKG_FORMAT,
    UNIT_PROPERTIES,
    dpkg_states,
    path_state,
    unit_properties,
)
from ansible_collections.llmfleet.vllm.plugins.module_utils.serving.host_files import read_text


def main():
    module = AnsibleModule(
        argument_spec=dict(
            files=dict(type="list", elements="path", default=[]),
            paths=dict(type="list", elements="path", default=[]),
            missing_msg=dict(type="str", default=""),
            packages=dict(type="list", elements="str", default=[]),
            units=dict(type="list", elements="str", default=[]),
            unit_properties=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    files = dict((path, read_text(path)) for path in p["files"])
    missing = [path for path in p["files"] if files[path] is None]
    if missing and p["missing_msg"]:
        module.fail_json(msg="%s (missing or unreadable on this host: %s)" % (p["missing_msg"].strip(), ", ".join(missing)),
                         files=files, missing=missing)
    paths = dict((path, path_state(path)) for path in p["paths"])

    out = ""
    dpkg = module.get_bin_path("dpkg-query") if p["packages"] else None
    if dpkg:
        # rc 1 only says that some package is unknown; what it printed for the others still holds.
        rc, out, err = module.run_command([dpkg, "--show", "--showformat=" + DPKG_FORMAT] + p["packages"])
    packages = dpkg_states(out, p["packages"])

    units = {}
    systemctl = module.get_bin_path("systemctl") if p["units"] else None
    for unit in p["units"]:
        if not systemctl:
            units[unit] = {}
            continue
        rc, out, err = module.run_command([systemctl, "show", unit,
                                           "--property=" + (",".join(p["unit_properties"]) or UNIT_PROPERTIES)])
        units[unit] = unit_properties(out) if rc == 0 else {}

    module.exit_json(changed=False, files=files, paths=paths, packages=packages, units=units)


if __name__ == "__main__":
    main()
