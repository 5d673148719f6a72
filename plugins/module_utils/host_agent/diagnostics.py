# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Recognise known vLLM / Docker / NVIDIA failures in log text and say the fix.

Pure functions, no I/O. The knowledge lives in SIGNATURES (diagnose_signatures.py: one list of plain data,
id, patterns, diagnosis, fix); adding a failure is adding an entry there. ``classify(text, context)`` returns the
findings ordered by confidence, each ``{id, diagnosis, fix, evidence, confidence, line, count}``.

Fix texts are templates. Their ``{placeholders}`` are filled, in order of precedence, from
  1. the named groups of the regular expression that matched (values seen in the log line),
  2. values derived by the DERIVE rules below (e.g. the minimum vLLM version for an architecture),
  3. ``context`` (what the caller knows: the plan's suggestions, the image's vLLM version, ...),
  4. FALLBACKS (generic wording), so a fix always reads as a sentence.

Context keys understood (all optional):
  served_model_name, requested_model, vllm_version, min_vllm_version, image, port, model_path,
  model_dir, max_model_len, gpu_memory_utilization, max_num_seqs, suggested_max_model_len,
  suggested_gpu_memory_utilization, suggested_max_num_seqs, suggested_variant, driver_version,
  unit, container.

Lines the evidence collector writes itself start with ``[llmfleet]`` (EVIDENCE_PREFIX) so that
facts which are not in any log (container OOM-killed, unit missing, model files absent, served
names listed by /v1/models) are matched by the same data-driven signatures. diagnose_evidence.py collects
those facts and diagnoses a whole replica (diagnose_replica).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# Relative imports: the same file also runs in the host package (host_package.py), outside the collection.
from .diagnose_signatures import FALLBACKS, SIGNATURES  # noqa: F401 (SIGNATURES, FALLBACKS: public here too)
from .cuda_drivers import CUDA_MIN_DRIVER

EVIDENCE_PREFIX = "[llmfleet]"

# Minimum vLLM release per architecture (config.json "architectures"), with sources.
#  - Qwen3.5 family: vllm-project/recipes models/Qwen/Qwen3.5-35B-A3B.yaml `min_vllm_version: "0.17.0"`;
#    verl PR #5381: vLLM 0.15.0 fails with "Model architectures ['Qwen3_5MoeForConditionalGeneration']
#    are not supported".
#  - Qwen3-Next: first shipped in v0.10.2 (nlzy/vllm-gfx906 PR #43 "Update to v0.10.2 for Qwen3Next Support").
ARCH_MIN_VLLM = {
    "Qwen3_5MoeForConditionalGeneration": "0.17.0",
    "Qwen3_5MoeForCausalLM": "0.17.0",
    "Qwen3_5ForConditionalGeneration": "0.17.0",
    "Qwen3NextForCausalLM": "0.10.2",
}
# The same by config.json "model_type" (Transformers' message names the model type, not the class).
MODEL_TYPE_MIN_VLLM = {
    "qwen3_5_moe": "0.17.0",
    "qwen3_5_moe_text": "0.17.0",
    "qwen3_next": "0.10.2",
}

# Environment variables people set believing vLLM reads them, and what actually does the job.
# VLLM_ENABLE_PREFIX_CACHING: the seed write-up's advice; it is not in vllm/envs.py; prefix caching is
# the --enable-prefix-caching / --no-enable-prefix-caching flag (MODEL_FACTS 2.4).
ENV_TO_FLAG = {
    "VLLM_ENABLE_PREFIX_CACHING": "--enable-prefix-caching (or --no-enable-prefix-caching to turn it off)",
    "VLLM_USE_V1": "nothing: the V1 engine is the only engine now; delete the variable",
    "VLLM_MAX_MODEL_LEN": "--max-model-len",
    "VLLM_GPU_MEMORY_UTILIZATION": "--gpu-memory-utilization",
    "VLLM_TENSOR_PARALLEL_SIZE": "--tensor-parallel-size",
    "VLLM_MAX_NUM_SEQS": "--max-num-seqs",
    "VLLM_SERVED_MODEL_NAME": "--served-model-name",
    "VLLM_MODEL": "the positional model argument of `vllm serve`",
    "VLLM_HOST": "--host",
}

