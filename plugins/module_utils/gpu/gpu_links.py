# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""GPU links and the gpu_facts shape, shared by the host-side reader (gpu_probe.py) and the controller-side
described hardware (topology.py). Pure functions.

Link types are the ones ``nvidia-smi topo -m`` prints (its legend):
  X = self, SYS, NODE, PHB, PXB, PIX (PCIe, worst to best), NV<n> = <n> bonded NVLinks.
Older drivers printed SOC (now SYS) and PSB (now PXB); they are normalised.
"""

from __future__ import annotations

import re

PCIE_TYPES = ("SYS", "NODE", "PHB", "PXB", "PIX")
# Rank of a link: higher is better.  NVLink beats every PCIe path.
_PCIE_RANK = {"SYS": 0, "NODE": 1, "PHB": 2, "PXB": 3, "PIX": 4}
_LEGACY_TYPES = {"SOC": "SYS", "PSB": "PXB"}
_NV_RE = re.compile(r"^NV(\d+)$")
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


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
