# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""vLLM flags that take a JSON value: which they are (JSON_FLAGS, or the image's own help text) and the values
that do not parse, in a flag dict (json_flag_problems) or a rendered argv (json_argv_problems). Pure functions."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.input_checks import show_value


# vLLM flags that take a JSON value (vLLM 0.17-0.32 `--help=all`: "Should either be a valid JSON string or JSON
# keys passed individually"). The image's own help text, when read, replaces this list (json_flags_from_help).
JSON_FLAGS = frozenset((
    "speculative-config", "compilation-config", "kv-transfer-config", "kv-events-config", "hf-overrides",
    "override-generation-config", "pooler-config", "limit-mm-per-prompt", "mm-processor-kwargs",
    "media-io-kwargs", "default-chat-template-kwargs", "chat-template-kwargs", "eplb-config",
    "structured-outputs-config", "observability-config", "quantization-config", "model-loader-extra-config",
    "logits-processors-config", "ec-transfer-config", "fault-tolerance-config", "logging-config",
    "attention-config", "lora-config", "profiler-config", "kernel-config", "weight-transfer-config",
    "additional-config", "default-mm-loras", "override-attention-dtype", "ir-op-priority",
))


_OPTION_LINE = re.compile(r"^  (--[A-Za-z0-9][\w.\-]*)")


def json_flags_from_help(text):
    """Flags (without dashes) whose `--help=all` description says they take JSON."""
    found = set()
    current, description = None, []

    def flush():
        if current and "valid JSON string" in re.sub(r"\s+", " ", " ".join(description)):
            found.add(current)

    for raw in (text or "").splitlines():
        match = _OPTION_LINE.match(raw)
        if match:
            flush()
            current = match.group(1)[2:].split(".")[0]
            description = [raw[match.end():]]
        elif current and raw.startswith("    "):
            description.append(raw.strip())
        elif raw.strip() and not raw.startswith(" "):
            flush()
            current, description = None, []
    flush()
    return found


def json_flag_problems(flags, json_flags=None, var="vllm_server_args_extra"):
    """Flags of a flag dict whose value must be JSON and does not parse (a dict value is rendered as JSON).

    A string value that starts with { or [ is checked for any flag; json_flags (default JSON_FLAGS) adds the
    flags that always take JSON."""
    known = set(JSON_FLAGS if json_flags is None else json_flags)
    problems = []
    if not isinstance(flags, dict):
        return ["%s must be a dict of vLLM flag -> value (e.g. {enforce-eager: true}); got %s."
                % (var, show_value(flags))]
    for key, value in sorted(flags.items(), key=lambda kv: str(kv[0])):
        name = str(key).strip().lstrip("-").replace("_", "-")
        if not isinstance(value, str):
            continue
        text = value.strip()
        if name not in known and not text.startswith(("{", "[")):
            continue
        try:
            json.loads(text)
        except ValueError as exc:
            problems.append(
                "%s: --%s takes JSON, but %s does not parse (%s). Write it as YAML (a dict, which is rendered as "
                "JSON) or as valid JSON with double quotes, e.g. {\"method\": \"mtp\", \"num_speculative_tokens\": 1}."
                % (var, name, show_value(value), exc))
    return problems


def json_argv_problems(argv, json_flags):
    """JSON-valued options of a rendered argv whose value does not parse: [{flag, value, error}].

    `--flag value` and `--flag=value` are checked; `--flag.key value` (one key of a JSON argument) is not JSON."""
    json_flags = set(json_flags or [])
    problems = []
    argv = [str(a) for a in (argv or [])]
    for index, token in enumerate(argv):
        if not token.startswith("--"):
            continue
        head, eq, inline = token.partition("=")
        name = head[2:]
        if "." in name:
            continue
        name = name.replace("_", "-")
        if name not in json_flags:
            continue
        if eq:
            value = inline
        elif index + 1 < len(argv) and not argv[index + 1].startswith("--"):
            value = argv[index + 1]
        else:
            continue
        try:
            json.loads(value)
        except ValueError as exc:
            problems.append({"flag": "--" + name, "value": value, "error": str(exc)})
    return problems