# Minimum Linux driver per CUDA version in the image: one table, cuda_drivers.CUDA_MIN_DRIVER (its source there).


def _derive_suggested_max_model_len_from_log(values, context):
    if "suggested_max_model_len" not in context and values.get("est_len"):
        return {"suggested_max_model_len": values["est_len"]}
    return {}


def _derive_arch_from_list(values, context):
    if values.get("arch"):
        return {}
    names = re.findall(r"['\"]([^'\"]+)['\"]", values.get("arch_list") or "")
    if names:
        return {"arch": names[0]}
    if values.get("model_type"):
        return {"arch": "model_type " + values["model_type"]}
    return {}


def _derive_min_vllm_for_arch(values, context):
    if context.get("min_vllm_version"):
        return {}
    found = ARCH_MIN_VLLM.get(values.get("arch") or "") or MODEL_TYPE_MIN_VLLM.get(values.get("model_type") or "")
    return {"min_vllm_version": found} if found else {}


def _derive_min_driver_for_cuda(values, context):
    cuda = values.get("cuda") or ""
    key = ".".join(cuda.split(".")[:2])
    return {"min_driver": CUDA_MIN_DRIVER[key]} if key in CUDA_MIN_DRIVER else {}


def _derive_real_flag_for_env(values, context):
    var = values.get("var") or ""
    return {"real_flag": ENV_TO_FLAG[var]} if var in ENV_TO_FLAG else {}


DERIVE = {
    "suggested_max_model_len_from_log": _derive_suggested_max_model_len_from_log,
    "arch_from_list": _derive_arch_from_list,
    "min_vllm_for_arch": _derive_min_vllm_for_arch,
    "min_driver_for_cuda": _derive_min_driver_for_cuda,
    "real_flag_for_env": _derive_real_flag_for_env,
}

_COMPILED = {}


def _compiled(pattern):
    if pattern not in _COMPILED:
        _COMPILED[pattern] = re.compile(pattern)
    return _COMPILED[pattern]


class _Values(dict):
    def __missing__(self, key):
        return FALLBACKS.get(key, "?")


def _render(template, values):
    try:
        return template.format_map(values)
    except (ValueError, IndexError, AttributeError):
        return template


def _strip_line(line):
    """Drop journald/docker prefixes and ANSI colour so the evidence reads as vLLM wrote it."""
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)
    return line.strip()


def validate_signatures(signatures=None):
    """Return a list of problems in the signature data (empty when all entries are well formed)."""
    problems = []
    seen = set()
    for index, sig in enumerate(signatures if signatures is not None else SIGNATURES):
        where = "signature #%d (%s)" % (index, sig.get("id", "?"))
        for field in ("id", "confidence", "patterns", "diagnosis", "fix"):
            if field not in sig:
                problems.append("%s lacks %s" % (where, field))
        if sig.get("id") in seen:
            problems.append("%s: duplicate id" % where)
        seen.add(sig.get("id"))
        for pattern in sig.get("patterns", []):
            try:
                re.compile(pattern)
            except re.error as exc:
                problems.append("%s: bad pattern %r: %s" % (where, pattern, exc))
        for name in sig.get("derive", []):
            if name not in DERIVE:
                problems.append("%s: unknown derive rule %s" % (where, name))
    return problems


def _log_lines(text):
    """text (a string or a list of lines) as lines without journald/docker prefixes or ANSI colour."""
    lines = [str(x) for x in text] if isinstance(text, (list, tuple)) else str(text or "").splitlines()
    return [_strip_line(x) for x in lines]


