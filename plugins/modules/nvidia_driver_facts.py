#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: nvidia_driver_facts
short_description: Read the NVIDIA driver's state and judge it for serving a pinned CUDA image
version_added: "1.0.0"
description:
  - Runs C(nvidia-smi -q -x), lists the NVSwitch devices the driver exposes, reads the installed
    Fabric Manager package and, under systemd, the state of C(nvidia-fabricmanager.service) and
    C(nvidia-persistenced.service).
  - Judges them (minimum driver for the image's CUDA, persistence mode, MIG against the plan,
    Fabric Manager on NVSwitch hosts) and returns one result per check. It never changes the host
    and never fails on a failed check; the role decides what is fatal.
options:
  nvidia_smi_path:
    description: Path of nvidia-smi. Empty means search PATH and O(search_paths).
    type: path
  search_paths:
    description: Extra directories searched for nvidia-smi after PATH.
    type: list
    elements: path
    default: [/usr/local/nvidia/bin, /usr/bin, /usr/local/bin]
  image_cuda_version:
    description: CUDA version (MAJOR.MINOR) of the container image that will run on the host.
    type: str
    default: "13.0"
  min_driver_version:
    description: Minimum driver version; overrides the CUDA table when set.
    type: str
  plan:
    description: The layout plan (host fact C(llmfleet_plan)); its C(replicas) lists of GPU indices mark GPUs used whole.
    type: dict
  persistence:
    description: How disabled persistence mode is judged (C(report) = warning, C(require)/C(enable) = error).
    type: str
    choices: [report, require, enable]
    default: report
  check_mig:
    description: Whether MIG mode on a GPU planned whole is an error.
    type: bool
    default: true
  nvswitch_devices_dir:
    description: Directory listing the NVSwitch devices the driver sees.
    type: path
    default: /proc/driver/nvidia-nvswitch/devices
  fabricmanager_service:
    description: Name of Fabric Manager's systemd unit.
    type: str
    default: nvidia-fabricmanager
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
- name: Read and judge the NVIDIA driver
  llmfleet.vllm.nvidia_driver_facts:
    image_cuda_version: "13.0"
  register: driver

- name: Fail on any failed check
  ansible.builtin.fail:
    msg: "{{ driver.failures }}"
  when: driver.failures | length > 0
"""

RETURN = r"""
smi_path:
  description: The nvidia-smi that was run (empty when none was found).
  returned: always
  type: str
  sample: /usr/local/nvidia/bin/nvidia-smi
driver_version:
  description: The loaded driver's version (empty when nvidia-smi did not answer).
  returned: always
  type: str
  sample: 580.159.04
cuda_version:
  description: The newest CUDA version the driver supports.
  returned: always
  type: str
  sample: "13.0"
min_driver_version:
  description: The minimum driver the checks used (from the CUDA table or the override).
  returned: always
  type: str
  sample: 580.65.06
gpus:
  description: One entry per GPU in index order.
  returned: always
  type: list
  elements: dict
  sample:
    - index: 0
      name: NVIDIA H200
      uuid: GPU-28a561a1-a94b-74a8-973e-2ea7f032d46a
      pci_bus_id: "00000000:00:06.0"
      persistence_mode: true
      mig_current: Disabled
      mig_pending: Disabled
      fabric_state: Completed
      fabric_status: Success
      fabric_participating: true
nvswitch_devices:
  description: Entries of O(nvswitch_devices_dir) (empty when the directory is empty or absent).
  returned: always
  type: list
  elements: str
nvswitch_host:
  description: Whether the host sees NVSwitch devices (a non-empty O(nvswitch_devices_dir)).
  returned: always
  type: bool
service_manager:
  description: C(systemd) when systemd is PID 1, else C(none).
  returned: always
  type: str
fabricmanager:
  description: Installed Fabric Manager packages and the state of its unit (null without systemd).
  returned: always
  type: dict
  sample: {packages: [{name: nvidia-fabricmanager-580, version: 580.159.04-1}], service: active}
persistenced_service:
  description: State of nvidia-persistenced.service (null without systemd).
  returned: always
  type: str
checks:
  description: Check name -> {ok, level (ok, warning or error), message}; checks after a failed nvml check are absent.
  returned: always
  type: dict
failures:
  description: Messages of the failed checks at level error, each saying what to do.
  returned: always
  type: list
  elements: str
warnings_list:
  description: Messages of the failed checks at level warning.
  returned: always
  type: list
  elements: str
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu import nvidia_driver as nd

FM_PACKAGE = re.compile(r"^nvidia-fabricmanager(-\d+)?$")


