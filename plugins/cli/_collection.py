# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where the llmfleet.vllm collection lives, seen from its controller-side CLI tools.

The tools in this package are importable two ways: as ``llmfleet_cli`` (the console scripts that
``pip install -e .`` maps onto plugins/cli) and as
``ansible_collections.llmfleet.vllm.plugins.cli`` (a clone or an installed collection on sys.path).
Both resolve to a file inside the collection, so the collection root is found from this file.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

ROOT_ENV = "LLMFLEET_COLLECTION_ROOT"
PLUGINS_PACKAGE = "ansible_collections.llmfleet.vllm.plugins"


def collection_root() -> Path:
    """Return the collection's root directory (the one holding galaxy.yml or MANIFEST.json).

    LLMFLEET_COLLECTION_ROOT overrides the lookup (for a wheel installed away from the collection).
    """
    override = os.environ.get(ROOT_ENV)
    if override:
        root = Path(override).resolve()
    else:
        root = Path(__file__).resolve().parents[2]
    if not ((root / "galaxy.yml").is_file() or (root / "MANIFEST.json").is_file()):
        raise RuntimeError(
            f"{root} is not the llmfleet.vllm collection root (no galaxy.yml or MANIFEST.json there); "
            f"set {ROOT_ENV} to the directory that holds the collection"
        )
    return root


def collections_path(root: Path) -> Path:
    """Return the directory to put on ANSIBLE_COLLECTIONS_PATH so that llmfleet.vllm.* is ``root``.

    A clone carries collections/ansible_collections/llmfleet/vllm -> the clone itself; an installed
    collection sits at <path>/ansible_collections/llmfleet/vllm.
    """
    clone_link = root / "collections"
    if (clone_link / "ansible_collections" / "llmfleet" / "vllm").exists():
        return clone_link
    if root.parent.name == "llmfleet" and root.parent.parent.name == "ansible_collections":
        return root.parent.parent.parent
    raise RuntimeError(
        f"cannot find an ansible_collections directory that maps llmfleet.vllm to {root}: in a clone, "
        "run `make venv` (it links collections/ansible_collections/llmfleet/vllm to the clone)"
    )


def import_plugin_code(dotted: str):
    """Import plugins/<dotted path>.py of this collection (``plugin_utils.fleet.bench_report``), as Ansible
    content imports it."""
    if not (__package__ and __package__.startswith("ansible_collections.")):
        cpath = str(collections_path(collection_root()))
        if cpath not in sys.path:
            sys.path.insert(0, cpath)
    return importlib.import_module(f"{PLUGINS_PACKAGE}.{dotted}")


def resolve_path(value: str, root: Path, what: str) -> str:
    """The absolute path of value (a playbook, an inventory), relative to the current directory or else to the
    collection root; ValueError naming what it is when neither holds it."""
    for candidate in (Path(value), root / value):
        if candidate.exists():
            return str(candidate.resolve())
    raise ValueError(f"{what} {value!r} not found (looked relative to {os.getcwd()} and to the collection root {root})")
