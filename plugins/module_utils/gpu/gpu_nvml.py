# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Reading the GPUs of this host through NVML (read_nvml), for gpu_probe.collect_gpu_facts. Runs on the managed host.

read_nvml takes the imported ``pynvml`` module as an argument, so nothing here imports it: the caller decides
whether NVML is there (gpu_facts' use_nvml).
"""

from __future__ import annotations

from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.gpu_links import build_gpu_facts, link_rank


_NVML_TOPO_LEVEL = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def _s(v):
    return v.decode() if isinstance(v, bytes) else v


def read_nvml(nvml, smi_links=None):
    """Read GPUs through NVML.  ``nvml`` is the imported pynvml module.

    NVLink pairs come from NVML's P2P NVLink status and the active link count; PCIe pairs from
    nvmlDeviceGetTopologyCommonAncestor.  Where NVML cannot classify a pair (NotSupported, as on the
    H200 test hosts), ``smi_links`` ({(i, j): type} parsed from topo -m) fills it in; failing that the
    pair is recorded as SYS (the most conservative PCIe path) with a warning.
    """
    nvml.nvmlInit()
    try:
        warnings = []
        driver = _s(nvml.nvmlSystemGetDriverVersion())
        cuda = _nvml_cuda_version(nvml)
        count = nvml.nvmlDeviceGetCount()
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        gpus = [_nvml_gpu(nvml, i, h) for i, h in enumerate(handles)]
        links = _nvml_links(nvml, handles, gpus, smi_links, warnings)
        return build_gpu_facts(gpus, driver, links, "nvml", cuda_version=cuda, warnings=warnings)
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass


def _nvml_cuda_version(nvml):
    """The CUDA version the driver supports ("13.0"), or None where NVML does not say (optional)."""
    try:
        cuda_v = nvml.nvmlSystemGetCudaDriverVersion_v2()
        return "%d.%d" % (cuda_v // 1000, (cuda_v % 1000) // 10)
    except Exception:  # optional
        return None


def _nvml_gpu(nvml, index, h):
    """One GPU of gpu_facts; what NVML does not support for it (compute capability, MIG, NUMA node) is None."""
    pci = nvml.nvmlDeviceGetPciInfo(h)
    # The 8-digit-domain form, as nvidia-smi prints it: both readers must return the same id.
    bus = _s(pci.busId) or _s(getattr(pci, "busIdLegacy", None))
    try:
        cc = "%d.%d" % tuple(nvml.nvmlDeviceGetCudaComputeCapability(h))
    except Exception:
        cc = None
    try:
        cur, _pending = nvml.nvmlDeviceGetMigMode(h)
        mig = "Enabled" if cur == getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1) else "Disabled"
    except Exception:  # NotSupported on GPUs without MIG
        mig = None
    try:
        numa = nvml.nvmlDeviceGetNumaNodeId(h)
    except Exception:
        numa = None
    return {
        "index": index,
        "name": _s(nvml.nvmlDeviceGetName(h)),
        "uuid": _s(nvml.nvmlDeviceGetUUID(h)),
        "memory_total_mib": int(nvml.nvmlDeviceGetMemoryInfo(h).total // (1024 * 1024)),
        "pci_bus_id": bus,
        "numa_node": numa if isinstance(numa, int) and numa >= 0 else None,
        "mig_mode": mig,
        "compute_capability": cc,
        "nvlinks_active": _nvml_active_links(nvml, h),
    }


def _nvml_links(nvml, handles, gpus, smi_links, warnings):
    """{(a, b): link type} for every ordered pair of GPUs, symmetric."""
    count = len(handles)
    links = {}
    for a in range(count):
        for b in range(count):
            if a == b:
                continue
            links[(a, b)] = _nvml_pair(nvml, handles, gpus, a, b, smi_links, warnings)
    # Keep the matrix symmetric (take the better-informed answer).
    for a in range(count):
        for b in range(a + 1, count):
            best = max(links[(a, b)], links[(b, a)], key=link_rank)
            links[(a, b)] = links[(b, a)] = best
    return links


def _nvml_active_links(nvml, handle):
    n = 0
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            if nvml.nvmlDeviceGetNvLinkState(handle, link) == getattr(nvml, "NVML_FEATURE_ENABLED", 1):
                n += 1
        except Exception:
            # NotSupported (no NVLink) or InvalidArgument (past the last link of this GPU).
            continue
    return n


def _nvml_pair(nvml, handles, gpus, a, b, smi_links, warnings):
    ha, hb = handles[a], handles[b]
    try:
        st = nvml.nvmlDeviceGetP2PStatus(ha, hb, nvml.NVML_P2P_CAPS_INDEX_NVLINK)
        if st == getattr(nvml, "NVML_P2P_STATUS_OK", 0):
            # Count links that land on b directly; behind an NVSwitch the remote end is the switch,
            # so every active link of a serves the pair (that is what topo -m prints too).
            direct = 0
            for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
                try:
                    if nvml.nvmlDeviceGetNvLinkState(ha, link) != getattr(nvml, "NVML_FEATURE_ENABLED", 1):
                        continue
                    remote = _s(nvml.nvmlDeviceGetNvLinkRemotePciInfo(ha, link).busId)
                except Exception:
                    continue
                if _same_bus(remote, gpus[b]["pci_bus_id"]):
                    direct += 1
            n = direct or gpus[a]["nvlinks_active"]
            if n:
                return "NV%d" % n
    except Exception:
        pass
    try:
        level = nvml.nvmlDeviceGetTopologyCommonAncestor(ha, hb)
        if level in _NVML_TOPO_LEVEL and level != 0:
            return _NVML_TOPO_LEVEL[level]
    except Exception:
        pass
    if smi_links and (a, b) in smi_links:
        return smi_links[(a, b)]
    warnings.append("NVML could not classify the link GPU%d-GPU%d and nvidia-smi topo -m was not available; "
                    "recorded as SYS (no NVLink assumed)" % (a, b))
    return "SYS"


def _same_bus(x, y):
    def norm(v):
        v = (v or "").lower()
        # NVML busId has an 8-digit domain; legacy ids have 4.
        parts = v.split(":")
        if len(parts) == 3:
            parts[0] = parts[0][-4:]
        return ":".join(parts)
    return bool(x) and norm(x) == norm(y)
