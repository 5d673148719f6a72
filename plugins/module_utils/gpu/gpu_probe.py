# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Reading the GPUs of the host they are on: collect_gpu_facts() (the gpu_facts module) reads NVML where it can
and nvidia-smi (topo -m, the CSV query, -q -x, nvlink -s) otherwise. Runs on the managed host.

What nvidia-smi prints is parsed in smi_output.py (pure functions). The NVML reader is gpu_nvml.py
(``read_nvml``): it takes the ``pynvml`` module as an argument so nothing imports it. The link vocabulary and the
gpu_facts shape are in gpu_links.py; described hardware (the controller) in topology.py.
"""

from __future__ import annotations

from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.gpu_links import TopologyParseError
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.gpu_nvml import read_nvml
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.smi_output import (
    gpu_facts_from_smi,
    parse_query_csv,
    parse_topo_matrix,
)

QUERY_FIELDS = "index,name,uuid,memory.total,pci.bus_id,driver_version,compute_cap,mig.mode.current"
SMI_SEARCH_DIRS = ("/usr/local/nvidia/bin", "/usr/bin")


class GpuFactsError(RuntimeError):
    """gpu_facts cannot read the GPUs; the message says why and what to do."""


def find_nvidia_smi(path_env, explicit=None, is_exe=None):
    """Locate nvidia-smi: ``explicit`` if given, else PATH, then /usr/local/nvidia/bin and /usr/bin."""
    import os
    is_exe = is_exe or (lambda p: os.path.isfile(p) and os.access(p, os.X_OK))
    if explicit:
        if not is_exe(explicit):
            raise GpuFactsError("nvidia_smi_path %s is not an executable file" % explicit)
        return explicit
    for d in [p for p in (path_env or "").split(os.pathsep) if p] + list(SMI_SEARCH_DIRS):
        cand = os.path.join(d, "nvidia-smi")
        if is_exe(cand):
            return cand
    return None


def sysfs_pci_path(bus_id):
    """'00000000:00:06.0' (NVML / nvidia-smi) -> '/sys/bus/pci/devices/0000:00:06.0'."""
    parts = (bus_id or "").lower().split(":")
    if len(parts) == 3:
        parts[0] = parts[0][-4:]
    return "/sys/bus/pci/devices/" + ":".join(parts)


class _SmiCommands:
    """Runs nvidia-smi subcommands, keeping each output (raw) and why the optional ones failed (warnings)."""

    def __init__(self, run, smi):
        self.run, self.smi = run, smi
        self.raw, self.warnings = {}, []

    def read(self, args, required):
        """The output of `nvidia-smi args`, or None when it failed and is not required (GpuFactsError if it is)."""
        rc, out, err = self.run([self.smi] + args)
        self.raw[" ".join(args)] = out if rc == 0 else "rc=%d\n%s%s" % (rc, out, err)
        if rc != 0:
            msg = "nvidia-smi %s failed (rc=%d): %s" % (" ".join(args), rc, (err or out).strip()[:500])
            if required:
                raise GpuFactsError(msg)
            self.warnings.append(msg)
            return None
        return out


def _read_topo(commands, use_nvml):
    """(topo -m's text, its links): either None where it cannot be read or parsed; NVML may do without them,
    nvidia-smi alone (use_nvml: false) may not."""
    topo_text = commands.read(["topo", "-m"], required=(use_nvml == "false"))
    if not topo_text:
        return topo_text, None
    try:
        return topo_text, parse_topo_matrix(topo_text)["links"]
    except TopologyParseError as e:
        if use_nvml == "false":
            raise
        commands.warnings.append(str(e))
        return topo_text, None


def _add_topo_placement(facts, topo):
    """The NICs and each GPU's CPU affinity from topo -m, and its NUMA node where NVML gave none."""
    by_idx = {g["index"]: g for g in topo["gpus"]}
    facts["nics"] = topo["nics"]
    for g in facts["gpus"]:
        t = by_idx.get(g["index"], {})
        g["cpu_affinity"] = t.get("cpu_affinity")
        if g["numa_node"] is None:
            g["numa_node"] = t.get("numa_node")


def _facts_from_nvml(import_nvml, topo_text, smi_links, nvswitch, read_numa):
    """gpu_facts read through NVML, placed with topo -m where it was read; raises when NVML cannot be used."""
    if import_nvml is None:
        raise ImportError("no NVML binding")
    nvml = import_nvml()
    facts = read_nvml(nvml, smi_links=smi_links)
    facts["nvswitch"] = nvswitch
    if topo_text and smi_links is not None:
        _add_topo_placement(facts, parse_topo_matrix(topo_text))
    for g in facts["gpus"]:
        if g["numa_node"] is None and read_numa:
            n = read_numa(g["pci_bus_id"])
            g["numa_node"] = n if n is not None and n >= 0 else None
    return facts


def _facts_from_smi(commands, topo_text, nvswitch_devices, read_numa):
    """gpu_facts from nvidia-smi alone: topo -m and the CSV query are required, -q -x and nvlink -s optional."""
    if not commands.smi:
        raise GpuFactsError("neither NVML nor nvidia-smi could be used: nvidia-smi is not in PATH, "
                            "/usr/local/nvidia/bin or /usr/bin; install the NVIDIA driver or set nvidia_smi_path")
    if topo_text is None:
        topo_text = commands.read(["topo", "-m"], required=True)
    query = commands.read(["--query-gpu=" + QUERY_FIELDS, "--format=csv"], required=True)
    xml_text = commands.read(["-q", "-x"], required=False)
    nvlink_text = commands.read(["nvlink", "-s"], required=False)
    numa = {}
    if read_numa:
        gpus, _warnings = parse_query_csv(query)
        numa = {(g["pci_bus_id"] or "").lower(): read_numa(g["pci_bus_id"]) for g in gpus}
    return gpu_facts_from_smi(query, topo_text, xml_text, nvlink_text, nvswitch_devices, numa)


def collect_gpu_facts(run, smi, use_nvml="auto", import_nvml=None, nvswitch_devices=(), read_numa=None):
    """Read the GPUs.

    run(argv) -> (rc, stdout, stderr); smi: nvidia-smi path or None; use_nvml: 'auto' | 'true' | 'false';
    import_nvml() -> the pynvml module (raises when unavailable); nvswitch_devices: entries of
    /proc/driver/nvidia-nvswitch/devices; read_numa(bus_id) -> int or None.
    Returns (gpu_facts, raw) where raw holds the command outputs that were read.
    """
    commands = _SmiCommands(run, smi)
    topo_text, smi_links = _read_topo(commands, use_nvml) if smi else (None, None)
    nvswitch = bool(list(nvswitch_devices))
    if use_nvml in ("auto", "true"):
        try:
            facts = _facts_from_nvml(import_nvml, topo_text, smi_links, nvswitch, read_numa)
            facts["warnings"] = commands.warnings + facts["warnings"]
            return facts, commands.raw
        except Exception as e:  # NVML missing, driver mismatch, library not found ...
            if use_nvml == "true":
                raise GpuFactsError("NVML could not read the GPUs (use_nvml: true): %s: %s" % (type(e).__name__, e))
            commands.warnings.append("NVML unavailable (%s: %s); read nvidia-smi instead" % (type(e).__name__, e))
    facts = _facts_from_smi(commands, topo_text, nvswitch_devices, read_numa)
    facts["warnings"] = commands.warnings + facts["warnings"]
    return facts, commands.raw
