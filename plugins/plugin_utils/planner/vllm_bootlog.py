# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read what vLLM logs at start-up about its memory and KV cache, and compare it with the plan.

Pure functions, no I/O.  ``parse_boot_log(text)`` takes the text of a vLLM boot log (``journalctl`` /
``docker logs`` of a replica, or an offline ``LLM(...)`` run) and returns the numbers vLLM computed;
``compare_with_plan(boot, plan)`` puts them beside the plan's numbers (plugins/plugin_utils/planner/planner.py),
which mean the same thing, and warns where the gap is large.

Log lines read (vLLM 0.22.0 prints the last two on two lines, 0.28.0 on one):
  Initializing a V1 LLM engine (v0.22.0) with config: model=..., tensor_parallel_size=1, quantization=None, ...
  non-default args: {...}
  Model loading took 64.69 GiB memory and 1.28 seconds
  Setting attention block size to 1056 tokens to ensure that attention page size is >= mamba page size.
  Mamba cache mode is set to 'align' ...
  Estimated CUDA graph memory: 0.57 GiB total
  Available KV cache memory: 58.81 GiB
  GPU KV cache size: 2,517,099 tokens
  Maximum concurrency for 32,768 tokens per request: 76.82x
"""

from __future__ import annotations

import ast
import json
import re

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.units import GIB
DEFAULT_TOLERANCE = 0.03

_NUM = r"([0-9][0-9,]*(?:\.[0-9]+)?)"
_PATTERNS = {
    "vllm_version": re.compile(r"Initializing a V1 LLM engine \(v([^)\s]+)\)"),
    "model_loading_gib": re.compile(r"Model loading took " + _NUM + r" GiB"),
    "attention_block_size": re.compile(r"Setting attention block size to " + _NUM + r" tokens"),
    "state_page_padding_pct": re.compile(r"Padding mamba page size by " + _NUM + r"%"),
    "mamba_cache_mode": re.compile(r"Mamba cache mode is set to '([a-z]+)'"),
    "cudagraph_estimate_gib": re.compile(r"Estimated CUDA graph memory: " + _NUM + r" GiB"),
    "available_kv_cache_gib": re.compile(r"Available KV cache memory: " + _NUM + r" GiB"),
    "kv_cache_tokens": re.compile(r"(?:GPU|CPU|XPU) KV cache size: " + _NUM + r" tokens"),
    "max_concurrency": re.compile(r"Maximum concurrency for " + _NUM + r" tokens per request: " + _NUM + r"x"),
    "batched_tokens_log": re.compile(r"max_num_batched_tokens=([0-9]+)"),
    "device_name": re.compile(r"device_name=([A-Za-z0-9_\-]+?)(?:,|\.json|\s|$)"),
}
_ENGINE = re.compile(r"Initializing a V1 LLM engine \(v[^)]*\) with config: (.*)$")
_ENGINE_KEYS = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "max_seq_len",
                "quantization", "enforce_eager", "kv_cache_dtype", "enable_prefix_caching", "enable_chunked_prefill",
                "dtype", "speculative_config")
_NON_DEFAULT = re.compile(r"non-default args: (\{.*\})\s*$")
_PROBE = re.compile(r"PROBE_JSON (\{.*\})\s*$")


def _num(s):
    s = s.replace(",", "")
    return float(s) if "." in s else int(s)


def _engine_config(line):
    """A few key=value pairs of the engine config line (values up to the next ', key=')."""
    out = {}
    for key in _ENGINE_KEYS:
        m = re.search(r"(?:^|, )" + key + r"=(.*?)(?=, [a-z_]+=|$)", line)
        if not m:
            continue
        v = m.group(1).strip()
        if v in ("None", "True", "False"):
            v = {"None": None, "True": True, "False": False}[v]
        elif re.match(r"^-?\d+$", v):
            v = int(v)
        elif v.startswith("torch."):
            v = v[len("torch."):]
        out[key] = v
    return out


def parse_boot_log(text):
    """Parse a vLLM boot log.  Returns a dict with, where the log has them:

    vllm_version (str), engine ({tensor_parallel_size, max_seq_len, quantization, enforce_eager, kv_cache_dtype,
    enable_prefix_caching, enable_chunked_prefill, dtype, speculative_config}), args (the 'non-default args' dict), model_loading_gib,
    attention_block_size, state_page_padding_pct, mamba_cache_mode, cudagraph_estimate_gib,
    available_kv_cache_gib (the smallest over the ranks that logged it), available_kv_cache_bytes (from the
    GiB figure, or exact from a PROBE_JSON line of the tests/device harness), kv_cache_tokens,
    max_concurrency (float), max_concurrency_len (the tokens per request it is for), max_model_len,
    max_num_seqs, max_num_batched_tokens, gpu_memory_utilization (from the non-default args, else the harness's
    probe), device_name (from a fused-MoE config path, e.g. 'NVIDIA H200'), probe (the harness's PROBE_JSON, if
    any), complete (True when the KV cache lines were found).  Missing values are absent, never guessed.
    """
    out = {}
    avail = []
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        _read_structured(line, out)
        _read_values(line, out, avail)
    if avail:
        out["available_kv_cache_gib"] = min(avail)
        out["available_kv_cache_bytes"] = int(round(min(avail) * GIB))
    probe = out.get("probe") or {}
    if isinstance(probe.get("available_kv_cache_memory_bytes"), int):
        out["available_kv_cache_bytes"] = probe["available_kv_cache_memory_bytes"]
    _settle_limits(out, probe)
    out["complete"] = "kv_cache_tokens" in out and "max_concurrency" in out
    return out


def _read_structured(line, out):
    """The engine config line, the non-default args and the harness's probe: the first of each."""
    m = _ENGINE.search(line)
    if m and "engine" not in out:
        out["engine"] = _engine_config(m.group(1))
    m = _NON_DEFAULT.search(line)
    if m and "args" not in out:
        try:
            out["args"] = ast.literal_eval(m.group(1))
        except (ValueError, SyntaxError):
            pass
    m = _PROBE.search(line)
    if m and "probe" not in out:
        try:
            out["probe"] = json.loads(m.group(1))
        except ValueError:
            pass