def _matches(sig, lines):
    """(line number, named groups) of each line a signature matches (its first matching pattern's groups);
    a tail_only signature reads only the last tail_only non-blank lines."""
    allowed = None
    if sig.get("tail_only"):
        nonblank = [i for i, x in enumerate(lines) if x]
        allowed = set(nonblank[-int(sig["tail_only"]):])
    for number, line in enumerate(lines):
        if not line or (allowed is not None and number not in allowed):
            continue
        for pattern in sig["patterns"]:
            match = _compiled(pattern).search(line)
            if match:
                yield number, dict((k, v) for k, v in match.groupdict().items() if v is not None)
                break


def _collect_matches(lines, signatures):
    """The matches per (signature id, its key group's value): the groups seen, the last matching line and the
    count of matching lines."""
    found = {}
    for sig in signatures:
        for number, groups in _matches(sig, lines):
            key = (sig["id"], groups.get(sig["key"], "") if sig.get("key") else "")
            previous = found.get(key)
            found[key] = {
                "sig": sig,
                "groups": dict(previous["groups"], **groups) if previous else groups,
                "evidence": lines[number],
                "line": number + 1,
                "count": (previous["count"] if previous else 0) + 1,
            }
    return found


def _fill_values(entry, context):
    """The values that fill a finding's templates: context, then the matched groups, then what the signature's
    DERIVE rules add (never over a matched group); FALLBACKS for the rest (_Values)."""
    values = _Values()
    for k, v in context.items():
        if v is not None and v != "":
            values[k] = v
    values.update(entry["groups"])
    for name in entry["sig"].get("derive", []):
        for k, v in DERIVE[name](values, context).items():
            if k not in entry["groups"]:
                values[k] = v
    return values


def _finding(entry, context):
    sig = entry["sig"]
    values = _fill_values(entry, context)
    return {
        "id": sig["id"],
        "diagnosis": _render(sig["diagnosis"], values),
        "fix": _render(sig["fix"], values),
        "evidence": entry["evidence"],
        "confidence": sig["confidence"],
        "line": entry["line"],
        "count": entry["count"],
    }


def classify(text, context=None, signatures=None):
    """Match log text against the signatures.

    text: a string (or a list of lines) - journal, container log, HTTP bodies, evidence lines.
    context: dict of what the caller knows (see the module docstring); values fill the fixes.
    Returns findings ordered by confidence (highest first), then by where they were last seen (latest
    first): each a dict id, diagnosis, fix, evidence (the matching line), confidence, line (1-based
    index of that line in text), count (matching lines).
    """
    context = dict(context or {})
    found = _collect_matches(_log_lines(text), signatures if signatures is not None else SIGNATURES)
    results = [_finding(entry, context) for entry in found.values()]
    results.sort(key=lambda f: (-f["confidence"], -f["line"]))
    # A tail-only guess (e.g. "still loading weights") says nothing once a real error was found.
    if any(f["confidence"] >= 50 for f in results):
        results = [f for f in results if f["confidence"] >= 50 or not _sig_by_id(f["id"]).get("tail_only")]
    return results


def _sig_by_id(sig_id, signatures=None):
    for sig in (signatures if signatures is not None else SIGNATURES):
        if sig["id"] == sig_id:
            return sig
    return {}


def format_report(findings, title=None, raw_lines=None, raw_limit=40):
    """Render findings (diagnosis and fix first) and then the last raw lines, as a list of strings."""
    out = []
    if title:
        out.append(title)
    if not findings:
        out.append("No known failure signature matched; read the raw lines below.")
    for n, f in enumerate(findings, 1):
        out.append("DIAGNOSIS %d/%d [%s] %s" % (n, len(findings), f["id"], f["diagnosis"]))
        out.append("  fix: %s" % f["fix"])
        out.append("  evidence: %s" % f["evidence"][:400])
    if raw_lines:
        tail = [x for x in raw_lines if x is not None][-raw_limit:]
        out.append("--- last %d log lines ---" % len(tail))
        out.extend(tail)
    return out
