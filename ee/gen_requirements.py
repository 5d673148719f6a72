#!/usr/bin/env python
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write requirements.txt (the collection's controller-side Python, read by ansible-builder through
meta/execution-environment.yml) from pyproject.toml, the one place each version is pinned.

    python3 ee/gen_requirements.py           # rewrite requirements.txt
    python3 ee/gen_requirements.py --check   # exit 1 (and say what differs) when it is out of date

Every runtime dependency of pyproject.toml is copied with its version range, except those in
LEFT_OUT (each with its reason). tests/unit/test_ee_files.py runs --check.
"""
from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Dependencies of pyproject.toml that an execution environment does not take from the collection.
LEFT_OUT = {
    "ansible": "the whole bundle (about 600 MB): the EE gets ansible-core from execution-environment.yml "
               "(dependencies.ansible_core) and community.docker / community.general as collections",
    "ansible-runner": "every EE already has its own (execution-environment.yml dependencies.ansible_runner)",
    "nvidia-ml-py": "NVML bindings used on the GPU hosts by gpu_facts, not on the controller",
}

HEADER = """\
# Controller-side Python for the llmfleet.vllm collection, for execution environments
# (ansible-builder reads it through meta/execution-environment.yml).
# GENERATED from pyproject.toml by `python3 ee/gen_requirements.py`: edit pyproject.toml, not this file.
# Left out of pyproject's dependencies:
"""


def requirement_name(spec: str) -> str:
    """The normalised distribution name of a PEP 508 requirement ('PyYAML>=6' -> 'pyyaml')."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
    if not match:
        raise ValueError(f"not a requirement: {spec!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def render(pyproject: dict) -> str:
    deps = pyproject["project"]["dependencies"]
    names = {requirement_name(d) for d in deps}
    stale = sorted(set(LEFT_OUT) - names)
    if stale:
        raise ValueError(f"LEFT_OUT names {stale}, which pyproject.toml no longer lists: drop them from LEFT_OUT")
    lines = [HEADER.rstrip("\n")]
    lines += [f"#   {name}: {why}" for name, why in LEFT_OUT.items()]
    lines += [re.sub(r"\s+", "", d) for d in deps if requirement_name(d) not in LEFT_OUT]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--check", action="store_true", help="only check that requirements.txt is current")
    args = parser.parse_args(argv)
    text = render(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8")))
    target = ROOT / "requirements.txt"
    if args.check:
        current = target.read_text(encoding="utf-8") if target.exists() else ""
        if current != text:
            print("requirements.txt is out of date with pyproject.toml: run python3 ee/gen_requirements.py",
                  file=sys.stderr)
            return 1
        return 0
    target.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
