# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""GPU topology as the controller sees it: described hardware (gpu_facts_from_spec), and, for the code that
imported them from here, the names of the two modules this one was split into by where they run:
gpu_links.py (the link vocabulary and the gpu_facts shape, shared), gpu_probe.py (reads the GPUs on the managed
host for the gpu_facts module), smi_output.py (what nvidia-smi prints, parsed) and gpu_nvml.py (NVML).
"""

from __future__ import annotations

# pylint: disable=unused-import
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.gpu_links import (  # noqa: F401
    PCIE_TYPES,
    TopologyParseError,
    build_gpu_facts,
    link_rank,
    links_as_list,
    links_from_list,
    normalize_link,
    nvlink_count,
    nvlink_domains,
    strip_ansi,
)
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.gpu_probe import (  # noqa: F401
    QUERY_FIELDS,
    SMI_SEARCH_DIRS,
    GpuFactsError,
    collect_gpu_facts,
    find_nvidia_smi,
    sysfs_pci_path,
)
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.smi_output import (  # noqa: F401
    gpu_facts_from_smi,
    parse_nic_legend,
    parse_nvlink_status,
    parse_query_csv,
    parse_smi_xml,
    parse_topo_matrix,
)
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.gpu_nvml import _same_bus, read_nvml  # noqa: F401
# pylint: enable=unused-import


def gpu_facts_from_spec(spec, catalogue=None):
    """gpu_facts for described hardware.  ``spec`` is a catalogue string ('<count>x <GPU>[ PCIe|NVLink]') or a
    dict {count, memory_mib, link (between every pair), name, compute_capability, nvswitch, reserved_mib} whose
    ``name`` may also be a catalogue name (then memory and links default to the catalogue's).  ``catalogue``
    defaults to the collection's catalogue/gpus.yml (read on the controller)."""
    from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu import gpu_catalogue as C

    if isinstance(spec, str) or (isinstance(spec, dict) and "memory_mib" not in spec and spec.get("name")):
        catalogue = catalogue if catalogue is not None else C.load_catalogue()
        if isinstance(spec, str):
            spec = C.parse_hardware(spec, catalogue)
        else:
            cname = C.lookup(spec["name"], catalogue) or C.match_smi_name(spec["name"], catalogue)
            if cname is None:
                raise C.CatalogueError("hardware name %r is not in the catalogue (%s); give memory_mib too"
                                       % (spec["name"], ", ".join(C.names(catalogue))))
            link = spec.get("link")
            word = C.LINK_WORDS.get(str(link).lower()) if link is not None else None
            base = C.spec_for(cname, int(spec.get("count", 1)), catalogue, word)
            if link is not None and word is None:
                base.pop("links")
                base["link"] = link
            spec = base
    count = int(spec["count"])
    links = spec.get("links")
    if links is None:
        link = normalize_link(str(spec.get("link", "PHB")))
        if link is None or link == "X":
            raise ValueError("hardware link %r is not one of NV<n>, PIX, PXB, PHB, NODE, SYS" % spec.get("link"))
        links = {(a, b): link for a in range(count) for b in range(count) if a != b}
    gpus = [{
        "index": i, "name": spec.get("name", "GPU"), "uuid": None, "memory_total_mib": int(spec["memory_mib"]),
        "pci_bus_id": None, "numa_node": 0, "mig_mode": None,
        "compute_capability": spec.get("compute_capability"),
    } for i in range(count)]
    for g in gpus:
        for key, src in (("memory_reserved_mib", "reserved_mib"), ("catalogue", "catalogue"), ("fp8", "fp8")):
            if spec.get(src) is not None:
                g[key] = spec[src]
    return build_gpu_facts(gpus, None, links, "described", nvswitch=spec.get("nvswitch", False))


# --------------------------------------------------------------------------------------------------------
# NVML (nvidia-ml-py).  Everything below talks to the driver; it takes the pynvml module as an argument.
# --------------------------------------------------------------------------------------------------------

# nvmlGpuTopologyLevel_t -> topo -m names (NVML API reference: NVML_TOPOLOGY_INTERNAL 0, SINGLE 10,
# MULTIPLE 20, HOSTBRIDGE 30, NODE 40, SYSTEM 50).