def _read_values(line, out, avail):
    """The numbers and names _PATTERNS find (the first of each; every rank's available KV memory into avail)."""
    for key, pat in _PATTERNS.items():
        m = pat.search(line)
        if not m:
            continue
        if key == "available_kv_cache_gib":
            avail.append(_num(m.group(1)))
        elif key == "max_concurrency":
            out.setdefault("max_concurrency_len", _num(m.group(1)))
            out.setdefault("max_concurrency", float(_num(m.group(2))))
        elif key in ("vllm_version", "mamba_cache_mode"):
            out.setdefault(key, m.group(1))
        elif key == "device_name":
            out.setdefault(key, m.group(1).replace("_", " "))
        else:
            out.setdefault(key, _num(m.group(1)))


def _settle_limits(out, probe):
    """max_model_len, max_num_seqs, max_num_batched_tokens and gpu_memory_utilization: the non-default args, else
    the engine config or the probe, else the log's own figures."""
    args = out.get("args") or {}
    eng = out.get("engine") or {}
    ml = args.get("max_model_len", eng.get("max_seq_len", out.get("max_concurrency_len")))
    if ml is not None:
        out["max_model_len"] = int(ml)
    sched = probe.get("scheduler_config") if isinstance(probe.get("scheduler_config"), dict) else {}
    cache = probe.get("cache_config") if isinstance(probe.get("cache_config"), dict) else {}
    for key, src in (("max_num_seqs", sched), ("max_num_batched_tokens", sched), ("gpu_memory_utilization", cache)):
        if key in args:
            out[key] = args[key]
        elif isinstance(src.get(key), (int, float)):
            out[key] = src[key]
    if "max_num_batched_tokens" not in out and "batched_tokens_log" in out:
        out["max_num_batched_tokens"] = out["batched_tokens_log"]
    out.pop("batched_tokens_log", None)


