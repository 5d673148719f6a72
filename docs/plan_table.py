#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Print (or write into README.md and docs/PLANNER.md) the plan tables, computed by the planner itself.

    python3 docs/plan_table.py            # print both tables
    python3 docs/plan_table.py --write    # replace the tables between the plan-table markers in the docs

The hardware, models, context and utilisation are playbooks/plan.yml's own defaults, so the README shows
what `ansible-playbook playbooks/plan.yml` prints.  tests/unit/test_planner_readme_table.py fails when the
README's tables differ from what this produces.
"""
from __future__ import annotations

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, "collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)

import yaml  # noqa: E402

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import planner as P  # noqa: E402
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.gpu_catalogue import (  # noqa: E402
    annotate_gpu_facts, load_catalogue)
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.model_profiles import load_profiles  # noqa: E402
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.topology import gpu_facts_from_spec  # noqa: E402
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import vllm_bootlog as B  # noqa: E402

# name -> (objective, max_model_len or None for plan.yml's default)
TABLES = {"throughput": ("throughput", None), "latency-262144": ("latency", 262144), "vllm-fixtures": None,
          "hosts-8xh100": None}
# More than one host: published config.json files (tests/fixtures/model_configs, SOURCES.md) on 1 and 2 hosts of
# 8x H100 SXM, weights counted from config.json, plan.yml's context and utilisation.
HOSTS_HARDWARE = "8x H100 SXM"
HOSTS_MODELS = (("deepseek-ai--DeepSeek-V3", "DeepSeek-V3 (FP8)"),
                ("uiuc-convai--CoALM-405B", "Llama-3.1-405B (BF16)"))
HOSTS_COUNTS = (1, 2)
DOCS = ("README.md", os.path.join("docs", "PLANNER.md"))
_MARK = re.compile(r"(<!-- plan-table:(?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- /plan-table -->)", re.S)


def plan_defaults():
    with open(os.path.join(ROOT, "playbooks", "plan.yml")) as fh:
        play = yaml.safe_load(fh)[0]
    return play["vars"]


def _profile_for(boot, profiles, family="Qwen3.5-35B-A3B"):
    q = ((boot.get("engine") or {}).get("quantization") or "").lower() or None
    q = "gptq" if q and q.startswith("gptq") else q
    for p in profiles.values():
        pq = p["arch"]["quant_method"]
        if p["family"] == family and ("gptq" if pq and pq.startswith("gptq") else pq) == q:
            return p
    return None


def fixtures_table():
    """Planner vs vLLM for every boot log under tests/fixtures/gpu/vllm-*/ (what the unit replay asserts)."""
    import glob

    cat = load_catalogue()
    profiles = load_profiles(os.path.join(ROOT, "profiles"))
    rows = ["| fixture | run | vLLM available KV memory | planned | vLLM KV tokens / max concurrency | planned from "
            "vLLM's memory (ratio) | planned end to end (ratio) |", "|---|---|---|---|---|---|---|"]
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "gpu", "vllm-*", "*.log"))):
        with open(path) as fh:
            boot = B.parse_boot_log(fh.read())
        prof = _profile_for(boot, profiles)
        if not boot["complete"] or prof is None:
            continue
        hw = os.path.join(os.path.dirname(path), "hardware.txt")
        facts = B.gpu_facts_for_boot(boot, cat)
        if os.path.exists(hw):
            with open(hw) as fh:
                label = fh.read().strip()
            facts = annotate_gpu_facts(gpu_facts_from_spec(label, cat), cat)
        r = B.replay(boot, prof, facts)
        i = r["inputs"]
        f = i.get("features") or {}
        run = "%s TP%d, %s, util %s, %s seqs, %s%s" % (
            prof["variant"].upper(), i.get("tensor_parallel_size", 1), "{:,}".format(i["max_model_len"]),
            i.get("gpu_memory_utilization", 0.9), i.get("max_num_seqs", "default"),
            "prefix caching" if f.get("prefix_caching") else "no prefix caching",
            ", eager" if f.get("enforce_eager") else "")
        cap = r["from_logged_memory"]
        p = r["plan"]
        rows.append("| %s | %s | %.2f GiB | %s | %s / %.2fx | %s / %.2fx (%.4f) | %s |" % (
            os.path.relpath(path, os.path.join(ROOT, "tests", "fixtures", "gpu")), run,
            boot["available_kv_cache_gib"],
            "%.2f GiB" % (p["available_kv_cache_memory_bytes"] / 1024 ** 3) if p else "-",
            "{:,}".format(boot["kv_cache_tokens"]), boot["max_concurrency"], "{:,}".format(cap["kv_tokens"]),
            cap["max_concurrency"], cap["max_concurrency"] / boot["max_concurrency"],
            "%s / %.2fx (%.4f)" % ("{:,}".format(p["kv_cache_tokens"]), p["max_concurrency"],
                                   p["max_concurrency"] / boot["max_concurrency"]) if p else "-"))
    return "\n".join(rows) + "\n"


def config_profile(name):
    """A profile planned from a published config.json of tests/fixtures/model_configs, weights counted from it."""
    import json

    from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.model_profiles import profile_from_model_dir
    with open(os.path.join(ROOT, "tests", "fixtures", "model_configs", name + ".json")) as fh:
        config = json.load(fh)
    return profile_from_model_dir(config, name=name.replace("--", "/"), count_weights=True)


def hosts_plans():
    """(hosts, label, plan) for every row of the 'More than one host' table."""
    v = plan_defaults()
    cat = load_catalogue()
    facts = annotate_gpu_facts(gpu_facts_from_spec(HOSTS_HARDWARE, cat), cat)
    out = []
    for name, label in HOSTS_MODELS:
        prof = config_profile(name)
        for hosts in HOSTS_COUNTS:
            out.append((hosts, label, P.plan(facts, prof, max_model_len=v["plan_max_model_len"], hosts=hosts,
                                             gpu_memory_utilization=v["plan_gpu_memory_utilization"])))
    return out


def hosts_table():
    gib = 1024.0 ** 3
    rows = ["| hosts of %s | model (config.json) | fits | layout | nodes / TP / PP | layers per stage | weights per "
            "GPU by stage | KV memory per GPU by stage | KV cache tokens | max concurrency @ context | max_num_seqs |"
            % HOSTS_HARDWARE, "|---|---|---|---|---|---|---|---|---|---|---|"]
    for hosts, label, p in hosts_plans():
        st = p["stages"] or []
        fits = "yes" if p["fits"] else "no: " + (p["suggestions"][0]["text"] if p["suggestions"] else "-")
        rows.append("| %d | %s | %s | %s | %d / %d / %d | %s | %s | %s | %s | %s | %s |" % (
            hosts, label, fits, p["layout"], p["nodes"], p["tensor_parallel_size"], p["pipeline_parallel_size"],
            " + ".join(str(s["num_layers"]) for s in st) or "all",
            " / ".join("%.1f GiB" % (s["weights_bytes_per_gpu"] / gib) for s in st)
            or "%.1f GiB" % (p["weights_bytes_per_gpu"] / gib),
            " / ".join("%.1f GiB" % (s["available_kv_cache_memory_bytes"] / gib) for s in st)
            or "%.1f GiB" % (p["available_kv_cache_memory_bytes"] / gib),
            "{:,}".format(p["kv_cache_tokens"]) if p["fits"] else "-",
            "%.2f @ %d" % (p["max_concurrency"], p["max_model_len"]) if p["fits"] else "- @ %d" % p["max_model_len"],
            p["max_num_seqs"] if p["fits"] else "-"))
    return "\n".join(rows) + "\n"


def table(name):
    if name == "vllm-fixtures":
        return fixtures_table()
    if name == "hosts-8xh100":
        return hosts_table()
    v = plan_defaults()
    objective, ctx = TABLES[name]
    cat = load_catalogue()
    profiles = load_profiles(os.path.join(ROOT, "profiles"))
    rows = [P.TABLE_HEADER]
    for hw in v["plan_hardware"]:
        facts = annotate_gpu_facts(gpu_facts_from_spec(hw, cat), cat)
        for model in v["plan_models"]:
            p = P.plan(facts, profiles[model], objective=objective, max_model_len=ctx or v["plan_max_model_len"],
                       gpu_memory_utilization=v["plan_gpu_memory_utilization"], alternatives=list(profiles.values()))
            rows.append(P.table_row(hw, p))
    return "\n".join(rows) + "\n"


def render(text):
    """``text`` with every marked table replaced by a freshly computed one."""
    return _MARK.sub(lambda m: m.group(1) + table(m.group("name")) + m.group(4), text)


def main(argv):
    if "--write" in argv:
        for doc in DOCS:
            path = os.path.join(ROOT, doc)
            with open(path) as fh:
                old = fh.read()
            new = render(old)
            if new != old:
                with open(path, "w") as fh:
                    fh.write(new)
                print("updated %s" % doc)
        return 0
    for name in TABLES:
        print("%s:\n%s" % (name, table(name)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
