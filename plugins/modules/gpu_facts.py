#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Read the NVIDIA GPUs of a host and how they are connected
version_added: "1.0.0"
description:
  - Reads the GPUs through NVML (nvidia-ml-py, module C(pynvml)) when it works, else through C(nvidia-smi).
  - With NVML unavailable it needs only C(nvidia-smi --query-gpu=... --format=csv) and C(nvidia-smi topo -m);
    C(nvidia-smi -q -x) and C(nvidia-smi nvlink -s) are read when they answer and ignored when they fail.
  - Groups the GPUs into NVLink domains (GPUs pairwise connected by NVLink), which the planner
    (M(llmfleet.vllm.vllm_plan)) uses so that a tensor-parallel group never crosses PCIe when it need not.
  - Changes nothing on the host.
options:
  use_nvml:
    description:
      - C(auto) tries NVML and falls back to nvidia-smi; C(true) fails when NVML cannot read the GPUs;
        C(false) reads nvidia-smi only.
      - Even with NVML, C(nvidia-smi topo -m) (when found) fills PCIe link types NVML cannot classify.
    type: str
    choices: [auto, "true", "false"]
    default: auto
  nvidia_smi_path:
    description:
      - Path of the nvidia-smi binary. By default it is looked up in PATH, then C(/usr/local/nvidia/bin)
        and C(/usr/bin).
    type: path
  nvswitch_devices_path:
    description:
      - Directory whose entries are the NVSwitch devices the driver sees. C(nvswitch) is true only when it is
        non-empty (on some hosts it exists but is empty).
    type: path
    default: /proc/driver/nvidia-nvswitch/devices
  return_raw:
    description: Also return the raw command outputs that were read (for bug reports and fixtures).
    type: bool
    default: false
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
- name: Read the GPUs and their topology
  llmfleet.vllm.gpu_facts:
  register: gpu

- name: Read them with nvidia-smi only, from a non-standard location
  llmfleet.vllm.gpu_facts:
    use_nvml: "false"
    nvidia_smi_path: /opt/nvidia/bin/nvidia-smi
  register: gpu_smi

- name: Show the NVLink domains
  ansible.builtin.debug:
    msg: "{{ gpu.gpu_facts.nvlink_domains }}"
"""

RETURN = r"""
gpu_facts:
  description: The GPUs, their links and NVLink domains.
  returned: always
  type: dict
  contains:
    source:
      description: Where the facts came from, C(nvml) or C(nvidia-smi).
      type: str
      sample: nvml
    driver_version:
      description: NVIDIA driver version.
      type: str
      sample: 580.159.04
    cuda_version:
      description: Highest CUDA version the driver supports (null when unknown).
      type: str
      sample: "13.0"
    gpu_count:
      description: Number of GPUs.
      type: int
      sample: 2
    gpus:
      description: >-
        One entry per GPU with index, name, uuid, memory_total_mib, pci_bus_id, numa_node (null when unknown),
        mig_mode (Enabled/Disabled/null), compute_capability (e.g. "9.0"), and where known cpu_affinity,
        architecture, fabric_state and nvlinks_active.
      type: list
      elements: dict
    links:
      description: >-
        Connection type of every GPU pair, as C(nvidia-smi topo -m) names it: NV<n> (n bonded NVLinks), PIX, PXB,
        PHB, NODE or SYS.
      type: list
      elements: dict
      sample: [{"gpus": [0, 1], "type": "NV18", "nvlinks": 18}]
    nvlink_domains:
      description: GPU indices grouped so that the GPUs of a group are pairwise NVLink-connected; every GPU is in
        exactly one group; a GPU without NVLink peers is a group of one.
      type: list
      elements: list
      sample: [[0, 1]]
    nvswitch:
      description: True when NVSwitch devices are visible to this OS (Fabric Manager must run here).
      type: bool
    nics:
      description: Network devices in the topology matrix (label, device name, link type to each GPU).
      type: list
      elements: dict
    rdma:
      description: >-
        InfiniBand / RoCE as NCCL would find it between hosts (/sys/class/infiniband, /dev/infiniband, the
        nvidia_peermem module): devices (name, ports with state, link_layer, rate), active_ports, uverbs_devices,
        rdma_cm, peermem_module, gpudirect_rdma, data_path (C(ib_gdr), C(ib) or C(socket): TCP sockets) and
        warnings naming the fix.
      type: dict
    warnings:
      description: Optional reads that failed, fallbacks taken.
      type: list
      elements: str
raw:
  description: Raw command outputs keyed by the nvidia-smi arguments (only with return_raw).
  returned: when return_raw is true
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.network_facts import rdma_facts, read_rdma_tree
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.topology import (
    GpuFactsError, TopologyParseError, collect_gpu_facts, find_nvidia_smi, sysfs_pci_path)


def _import_nvml():
    import pynvml  # nvidia-ml-py
    return pynvml


def _read_numa(bus_id):
    try:
        with open(os.path.join(sysfs_pci_path(bus_id), "numa_node")) as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            use_nvml=dict(type="str", choices=["auto", "true", "false"], default="auto"),
            nvidia_smi_path=dict(type="path"),
            nvswitch_devices_path=dict(type="path", default="/proc/driver/nvidia-nvswitch/devices"),
            return_raw=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params

    def run(argv):
        rc, out, err = module.run_command(argv, environ_update={"LC_ALL": "C"})
        return rc, out, err

    try:
        smi = find_nvidia_smi(os.environ.get("PATH", ""), p["nvidia_smi_path"])
        try:
            devices = os.listdir(p["nvswitch_devices_path"])
        except OSError:
            devices = []
        facts, raw = collect_gpu_facts(run, smi, p["use_nvml"], _import_nvml, devices, _read_numa)
    except (GpuFactsError, TopologyParseError) as e:
        module.fail_json(msg=str(e))
    facts["rdma"] = rdma_facts(read_rdma_tree("/"))
    result = dict(changed=False, gpu_facts=facts)
    if p["return_raw"]:
        result["raw"] = raw
    for w in facts.get("warnings", []):
        module.warn(w)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