def plan_inputs_from_boot(boot):
    """The planner inputs (keyword arguments of planner.plan) that reproduce the run a boot log records:
    tensor_parallel_size, max_model_len, gpu_memory_utilization, max_num_seqs, max_num_batched_tokens,
    kv_cache_dtype and features (prefix_caching, enforce_eager, text_only, mtp).  Values the log does not
    state are left out (the planner's defaults apply).  ``quantization`` (the engine's) is returned beside them
    to choose the profile: {"kwargs": {...}, "quantization": str or None}."""
    eng = boot.get("engine") or {}
    args = boot.get("args") or {}
    kw = {}
    if eng.get("tensor_parallel_size"):
        kw["tensor_parallel_size"] = int(eng["tensor_parallel_size"])
    for key in ("max_model_len", "gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens"):
        if boot.get(key) is not None:
            kw[key] = boot[key]
    if eng.get("kv_cache_dtype") not in (None, "auto"):
        kw["kv_cache_dtype"] = eng["kv_cache_dtype"]
    feats = {}
    if eng.get("enable_prefix_caching") is not None:
        feats["prefix_caching"] = bool(eng["enable_prefix_caching"])
    if eng.get("enforce_eager") is not None:
        feats["enforce_eager"] = bool(eng["enforce_eager"])
    limits = args.get("limit_mm_per_prompt")
    feats["text_only"] = bool(args.get("language_model_only")) or (
        isinstance(limits, dict) and bool(limits) and not any(limits.values()))
    feats["mtp"] = eng.get("speculative_config") not in (None, "None")
    kw["features"] = feats
    return {"kwargs": kw, "quantization": eng.get("quantization")}


def _gap_item(name, planned, actual, unit, tolerance):
    item = {"name": name, "planned": planned, "actual": actual, "unit": unit, "ratio": None, "ok": True}
    if planned is None or actual is None:
        item["ok"] = None
        return item
    if actual:
        item["ratio"] = round(float(planned) / float(actual), 4)
        item["ok"] = abs(item["ratio"] - 1.0) <= tolerance
    else:
        item["ok"] = not planned
    return item


def compare_with_plan(boot, plan, tolerance=DEFAULT_TOLERANCE):
    """Planned vs actual, one replica.  ``boot``: parse_boot_log's dict; ``plan``: the vllm_plan result (the
    ``plan`` dict, or its fields available_kv_cache_memory_bytes, kv_cache_tokens, max_concurrency,
    kv_cache_block_size, max_model_len).

    Returns {items: [{name, planned, actual, unit, ratio (planned / actual), ok}], warnings: [str],
    ok (False when a number differs by more than ``tolerance``, None when the log lacks the KV cache lines),
    summary (one line)}.  A plan larger than vLLM's reality is the dangerous direction (users size fleets from
    it); both directions are warned about, with both numbers.
    """
    boot = boot or {}
    plan = plan or {}
    items = [
        _gap_item("available_kv_cache_memory", _gib(plan.get("available_kv_cache_memory_bytes")),
                  boot.get("available_kv_cache_gib"), "GiB", tolerance),
        _gap_item("kv_cache_tokens", plan.get("kv_cache_tokens"), boot.get("kv_cache_tokens"), "tokens", tolerance),
        _gap_item("max_concurrency", plan.get("max_concurrency"), boot.get("max_concurrency"), "x", tolerance),
    ]
    if boot.get("attention_block_size") is not None and plan.get("kv_cache_block_size") is not None:
        items.append(_gap_item("block_size", plan["kv_cache_block_size"], boot["attention_block_size"], "tokens",
                               0.0))
    warnings = []
    if boot.get("max_concurrency_len") and plan.get("max_model_len") and \
            int(boot["max_concurrency_len"]) != int(plan["max_model_len"]):
        warnings.append("vLLM runs with max_model_len %d, the plan is for %d: the numbers are not comparable"
                        % (boot["max_concurrency_len"], plan["max_model_len"]))
    for it in items:
        if it["ok"] is False:
            direction = "more" if it["ratio"] > 1 else "less"
            warnings.append("%s: the plan says %s %s, vLLM logged %s %s (planned / actual %.3f: the plan promises "
                            "%s than vLLM has)" % (it["name"], _fmt(it["planned"]), it["unit"], _fmt(it["actual"]),
                                                   it["unit"], float(it["ratio"] or 0), direction))
    complete = boot.get("complete")
    ok = None if not complete else not warnings
    conc = next(i for i in items if i["name"] == "max_concurrency")
    summary = ("KV cache: planned %s tokens / %sx, vLLM %s tokens / %sx%s" % (
        _fmt(plan.get("kv_cache_tokens")), _fmt(plan.get("max_concurrency")), _fmt(boot.get("kv_cache_tokens")),
        _fmt(boot.get("max_concurrency")), " (ratio %.3f)" % conc["ratio"] if conc["ratio"] else ""))
    return {"items": items, "warnings": warnings, "ok": ok, "summary": summary}


