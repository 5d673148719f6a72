# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""GPU topology: parse what nvidia-smi prints, read NVML, and assemble ``gpu_facts``.

Pure parsing functions (no I/O) come first; they take the text a command printed and
return plain data.  The NVML reader is kept apart (``read_nvml``): it takes the
``pynvml`` module as an argument so the rest of this file never imports it.

Link types are the ones ``nvidia-smi topo -m`` prints (its legend):
  X = self, SYS, NODE, PHB, PXB, PIX (PCIe, worst to best), NV<n> = <n> bonded NVLinks.
Older drivers printed SOC (now SYS) and PSB (now PXB); they are normalised.
"""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET

PCIE_TYPES = ("SYS", "NODE", "PHB", "PXB", "PIX")
# Rank of a link: higher is better.  NVLink beats every PCIe path.
_PCIE_RANK = {"SYS": 0, "NODE": 1, "PHB": 2, "PXB": 3, "PIX": 4}
_LEGACY_TYPES = {"SOC": "SYS", "PSB": "PXB"}
_NV_RE = re.compile(r"^NV(\d+)$")
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_GPU_LABEL = re.compile(r"^GPU(\d+)$")
_NIC_LABEL = re.compile(r"^(NIC\d+|mlx\d+_\d+|ib\d+|hfi\d+_\d+|bnxt_re\d+|irdma\d+|efa\d+)$")
_AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


class TopologyParseError(ValueError):
    """Raised when a capture has a shape this parser does not know.  The message names the line."""


def strip_ansi(text):
    """Remove terminal escape sequences (nvidia-smi underlines the topo header on a TTY)."""
    return _ANSI_RE.sub("", text)


def normalize_link(cell):
    """Return the canonical link type of one matrix cell, or None when the cell is not a link type."""
    cell = cell.strip()
    cell = _LEGACY_TYPES.get(cell, cell)
    if cell == "X" or cell in _PCIE_RANK or _NV_RE.match(cell):
        return cell
    return None


def nvlink_count(link):
    """Number of bonded NVLinks in a link type (0 for PCIe paths)."""
    m = _NV_RE.match(link or "")
    return int(m.group(1)) if m else 0


def link_rank(link):
    """Order links from worst (SYS = 0) to best (NVLink = 100 + links)."""
    n = nvlink_count(link)
    if n:
        return 100 + n
    return _PCIE_RANK.get(link, -1)


def _tokenize_header(line, lineno):
    """Split the topo header into column names (names with spaces are matched as a whole)."""
    rest = line.strip()
    cols = []
    while rest:
        for name in _AFFINITY_COLUMNS:
            if rest.startswith(name):
                cols.append(name)
                rest = rest[len(name):].lstrip()
                break
        else:
            tok = rest.split(None, 1)
            if _GPU_LABEL.match(tok[0]) or _NIC_LABEL.match(tok[0]):
                cols.append(tok[0])
            else:
                raise TopologyParseError(
                    "nvidia-smi topo -m: line %d: unknown header column %r in %r" % (lineno, tok[0], line.strip()))
            rest = tok[1].lstrip() if len(tok) > 1 else ""
    return cols


def _parse_cpu_list(value):
    """'0-47,96-143' -> [0..47, 96..143]; 'N/A' or '' -> []."""
    value = value.strip()
    if not value or value in ("N/A", "[N/A]"):
        return []
    cpus = []
    for part in value.split(","):
        if "-" in part:
            lo, hi = part.split("-", 1)
            cpus.extend(range(int(lo), int(hi) + 1))
        else:
            cpus.append(int(part))
    return cpus


def _int_or_none(value):
    value = (value or "").strip()
    try:
        return int(value)
    except ValueError:
        return None


def parse_topo_matrix(text):
    """Parse ``nvidia-smi topo -m``.

    Returns a dict:
      gpus: [{index, cpu_affinity (str), cpus (list of int), numa_node (int|None), gpu_numa_id (int|None)}]
      links: {(i, j): type} for every ordered GPU pair i != j
      nics: [{label, device, links: {gpu_index: type}}]

    Tolerates: a preamble (``NVIDIA Topology:``, ``# ...`` or ``$ nvidia-smi topo -m`` lines), tabs or spaces,
    padded `` X ``, empty cells, ANSI escapes, NIC rows (``NICn`` with a trailing ``NIC Legend:`` or ``mlx5_n``),
    and anything after the matrix (Legend, a ``topo -p2p`` block).  Fails with the line number on an unknown shape.
    """
    lines = strip_ansi(text).splitlines()
    header_at = None
    for i, line in enumerate(lines):
        toks = line.split()
        if toks and toks[0] == "GPU0":
            header_at = i
            break
    if header_at is None:
        raise TopologyParseError("nvidia-smi topo -m: no header line starting with GPU0 was found")
    columns = _tokenize_header(lines[header_at], header_at + 1)
    dev_cols = [c for c in columns if c not in _AFFINITY_COLUMNS]
    aff_cols = [c for c in columns if c in _AFFINITY_COLUMNS]
    if columns[:len(dev_cols)] != dev_cols:
        raise TopologyParseError(
            "nvidia-smi topo -m: line %d: affinity columns must follow the device columns: %r"
            % (header_at + 1, lines[header_at].strip()))

    rows = {}
    order = []
    end_at = len(lines)
    for i in range(header_at + 1, len(lines)):
        raw = lines[i]
        if not raw.strip():
            end_at = i
            break
        # The padded self cell (" X ") and empty cells vanish when splitting on whitespace.
        toks = raw.split()
        label = toks[0]
        if label not in dev_cols:
            raise TopologyParseError(
                "nvidia-smi topo -m: line %d: row %r is not one of the header's devices %s: %r"
                % (i + 1, label, ", ".join(dev_cols), raw.strip()))
        cells = toks[1:1 + len(dev_cols)]
        if len(cells) < len(dev_cols):
            raise TopologyParseError(
                "nvidia-smi topo -m: line %d: expected %d link cells, found %d: %r"
                % (i + 1, len(dev_cols), len(cells), raw.strip()))
        links = []
        for col, cell in zip(dev_cols, cells):
            t = normalize_link(cell)
            if t is None:
                raise TopologyParseError(
                    "nvidia-smi topo -m: line %d: unknown link type %r in column %s: %r"
                    % (i + 1, cell, col, raw.strip()))
            links.append(t)
        if links[dev_cols.index(label)] != "X":
            raise TopologyParseError(
                "nvidia-smi topo -m: line %d: the diagonal cell of %s is %r, expected X"
                % (i + 1, label, links[dev_cols.index(label)]))
        extra = toks[1 + len(dev_cols):]
        if extra and len(extra) != len(aff_cols):
            raise TopologyParseError(
                "nvidia-smi topo -m: line %d: expected %d affinity values (%s), found %r"
                % (i + 1, len(aff_cols), ", ".join(aff_cols), extra))
        rows[label] = (dict(zip(dev_cols, links)), dict(zip(aff_cols, extra)))
        order.append(label)

    gpu_labels = [c for c in dev_cols if _GPU_LABEL.match(c)]
    missing = [c for c in gpu_labels if c not in rows]
    if missing:
        raise TopologyParseError("nvidia-smi topo -m: the header names %s but no row was found for %s"
                                 % (", ".join(gpu_labels), ", ".join(missing)))

    nic_names = parse_nic_legend("\n".join(lines[end_at:]))
    gpus = []
    links = {}
    for label in gpu_labels:
        idx = int(_GPU_LABEL.match(label).group(1))
        row, aff = rows[label]
        numa = _int_or_none(aff.get("NUMA Affinity"))
        gpus.append({
            "index": idx,
            "cpu_affinity": aff.get("CPU Affinity", ""),
            "cpus": _parse_cpu_list(aff.get("CPU Affinity", "")),
            "numa_node": numa,
            "gpu_numa_id": _int_or_none(aff.get("GPU NUMA ID")),
        })
        for other in gpu_labels:
            if other != label:
                links[(idx, int(_GPU_LABEL.match(other).group(1)))] = row[other]
    for (a, b), t in links.items():
        if links.get((b, a)) != t:
            raise TopologyParseError("nvidia-smi topo -m: the matrix is not symmetric: GPU%d->GPU%d is %s but "
                                     "GPU%d->GPU%d is %s" % (a, b, t, b, a, links.get((b, a))))
    nics = []
    for label in dev_cols:
        if label in gpu_labels:
            continue
        row = rows.get(label, (None, None))[0]
        if row is None:
            # NIC rows are optional: the GPU rows already carry the GPU<->NIC cells.
            row = {g: rows[g][0][label] for g in gpu_labels}
        nics.append({
            "label": label,
            "device": nic_names.get(label, label),
            "links": {int(_GPU_LABEL.match(g).group(1)): row[g] for g in gpu_labels},
        })
    return {"gpus": gpus, "links": links, "nics": nics}


def parse_nic_legend(text):
    """Parse the ``NIC Legend:`` block ('  NIC0: mlx5_0') into {'NIC0': 'mlx5_0'}."""
    out = {}
    in_legend = False
    for line in text.splitlines():
        if line.strip() == "NIC Legend:":
            in_legend = True
            continue
        if in_legend:
            m = re.match(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$", line)
            if m:
                out[m.group(1)] = m.group(2)
            elif line.strip():
                break
    return out


def _mib(value):
    """'143771 MiB' or '143771' -> 143771; '[N/A]' -> None."""
    m = re.match(r"^\s*(\d+)\s*(MiB)?\s*$", value or "")
    return int(m.group(1)) if m else None


def _na(value):
    v = (value or "").strip()
    if not v or v.startswith("[") or v in ("N/A", "Not Supported"):
        return None
    return v


def parse_query_csv(text):
    """Parse ``nvidia-smi --query-gpu=index,name,uuid,memory.total,pci.bus_id,driver_version,compute_cap,
    mig.mode.current --format=csv`` (with its header; any column order; units optional).

    Returns (gpus, driver_version): gpus is a list of dicts with index, name, uuid, memory_total_mib,
    pci_bus_id, compute_capability, mig_mode; None where the driver answered [N/A] / [Not Supported].
    """
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise TopologyParseError("nvidia-smi --query-gpu: empty output")
    reader = csv.reader(io.StringIO("\n".join(lines)), skipinitialspace=True)
    header = [h.strip() for h in next(reader)]
    keys = []
    for h in header:
        key = re.sub(r"\s*\[.*\]$", "", h)  # 'memory.total [MiB]' -> 'memory.total'
        keys.append(key)
    if "index" not in keys:
        raise TopologyParseError("nvidia-smi --query-gpu: line 1: no 'index' column in header %r" % lines[0])
    gpus = []
    drivers = set()
    for n, row in enumerate(reader, start=2):
        if len(row) != len(keys):
            raise TopologyParseError("nvidia-smi --query-gpu: line %d: %d values for %d columns: %r"
                                     % (n, len(row), len(keys), lines[n - 1]))
        rec = dict(zip(keys, [c.strip() for c in row]))
        try:
            index = int(rec["index"])
        except ValueError:
            raise TopologyParseError("nvidia-smi --query-gpu: line %d: index %r is not a number"
                                     % (n, rec["index"]))
        gpu = {
            "index": index,
            "name": _na(rec.get("name")),
            "uuid": _na(rec.get("uuid")),
            "memory_total_mib": _mib(rec.get("memory.total")),
            "pci_bus_id": _na(rec.get("pci.bus_id")),
            "compute_capability": _na(rec.get("compute_cap")),
            "mig_mode": _na(rec.get("mig.mode.current")),
        }
        if _na(rec.get("driver_version")):
            drivers.add(rec["driver_version"])
        gpus.append(gpu)
    return gpus, (sorted(drivers)[0] if drivers else None)


def parse_smi_xml(text):
    """Parse ``nvidia-smi -q -x``: driver/CUDA version and per-GPU facts (by minor number order of appearance).

    Returns {driver_version, cuda_version, gpus: [{pci_bus_id, name, uuid, memory_total_mib, memory_reserved_mib
    (what the driver keeps: CUDA sees total - reserved; None on drivers that do not print it), mig_mode,
    fabric_state, fabric_status, architecture}]}.
    """
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        raise TopologyParseError("nvidia-smi -q -x: not XML: %s" % e)

    def txt(node, path):
        el = node.find(path)
        return _na(el.text) if el is not None and el.text is not None else None

    gpus = []
    for g in root.findall("gpu"):
        gpus.append({
            "pci_bus_id": g.get("id") or txt(g, "pci/pci_bus_id"),
            "name": txt(g, "product_name"),
            "uuid": txt(g, "uuid"),
            "minor_number": _int_or_none(txt(g, "minor_number")),
            "architecture": txt(g, "product_architecture"),
            "memory_total_mib": _mib(txt(g, "fb_memory_usage/total")),
            "memory_reserved_mib": _mib(txt(g, "fb_memory_usage/reserved")),
            "mig_mode": txt(g, "mig_mode/current_mig"),
            "fabric_state": txt(g, "fabric/state"),
            "fabric_status": txt(g, "fabric/status"),
        })
    return {
        "driver_version": txt(root, "driver_version"),
        "cuda_version": txt(root, "cuda_version"),
        "gpus": gpus,
    }


def parse_nvlink_status(text):
    """Parse ``nvidia-smi nvlink -s``: {gpu_index: {'links': n_active, 'gbps_per_link': float|None}}.

    Inactive links print ``<inactive>``; they are not counted.
    """
    out = {}
    current = None
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        m = re.match(r"^GPU (\d+):", line)
        if m:
            current = int(m.group(1))
            out[current] = {"links": 0, "gbps_per_link": None}
            continue
        m = re.match(r"^\s*Link (\d+):\s*(.*)$", line)
        if m and current is not None:
            speed = re.match(r"^([\d.]+) GB/s", m.group(2).strip())
            if speed:
                out[current]["links"] += 1
                out[current]["gbps_per_link"] = float(speed.group(1))
            continue
        # Other lines (e.g. "NVML: Unable to retrieve NVLink information") are tolerated: the query is optional.
    return out


def nvlink_domains(indices, links):
    """Partition GPUs into NVLink domains: every GPU in exactly one domain, GPUs of a domain pairwise
    NVLink-connected.  Connected components of the NVLink graph that are cliques are kept whole; a component
    that is not a clique (e.g. a hybrid cube mesh) is split greedily into cliques, biggest first.
    """
    idx = sorted(indices)
    nv = {i: {j for j in idx if j != i and nvlink_count(links.get((i, j)))} for i in idx}
    domains = []
    left = list(idx)
    while left:
        # Grow a clique from the lowest index, adding the candidate with most NVLink peers among those left.
        seed = left[0]
        clique = [seed]
        cand = [j for j in left if j in nv[seed]]
        while cand:
            cand.sort(key=lambda j: (-len(nv[j] & set(cand)), j))
            pick = cand[0]
            clique.append(pick)
            cand = [j for j in cand[1:] if j in nv[pick]]
        clique.sort()
        domains.append(clique)
        left = [j for j in left if j not in clique]
    return domains


def links_as_list(links):
    """{(i, j): type} -> [{'gpus': [i, j], 'type': type, 'nvlinks': n}] for i < j (JSON friendly)."""
    out = []
    for (a, b), t in sorted(links.items()):
        if a < b:
            out.append({"gpus": [a, b], "type": t, "nvlinks": nvlink_count(t)})
    return out


def links_from_list(items):
    """Inverse of links_as_list: [{'gpus': [i, j], 'type': t}] -> {(i, j): t, (j, i): t}."""
    out = {}
    for item in items or []:
        a, b = item["gpus"]
        out[(a, b)] = item["type"]
        out[(b, a)] = item["type"]
    return out


def build_gpu_facts(gpus, driver_version, links, source, nvswitch=False, nics=None, cuda_version=None,
                    warnings=None):
    """Assemble the ``gpu_facts`` dict from parts already parsed (any source)."""
    indices = [g["index"] for g in gpus]
    return {
        "source": source,
        "driver_version": driver_version,
        "cuda_version": cuda_version,
        "gpu_count": len(gpus),
        "gpus": sorted(gpus, key=lambda g: g["index"]),
        "links": links_as_list(links),
        "nvlink_domains": nvlink_domains(indices, links),
        "nvswitch": bool(nvswitch),
        "nics": nics or [],
        "warnings": list(warnings or []),
    }


def gpu_facts_from_smi(query_csv, topo_text, xml_text=None, nvlink_text=None, nvswitch_devices=(),
                       sysfs_numa=None):
    """Build gpu_facts from nvidia-smi captures alone.  ``query_csv`` and ``topo_text`` are required;
    ``xml_text`` (-q -x) and ``nvlink_text`` (nvlink -s) are optional extras (pass None when they failed).
    ``nvswitch_devices`` lists /proc/driver/nvidia-nvswitch/devices entries; ``sysfs_numa`` maps a PCI
    bus id to the numa_node sysfs reports (used where topo -m gave none).
    """
    gpus, driver = parse_query_csv(query_csv)
    topo = parse_topo_matrix(topo_text)
    warnings = []
    topo_by_idx = {g["index"]: g for g in topo["gpus"]}
    if sorted(topo_by_idx) != sorted(g["index"] for g in gpus):
        raise TopologyParseError("nvidia-smi: --query-gpu lists GPUs %s but topo -m lists %s"
                                 % (sorted(g["index"] for g in gpus), sorted(topo_by_idx)))
    cuda = None
    xml_by_bus = {}
    if xml_text:
        try:
            x = parse_smi_xml(xml_text)
            cuda = x["cuda_version"]
            driver = driver or x["driver_version"]
            xml_by_bus = {(g["pci_bus_id"] or "").lower(): g for g in x["gpus"]}
        except TopologyParseError as e:
            warnings.append(str(e))
    nvl = {}
    if nvlink_text:
        nvl = parse_nvlink_status(nvlink_text)
    for g in gpus:
        t = topo_by_idx[g["index"]]
        g["numa_node"] = t["numa_node"]
        if g["numa_node"] is None and sysfs_numa:
            n = sysfs_numa.get((g["pci_bus_id"] or "").lower())
            g["numa_node"] = n if n is not None and n >= 0 else None
        g["cpu_affinity"] = t["cpu_affinity"]
        xg = xml_by_bus.get((g["pci_bus_id"] or "").lower(), {})
        g["architecture"] = xg.get("architecture")
        if xg.get("memory_reserved_mib") is not None:
            g["memory_reserved_mib"] = xg["memory_reserved_mib"]
        g["fabric_state"] = xg.get("fabric_state")
        if g["mig_mode"] is None:
            g["mig_mode"] = xg.get("mig_mode")
        if g["index"] in nvl:
            g["nvlinks_active"] = nvl[g["index"]]["links"]
    return build_gpu_facts(gpus, driver, topo["links"], "nvidia-smi", nvswitch=bool(list(nvswitch_devices)),
                           nics=topo["nics"], cuda_version=cuda, warnings=warnings)


# Hardware described rather than read (plan before you buy): names come from the GPU catalogue
# (catalogue/gpus.yml, plugins/module_utils/gpu_catalogue.py), e.g. "4x L40S", "8x H100 SXM", "2x H200 NVLink".
def gpu_facts_from_spec(spec, catalogue=None):
    """gpu_facts for described hardware.  ``spec`` is a catalogue string ('<count>x <GPU>[ PCIe|NVLink]') or a
    dict {count, memory_mib, link (between every pair), name, compute_capability, nvswitch, reserved_mib} whose
    ``name`` may also be a catalogue name (then memory and links default to the catalogue's).  ``catalogue``
    defaults to the collection's catalogue/gpus.yml (read on the controller)."""
    from ansible_collections.llmfleet.vllm.plugins.module_utils import gpu_catalogue as C

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
        try:
            cuda_v = nvml.nvmlSystemGetCudaDriverVersion_v2()
            cuda = "%d.%d" % (cuda_v // 1000, (cuda_v % 1000) // 10)
        except Exception:  # optional
            cuda = None
        count = nvml.nvmlDeviceGetCount()
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        gpus = []
        for i, h in enumerate(handles):
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
            gpus.append({
                "index": i,
                "name": _s(nvml.nvmlDeviceGetName(h)),
                "uuid": _s(nvml.nvmlDeviceGetUUID(h)),
                "memory_total_mib": int(nvml.nvmlDeviceGetMemoryInfo(h).total // (1024 * 1024)),
                "pci_bus_id": bus,
                "numa_node": numa if isinstance(numa, int) and numa >= 0 else None,
                "mig_mode": mig,
                "compute_capability": cc,
                "nvlinks_active": _nvml_active_links(nvml, h),
            })
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
        return build_gpu_facts(gpus, driver, links, "nvml", cuda_version=cuda, warnings=warnings)
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass


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


# --------------------------------------------------------------------------------------------------------
# Orchestration: which source to read.  I/O is injected so tests can replay real captures.
# --------------------------------------------------------------------------------------------------------

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


def collect_gpu_facts(run, smi, use_nvml="auto", import_nvml=None, nvswitch_devices=(), read_numa=None):
    """Read the GPUs.

    run(argv) -> (rc, stdout, stderr); smi: nvidia-smi path or None; use_nvml: 'auto' | 'true' | 'false';
    import_nvml() -> the pynvml module (raises when unavailable); nvswitch_devices: entries of
    /proc/driver/nvidia-nvswitch/devices; read_numa(bus_id) -> int or None.
    Returns (gpu_facts, raw) where raw holds the command outputs that were read.
    """
    raw = {}
    warnings = []

    def smi_run(args, required):
        rc, out, err = run([smi] + args)
        raw[" ".join(args)] = out if rc == 0 else "rc=%d\n%s%s" % (rc, out, err)
        if rc != 0:
            msg = "nvidia-smi %s failed (rc=%d): %s" % (" ".join(args), rc, (err or out).strip()[:500])
            if required:
                raise GpuFactsError(msg)
            warnings.append(msg)
            return None
        return out

    smi_links = None
    topo_text = None
    if smi:
        topo_text = smi_run(["topo", "-m"], required=(use_nvml == "false"))
        if topo_text:
            try:
                smi_links = parse_topo_matrix(topo_text)["links"]
            except TopologyParseError as e:
                if use_nvml == "false":
                    raise
                warnings.append(str(e))

    nvswitch = bool(list(nvswitch_devices))
    if use_nvml in ("auto", "true"):
        try:
            if import_nvml is None:
                raise ImportError("no NVML binding")
            nvml = import_nvml()
            facts = read_nvml(nvml, smi_links=smi_links)
            facts["nvswitch"] = nvswitch
            if topo_text and smi_links is not None:
                topo = parse_topo_matrix(topo_text)
                by_idx = {g["index"]: g for g in topo["gpus"]}
                facts["nics"] = topo["nics"]
                for g in facts["gpus"]:
                    t = by_idx.get(g["index"], {})
                    g["cpu_affinity"] = t.get("cpu_affinity")
                    if g["numa_node"] is None:
                        g["numa_node"] = t.get("numa_node")
            for g in facts["gpus"]:
                if g["numa_node"] is None and read_numa:
                    n = read_numa(g["pci_bus_id"])
                    g["numa_node"] = n if n is not None and n >= 0 else None
            facts["warnings"] = warnings + facts["warnings"]
            return facts, raw
        except Exception as e:  # NVML missing, driver mismatch, library not found ...
            if use_nvml == "true":
                raise GpuFactsError("NVML could not read the GPUs (use_nvml: true): %s: %s" % (type(e).__name__, e))
            warnings.append("NVML unavailable (%s: %s); read nvidia-smi instead" % (type(e).__name__, e))

    if not smi:
        raise GpuFactsError("neither NVML nor nvidia-smi could be used: nvidia-smi is not in PATH, "
                            "/usr/local/nvidia/bin or /usr/bin; install the NVIDIA driver or set nvidia_smi_path")
    if topo_text is None:
        topo_text = smi_run(["topo", "-m"], required=True)
    query = smi_run(["--query-gpu=" + QUERY_FIELDS, "--format=csv"], required=True)
    xml_text = smi_run(["-q", "-x"], required=False)
    nvlink_text = smi_run(["nvlink", "-s"], required=False)
    numa = {}
    if read_numa:
        gpus, _warnings = parse_query_csv(query)
        numa = {(g["pci_bus_id"] or "").lower(): read_numa(g["pci_bus_id"]) for g in gpus}
    facts = gpu_facts_from_smi(query, topo_text, xml_text, nvlink_text, nvswitch_devices, numa)
    facts["warnings"] = warnings + facts["warnings"]
    return facts, raw
