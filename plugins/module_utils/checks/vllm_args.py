# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Render vLLM's command line from data.

Every vLLM flag the collection sets is data (a dict from the plan / profile / inventory); this module
turns that dict into an argv list, the only place where flag spelling rules live:

* keys are flag names without the leading dashes; ``snake_case`` is accepted and written kebab-case;
* ``True`` -> ``--flag``; ``False`` -> ``--no-flag`` (vLLM's BooleanOptionalAction spelling);
* ``None`` -> omitted (a way for an inventory to drop a flag the plan set);
* dict -> one JSON argument (``--speculative-config '{"method": "mtp", ...}'``);
* list / tuple -> the flag repeated once per element;
* anything else -> ``str(value)``.

Keys are rendered in sorted order so the same dict always gives the same unit file (no spurious
restarts).
"""

from __future__ import annotations

import json
import re

from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent.conventions import REPLICA_PORT_BASE

# Flags the serve role owns itself: they are derived from other inputs (model mount, served name,
# port, secrets) and must not be smuggled in through a free-form dict.
RESERVED_FLAGS = frozenset(("model", "served-model-name", "port", "host", "api-key"))

_FLAG_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


class VllmArgsError(ValueError):
    """A flag dict that cannot be rendered; the message says which key and why."""


def flag_name(key):
    """Normalise a dict key to vLLM's kebab-case flag name (without dashes)."""
    if not isinstance(key, str):
        raise VllmArgsError("vLLM flag names must be strings, got %r" % (key,))
    name = key.strip().lstrip("-").replace("_", "-")
    if not _FLAG_NAME.match(name):
        raise VllmArgsError(
            "%r is not a vLLM flag name: use letters, digits and dashes, e.g. 'max-model-len'" % (key,))
    return name


def render_vllm_args(flags, allow_reserved=False):
    """Return the argv list for ``flags`` (see the module docstring for the rules)."""
    if flags is None:
        return []
    if not isinstance(flags, dict):
        raise VllmArgsError("vLLM flags must be a mapping of flag name to value, got %s"
                            % type(flags).__name__)
    names = {}
    for key, value in flags.items():
        name = flag_name(key)
        if name in names:
            raise VllmArgsError("flag --%s is given twice (as %r and %r)" % (name, names[name][0], key))
        names[name] = (key, value)
    argv = []
    for name in sorted(names):
        value = names[name][1]
        if name in RESERVED_FLAGS and not allow_reserved:
            raise VllmArgsError(
                "--%s is set by the serve role from its own variables; remove it from the flag dict" % name)
        if value is None:
            continue
        if value is True:
            argv.append("--" + name)
        elif value is False:
            argv.append("--no-" + name)
        elif isinstance(value, dict):
            argv.extend(("--" + name, json.dumps(value, sort_keys=True, separators=(",", ":"))))
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, (dict, list)):
                    item = json.dumps(item, sort_keys=True, separators=(",", ":"))
                argv.extend(("--" + name, str(item)))
        else:
            argv.extend(("--" + name, str(value)))
    return argv


def merge_vllm_args(*layers):
    """Merge flag dicts left to right (later wins); keys are compared by their flag name."""
    merged = {}
    for layer in layers:
        for key, value in (layer or {}).items():
            merged[flag_name(key)] = value
    return merged


def replica_specs(plan_replicas, accelerator="gpu", port_base=REPLICA_PORT_BASE):
    """One serving replica per GPU group of the plan: [{name, port, gpus}].

    ``plan_replicas`` is the plan's ``replicas`` (a list of GPU-index lists). The ``cpu`` profile runs
    a single replica without GPUs. Without a plan on a GPU host, one replica on GPU 0.
    """
    try:
        port_base = int(port_base)
    except (TypeError, ValueError):
        raise VllmArgsError("vllm_server_port_base must be a TCP port number (e.g. 8000), got %r" % (port_base,))
    if not 1 <= port_base <= 65535:
        raise VllmArgsError("vllm_server_port_base must be a TCP port number in 1-65535, got %d" % port_base)
    if accelerator == "cpu":
        return [{"name": "0", "port": int(port_base), "gpus": []}]
    if accelerator != "gpu":
        raise VllmArgsError("accelerator must be 'gpu' or 'cpu', got %r" % (accelerator,))
    groups = plan_replicas if plan_replicas else [[0]]
    specs = []
    for index, gpus in enumerate(groups):
        if not isinstance(gpus, (list, tuple)) or not gpus or not all(isinstance(g, int) and g >= 0 for g in gpus):
            raise VllmArgsError("replica %d: expected a non-empty list of GPU indices, got %r" % (index, gpus))
        specs.append({"name": str(index), "port": int(port_base) + index, "gpus": list(gpus)})
    return specs


def argv_groups(argv):
    """Group an argv list as [flag, value...] per flag, for one-flag-per-line rendering."""
    groups = []
    for arg in argv:
        if arg.startswith("--") or not groups:
            groups.append([arg])
        else:
            groups[-1].append(arg)
    return groups
