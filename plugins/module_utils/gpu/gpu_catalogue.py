# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPU catalogue (catalogue/gpus.yml): parse `hardware: "4x L40S"`, and match the names nvidia-smi reports.

Pure functions over the catalogue mapping; only ``load_catalogue`` reads the file (controller side: the data
file is not shipped to managed hosts, so modules that run there never call it).
"""

from __future__ import annotations

import os
import re

# The collection's root: plugins/module_utils/gpu/ is three levels below it.
COLLECTION_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CATALOGUE_PATH = os.path.join(COLLECTION_ROOT, "catalogue", "gpus.yml")
INTERCONNECTS = ("nvswitch", "nvlink-bridge", "pcie")
ENTRY_KEYS = {"aliases", "smi_names", "memory_mib", "reserved_mib", "compute_capability", "fp8", "interconnect",
              "nvlinks", "form", "pairs_by_default"}
# Link words a `hardware:` string may end with, and what they ask for.
LINK_WORDS = {"pcie": "pcie", "nvlink": "nvlink", "nvswitch": "nvlink", "hgx": "nvlink"}
PCIE_LINK = "PHB"
_SPEC = re.compile(r"^\s*(\d+)\s*[xX×]\s*(.+?)\s*$")

_CACHE = {}


class CatalogueError(ValueError):
    """A hardware description or catalogue entry the planner cannot use; the message lists what it knows."""


def _norm(name):
    return re.sub(r"[\s_\-]+", " ", str(name).strip().lower())


def validate_catalogue(data, where="catalogue"):
    """Check the catalogue mapping; returns {name: entry}."""
    gpus = (data or {}).get("gpus") if isinstance(data, dict) else None
    if not isinstance(gpus, dict) or not gpus:
        raise CatalogueError("%s: expected a mapping 'gpus: {name: {...}}'" % where)
    seen = {}
    for name, e in gpus.items():
        w = "%s: gpus.%s" % (where, name)
        if not isinstance(e, dict):
            raise CatalogueError("%s: expected a mapping" % w)
        unknown = set(e) - ENTRY_KEYS
        if unknown:
            raise CatalogueError("%s: unknown keys %s" % (w, sorted(unknown)))
        for key in ("smi_names", "memory_mib", "compute_capability", "fp8", "interconnect", "form"):
            if key not in e:
                raise CatalogueError("%s: missing %s" % (w, key))
        if e["interconnect"] not in INTERCONNECTS:
            raise CatalogueError("%s: interconnect must be one of %s" % (w, ", ".join(INTERCONNECTS)))
        if e["interconnect"] != "pcie" and not e.get("nvlinks"):
            raise CatalogueError("%s: an NVLink GPU needs nvlinks (the NV<n> of nvidia-smi topo -m)" % w)
        for n in [name] + list(e.get("aliases") or []):
            k = _norm(n)
            if k in seen and seen[k] != name:
                raise CatalogueError("%s: name %r is also used by %s" % (w, n, seen[k]))
            seen[k] = name
    return gpus


def load_catalogue(path=None):
    """Read and validate catalogue/gpus.yml (cached per path)."""
    path = path or CATALOGUE_PATH
    if path not in _CACHE:
        import yaml  # controller-side only

        with open(path) as fh:
            _CACHE[path] = validate_catalogue(yaml.safe_load(fh), where=path)
    return _CACHE[path]


def names(catalogue):
    return sorted(catalogue)


def lookup(name, catalogue):
    """The catalogue name for a user-written GPU name or alias (None when unknown)."""
    k = _norm(name)
    for cname, e in catalogue.items():
        if k == _norm(cname) or k in {_norm(a) for a in e.get("aliases") or []}:
            return cname
    return None


def match_smi_name(smi_name, catalogue, memory_mib=None):
    """The catalogue name for the product name nvidia-smi / NVML reports (e.g. 'NVIDIA H100 80GB HBM3'), or
    None.  Exact (case-insensitive) match on smi_names first; then the name without its 'NVIDIA ' /
    'NVIDIA GeForce ' prefix as a user-written name.  ``memory_mib`` breaks ties between memory sizes."""
    if not smi_name:
        return None
    k = _norm(smi_name)
    hits = [c for c, e in catalogue.items() if k in {_norm(s) for s in e.get("smi_names") or []}]
    if not hits:
        short = re.sub(r"^(nvidia )?(geforce )?", "", k)
        c = lookup(short, catalogue)
        hits = [c] if c else []
    if len(hits) > 1 and memory_mib:
        hits = sorted(hits, key=lambda c: abs(catalogue[c]["memory_mib"] - int(memory_mib)))
    return hits[0] if hits else None


def parse_hardware(text, catalogue):
    """'4x L40S', '8x H100 SXM', '2x RTX 4090 PCIe', '1x H200', '8x H20', '2x H200 NVLink' -> a spec for
    topology.gpu_facts_from_spec: {count, name, catalogue, memory_mib, reserved_mib, compute_capability, fp8,
    links: {(i, j): type}, nvswitch, label}.  An unknown GPU name raises CatalogueError listing the catalogue."""
    m = _SPEC.match(str(text))
    if not m:
        raise CatalogueError("hardware %r: write '<count>x <GPU>[ PCIe|NVLink]', e.g. '4x L40S', '8x H100 SXM', "
                             "'2x RTX 4090 PCIe'; GPUs: %s" % (text, ", ".join(names(catalogue))))
    count, rest = int(m.group(1)), m.group(2)
    if count < 1:
        raise CatalogueError("hardware %r: the count must be at least 1" % text)
    cname, link = lookup(rest, catalogue), None
    if cname is None:
        words = rest.split()
        if len(words) > 1 and words[-1].lower() in LINK_WORDS:
            link = LINK_WORDS[words[-1].lower()]
            cname = lookup(" ".join(words[:-1]), catalogue)
    if cname is None:
        raise CatalogueError("hardware %r: unknown GPU %r; the catalogue (catalogue/gpus.yml) knows: %s "
                             "(a link may follow: PCIe or NVLink), or describe it as {count, memory_mib, link}"
                             % (text, rest, ", ".join(names(catalogue))))
    return spec_for(cname, count, catalogue, link, label=str(text).strip())


def spec_for(cname, count, catalogue, link=None, label=None):
    """The spec of ``count`` GPUs of catalogue entry ``cname``; ``link``: None (the entry's usual wiring),
    'pcie' or 'nvlink'."""
    e = catalogue[cname]
    ic = e["interconnect"]
    if link == "nvlink" and ic == "pcie":
        raise CatalogueError("%s has no NVLink (PCIe only); drop 'NVLink' from the hardware" % cname)
    nv = "NV%d" % e["nvlinks"] if ic != "pcie" else None
    if link is None:
        link = "nvlink" if ic == "nvswitch" or (ic == "nvlink-bridge" and e.get("pairs_by_default")) else "pcie"
    links = {}
    for a in range(count):
        for b in range(count):
            if a == b:
                continue
            if link == "pcie":
                links[(a, b)] = PCIE_LINK
            elif ic == "nvswitch":
                links[(a, b)] = nv
            else:  # bridges join pairs (0-1, 2-3, ...); other pairs talk over PCIe
                links[(a, b)] = nv if a // 2 == b // 2 else PCIE_LINK
    return {"count": count, "name": e["smi_names"][0], "catalogue": cname, "memory_mib": e["memory_mib"],
            "reserved_mib": e.get("reserved_mib"), "compute_capability": str(e["compute_capability"]),
            "fp8": bool(e["fp8"]), "links": links,
            "nvswitch": bool(link == "nvlink" and ic == "nvswitch" and count > 4),
            "label": label or "%dx %s" % (count, cname)}


def annotate_gpu_facts(facts, catalogue):
    """Add catalogue facts to each GPU of ``gpu_facts`` whose nvidia-smi name the catalogue knows: catalogue
    (its name), fp8, and memory_reserved_mib where the catalogue has it and gpu_facts has none.  Returns a new
    dict; GPUs the catalogue does not know are left as they are (the planner then assumes a 0.5% reserve)."""
    if not facts or not facts.get("gpus"):
        return facts
    out = dict(facts)
    out["gpus"] = []
    for g in facts["gpus"]:
        g = dict(g)
        c = g.get("catalogue") or match_smi_name(g.get("name"), catalogue, g.get("memory_total_mib"))
        if c:
            e = catalogue[c]
            g["catalogue"] = c
            g.setdefault("fp8", bool(e["fp8"]))
            if g.get("memory_reserved_mib") is None and e.get("reserved_mib") is not None \
                    and int(g.get("memory_total_mib") or 0) == int(e["memory_mib"]):
                g["memory_reserved_mib"] = e["reserved_mib"]
        out["gpus"].append(g)
    return out