def _gib(b):
    return None if b is None else round(b / GIB, 2)


def _fmt(v):
    if v is None:
        return "?"
    if isinstance(v, float):
        return "%.2f" % v
    return "{:,}".format(v)


def replay(boot, profile, gpu_facts=None):
    """Plan the run a boot log records and put the plan beside it.

    Returns {inputs (plan keyword arguments), from_logged_memory: {blocks, max_concurrency, kv_tokens} (vLLM's
    logged available memory through the planner's block-pool arithmetic: tests the capacity model alone),
    plan (planner.plan for ``gpu_facts``, the memory model too; None without gpu_facts), comparison
    (compare_with_plan of that plan, or of the capacity-only numbers without gpu_facts)}."""
    from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import planner as P
    from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import capacity as CAP

    inputs = plan_inputs_from_boot(boot)["kwargs"]
    kw = dict(inputs)
    tp = kw.pop("tensor_parallel_size", 1)
    layout = P.layout_for(profile, tp, kw.get("features"), kw.get("kv_cache_dtype", "auto"))
    cap = None
    if boot.get("available_kv_cache_bytes") is not None and boot.get("max_model_len"):
        c = CAP.capacity(layout, boot["available_kv_cache_bytes"], boot["max_model_len"])
        cap = {"blocks": c["num_blocks"], "max_concurrency": round(c["max_concurrency"], 2),
               "kv_tokens": c["kv_tokens"], "block_size": layout.block_size}
    plan = None
    if gpu_facts is not None:
        kw.setdefault("vllm_version", boot.get("vllm_version"))
        plan = P.plan(gpu_facts, profile, tensor_parallel_size=tp, replicas=1, **kw)
        cmp_ = compare_with_plan(boot, plan)
    else:
        cmp_ = compare_with_plan(boot, {"kv_cache_tokens": (cap or {}).get("kv_tokens"),
                                        "max_concurrency": (cap or {}).get("max_concurrency"),
                                        "kv_cache_block_size": layout.block_size,
                                        "max_model_len": boot.get("max_model_len"),
                                        "available_kv_cache_memory_bytes": boot.get("available_kv_cache_bytes")})
    return {"inputs": inputs, "from_logged_memory": cap, "plan": plan, "comparison": cmp_}


def gpu_facts_for_boot(boot, catalogue):
    """gpu_facts for the GPUs a boot log ran on, when the log names them (device_name, e.g. from the fused-MoE
    config path) and the catalogue knows the name: tensor_parallel_size x pipeline_parallel_size GPUs, wired as
    the catalogue says.  None otherwise."""
    from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu import gpu_catalogue as C
    from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.topology import gpu_facts_from_spec

    name = boot.get("device_name")
    cname = C.match_smi_name(name, catalogue) if name else None
    if cname is None:
        return None
    eng = boot.get("engine") or {}
    count = int(eng.get("tensor_parallel_size") or 1) * int(eng.get("pipeline_parallel_size") or 1)
    return C.annotate_gpu_facts(gpu_facts_from_spec(C.spec_for(cname, count, catalogue), catalogue), catalogue)
