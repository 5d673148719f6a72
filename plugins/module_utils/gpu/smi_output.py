# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What nvidia-smi prints, parsed: topo -m (the link matrix, NICs, CPU and NUMA affinity), the CSV query, -q -x and
nvlink -s, and gpu_facts_from_smi() that builds gpu_facts from those captures alone. Pure functions, no I/O: each
takes the text a command printed and returns plain data. gpu_probe.py runs the commands; the link vocabulary and
the gpu_facts shape are in gpu_links.py.
"""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET

from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.gpu_links import (
    TopologyParseError,
    build_gpu_facts,
    normalize_link,
    strip_ansi,
)


_GPU_LABEL = re.compile(r"^GPU(\d+)$")
_NIC_LABEL = re.compile(r"^(NIC\d+|mlx\d+_\d+|ib\d+|hfi\d+_\d+|bnxt_re\d+|irdma\d+|efa\d+)$")
_AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


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


def _topo_header(lines):
    """(header line number, device columns, affinity columns) of ``nvidia-smi topo -m`` lines."""
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
    return header_at, dev_cols, aff_cols


def _topo_row(raw, number, dev_cols, aff_cols):
    """(label, {column: link}, {affinity column: value}) of one matrix row (number: its line, for messages)."""
    # The padded self cell (" X ") and empty cells vanish when splitting on whitespace.
    toks = raw.split()
    label = toks[0]
    if label not in dev_cols:
        raise TopologyParseError(
            "nvidia-smi topo -m: line %d: row %r is not one of the header's devices %s: %r"
            % (number, label, ", ".join(dev_cols), raw.strip()))
    cells = toks[1:1 + len(dev_cols)]
    if len(cells) < len(dev_cols):
        raise TopologyParseError(
            "nvidia-smi topo -m: line %d: expected %d link cells, found %d: %r"
            % (number, len(dev_cols), len(cells), raw.strip()))
    links = []
    for col, cell in zip(dev_cols, cells):
        t = normalize_link(cell)
        if t is None:
            raise TopologyParseError(
                "nvidia-smi topo -m: line %d: unknown link type %r in column %s: %r"
                % (number, cell, col, raw.strip()))
        links.append(t)
    if links[dev_cols.index(label)] != "X":
        raise TopologyParseError(
            "nvidia-smi topo -m: line %d: the diagonal cell of %s is %r, expected X"
            % (number, label, links[dev_cols.index(label)]))
    extra = toks[1 + len(dev_cols):]
    if extra and len(extra) != len(aff_cols):
        raise TopologyParseError(
            "nvidia-smi topo -m: line %d: expected %d affinity values (%s), found %r"
            % (number, len(aff_cols), ", ".join(aff_cols), extra))
    return label, dict(zip(dev_cols, links)), dict(zip(aff_cols, extra))


def _topo_gpus(rows, gpu_labels):
    """(gpus, links {(i, j): type}) from the parsed rows; the matrix must be symmetric."""
    gpus = []
    links = {}
    for label in gpu_labels:
        idx = int(_GPU_LABEL.match(label).group(1))
        row, aff = rows[label]
        gpus.append({
            "index": idx,
            "cpu_affinity": aff.get("CPU Affinity", ""),
            "cpus": _parse_cpu_list(aff.get("CPU Affinity", "")),
            "numa_node": _int_or_none(aff.get("NUMA Affinity")),
            "gpu_numa_id": _int_or_none(aff.get("GPU NUMA ID")),
        })
        for other in gpu_labels:
            if other != label:
                links[(idx, int(_GPU_LABEL.match(other).group(1)))] = row[other]
    for (a, b), t in links.items():
        if links.get((b, a)) != t:
            raise TopologyParseError("nvidia-smi topo -m: the matrix is not symmetric: GPU%d->GPU%d is %s but "
                                     "GPU%d->GPU%d is %s" % (a, b, t, b, a, links.get((b, a))))
    return gpus, links


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
    header_at, dev_cols, aff_cols = _topo_header(lines)
    rows = {}
    end_at = len(lines)
    for i in range(header_at + 1, len(lines)):
        if not lines[i].strip():
            end_at = i
            break
        label, row, aff = _topo_row(lines[i], i + 1, dev_cols, aff_cols)
        rows[label] = (row, aff)

    gpu_labels = [c for c in dev_cols if _GPU_LABEL.match(c)]
    missing = [c for c in gpu_labels if c not in rows]
    if missing:
        raise TopologyParseError("nvidia-smi topo -m: the header names %s but no row was found for %s"
                                 % (", ".join(gpu_labels), ", ".join(missing)))
    nic_names = parse_nic_legend("\n".join(lines[end_at:]))
    gpus, links = _topo_gpus(rows, gpu_labels)
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
