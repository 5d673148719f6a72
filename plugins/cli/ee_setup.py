# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How llmfleet-run sets up a run in an execution environment (--ee IMAGE, docs/EE.md): which playbook runs and
how, the mounts and environment the container gets, and the run directory it sees at /runner (secrets file,
playbook, ansible.cfg, inventories).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from ._collection import resolve_path
from .run_secrets import write_private_json


FQCN_PLAYBOOK = re.compile(r"^[a-z0-9_]+\.[a-z0-9_]+\.[a-z0-9_]+$")
EE_SECRETS_FILE = "llmfleet-secret-extravars.json"


def ee_playbook(value: str, root: Path, fqcn_prefix: str) -> tuple[str, Path | None]:
    """How a playbook argument runs inside an execution environment: (name for ansible-playbook, file to
    copy into the run's project directory or None).

    This collection's own playbooks (site.yml, playbooks/<name>.yml, relative to the collection root or
    the current directory) run by name (``llmfleet.vllm.<name>``), so the copy installed in the image
    runs; a collection playbook name runs as given; any other existing file is copied (only that file).
    """
    if FQCN_PLAYBOOK.match(value) and not Path(value).exists():
        return value, None
    path = Path(resolve_path(value, root, "playbook"))
    own = {(root / "site.yml").resolve(): "site"}
    playbooks = root / "playbooks"
    if playbooks.is_dir():
        own.update({p.resolve(): p.stem for p in playbooks.glob("*.yml")})
    if path in own:
        return f"{fqcn_prefix}.{own[path]}", None
    return path.name, path


def ee_mount(value: str) -> str:
    """Check one --ee-mount SRC:DST[:OPTS] (SRC must exist on this machine, DST be absolute)."""
    parts = value.split(":")
    if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
        raise ValueError(f"--ee-mount {value!r}: expected SRC:DST or SRC:DST:OPTIONS "
                         "(e.g. --ee-mount /var/run/docker.sock:/var/run/docker.sock)")
    if not Path(parts[0]).exists():
        raise ValueError(f"--ee-mount {value!r}: {parts[0]} does not exist on this machine")
    if not parts[1].startswith("/"):
        raise ValueError(f"--ee-mount {value!r}: the path in the container ({parts[1]}) must be absolute")
    return value


def passed_env(names: Iterable[str], environ: Mapping[str, str]) -> dict:
    """The variables --pass-env names (NAME, or PREFIX* for every variable starting with PREFIX) that are set."""
    out = {}
    for name in names:
        if name.endswith("*"):
            out.update({k: v for k, v in environ.items() if k.startswith(name[:-1])})
        elif name in environ:
            out[name] = environ[name]
    return out


def ee_options_error(args: argparse.Namespace) -> str | None:
    """The message for container options given without --ee (None when consistent)."""
    if args.ee:
        return None
    given = [flag for flag, value in (("--container-runtime", args.container_runtime), ("--ee-mount", args.ee_mount),
                                      ("--pass-env", args.pass_env), ("--ee-option", args.ee_option)) if value]
    if given:
        return f"{', '.join(given)} only apply with --ee IMAGE (a run in an execution environment)"
    return None


def fqcn_prefix(root: Path) -> str:
    """namespace.name of the collection at root (galaxy.yml in a clone, MANIFEST.json when installed)."""
    import yaml

    if (root / "galaxy.yml").is_file():
        info = yaml.safe_load((root / "galaxy.yml").read_text(encoding="utf-8"))
    else:
        info = json.loads((root / "MANIFEST.json").read_text(encoding="utf-8"))["collection_info"]
    return f"{info['namespace']}.{info['name']}"


def copy_inventories(paths: list[str], private_data_dir: Path) -> None:
    """Copy the inventories into the run directory's inventory/, the one path ansible-runner gives
    ansible-playbook in a container (/runner/inventory): one directory as it is, otherwise each into
    inventory/<n>-<name>/; a file inventory with its neighbouring group_vars/ and host_vars/."""
    target = private_data_dir / "inventory"
    for index, path in enumerate(paths):
        src = Path(path)
        if src.is_dir():
            dest = target if len(paths) == 1 else target / f"{index}-{src.name}"
            shutil.copytree(src, dest)
            continue
        dest = target if len(paths) == 1 else target / f"{index}-{src.stem}"
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / src.name)
        for neighbour in ("group_vars", "host_vars"):
            if (src.parent / neighbour).is_dir():
                shutil.copytree(src.parent / neighbour, dest / neighbour)


def prepare_ee(args, root, run, secret_vars, private_data_dir):
    """The run directory an execution environment sees at /runner (secrets file, playbook, ansible.cfg,
    inventories); returns (extra command line words, ansible_runner's container options)."""
    words = []
    env_dir = private_data_dir / "env"
    env_dir.mkdir(mode=0o700)
    if secret_vars:
        write_private_json(env_dir, EE_SECRETS_FILE, secret_vars)
        words += ["-e", "@/runner/env/" + EE_SECRETS_FILE]
    project = private_data_dir / "project"
    project.mkdir(mode=0o700)
    if run["playbook_copy"] is not None:
        shutil.copy2(run["playbook_copy"], project / run["playbook_copy"].name)
    if (root / "ansible.cfg").is_file():
        shutil.copy2(root / "ansible.cfg", project / "ansible.cfg")
    copy_inventories(run["inventories"], private_data_dir)
    run["inventories"] = []  # in a container, ansible-runner always passes -i /runner/inventory
    container = {
        "process_isolation": True,
        "process_isolation_executable": args.container_runtime or "docker",
        "container_image": args.ee,
        "container_volume_mounts": run["mounts"] or None,
        "container_options": args.ee_option or None,
    }
    return words, container