def _fabricmanager_packages(module):
    packages = []
    dpkg = module.get_bin_path("dpkg-query")
    rpm = module.get_bin_path("rpm")
    if dpkg:
        rc, out, _err = module.run_command(
            [dpkg, "-W", "-f", "${binary:Package}\t${Version}\t${db:Status-Abbrev}\n", "nvidia-fabricmanager*"])
        for line in out.splitlines() if rc == 0 else []:
            parts = line.split("\t")
            if len(parts) >= 3 and parts[2].startswith("ii") and FM_PACKAGE.match(parts[0].split(":")[0]):
                packages.append({"name": parts[0].split(":")[0], "version": parts[1]})
    elif rpm:
        rc, out, _err = module.run_command([rpm, "-qa", "--qf", "%{NAME}\t%{VERSION}-%{RELEASE}\n", "nvidia-fabricmanager*"])
        for line in out.splitlines() if rc == 0 else []:
            parts = line.split("\t")
            if len(parts) == 2 and FM_PACKAGE.match(parts[0]):
                packages.append({"name": parts[0], "version": parts[1]})
    return packages


def _unit_state(module, unit):
    systemctl = module.get_bin_path("systemctl")
    if not systemctl:
        return None
    _rc, out, _err = module.run_command([systemctl, "is-active", unit])
    return (out or "").strip() or "unknown"


ARGUMENT_SPEC = dict(
    nvidia_smi_path=dict(type="path"),
    search_paths=dict(type="list", elements="path", default=["/usr/local/nvidia/bin", "/usr/bin", "/usr/local/bin"]),
    image_cuda_version=dict(type="str", default="13.0"),
    min_driver_version=dict(type="str"),
    plan=dict(type="dict"),
    persistence=dict(type="str", choices=["report", "require", "enable"], default="report"),
    check_mig=dict(type="bool", default=True),
    nvswitch_devices_dir=dict(type="path", default="/proc/driver/nvidia-nvswitch/devices"),
    fabricmanager_service=dict(type="str", default="nvidia-fabricmanager"),
)


def _smi_facts(module, p):
    """Where nvidia-smi is (or where it was looked for) and what its `-q -x` says: {smi_path, searched, parsed,
    smi_rc, smi_output}; smi_rc "unparsable" when its XML could not be read."""
    search = [d for d in p["search_paths"] if d]
    if p["nvidia_smi_path"]:
        smi = p["nvidia_smi_path"] if os.access(p["nvidia_smi_path"], os.X_OK) else None
        searched = [p["nvidia_smi_path"]]
    else:
        smi = module.get_bin_path("nvidia-smi", opt_dirs=search)
        searched = ["PATH"] + search
    facts = {"smi_path": smi or "", "searched": searched, "parsed": None, "smi_rc": None, "smi_output": ""}
    if smi:
        rc, out, err = module.run_command([smi, "-q", "-x"])
        facts["smi_rc"] = rc
        facts["smi_output"] = out if rc != 0 else ""
        if rc != 0:
            facts["smi_output"] = (out + "\n" + err).strip()
        else:
            try:
                facts["parsed"] = nd.parse_smi_xml(out)
            except ValueError as exc:
                facts["smi_rc"] = "unparsable"
                facts["smi_output"] = str(exc)
    return facts


def _add_fabric_facts(module, facts, p):
    """The NVSwitch devices, the service manager and the Fabric Manager's packages and unit, into facts; returns
    the state of nvidia-persistenced's unit (None without systemd)."""
    devices_dir = p["nvswitch_devices_dir"]
    facts["nvswitch_devices"] = sorted(os.listdir(devices_dir)) if os.path.isdir(devices_dir) else []
    facts["service_manager"] = "systemd" if os.path.isdir("/run/systemd/system") else "none"
    facts["fabricmanager_packages"] = _fabricmanager_packages(module)
    systemd = facts["service_manager"] == "systemd"
    facts["fabricmanager_service"] = _unit_state(module, p["fabricmanager_service"]) if systemd else None
    return _unit_state(module, "nvidia-persistenced") if systemd else None


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    p = module.params
    try:
        min_driver = p["min_driver_version"] or nd.min_driver_for_cuda(p["image_cuda_version"])
        if p["min_driver_version"]:
            nd.parse_version(p["min_driver_version"])
        nd.planned_whole_gpus(p["plan"])
    except ValueError as exc:
        module.fail_json(msg="bad input: %s" % exc)

    facts = _smi_facts(module, p)
    persistenced = _add_fabric_facts(module, facts, p)
    checks = nd.evaluate(facts, image_cuda_version=p["image_cuda_version"], min_driver_version=p["min_driver_version"],
                         plan=p["plan"], persistence=p["persistence"], check_mig=p["check_mig"],
                         nvswitch_devices_dir=p["nvswitch_devices_dir"])
    parsed = facts["parsed"] or {"driver_version": "", "cuda_version": "", "gpus": []}
    module.exit_json(
        changed=False,
        smi_path=facts["smi_path"],
        driver_version=parsed["driver_version"],
        cuda_version=parsed["cuda_version"],
        min_driver_version=min_driver,
        gpus=parsed["gpus"],
        nvswitch_devices=facts["nvswitch_devices"],
        nvswitch_host=nd.is_nvswitch_host(facts["nvswitch_devices"]),
        service_manager=facts["service_manager"],
        fabricmanager={"packages": facts["fabricmanager_packages"], "service": facts["fabricmanager_service"]},
        persistenced_service=persistenced,
        checks=checks,
        failures=nd.failures(checks),
        warnings_list=nd.warnings(checks),
    )


if __name__ == "__main__":
    main()
