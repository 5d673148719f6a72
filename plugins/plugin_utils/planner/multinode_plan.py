# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One model over several hosts: the host list a plan is made for, vLLM's pipeline-parallel layer split, and what
each pipeline stage holds (its layers, its share of the weights, its KV kinds).  Pure functions, no I/O.

The layout vLLM serves across hosts is tensor parallel (TP) inside a host over NVLink and pipeline parallel (PP)
across hosts, one stage per host.  Read from vLLM's source (``vllm/distributed/utils.py get_pp_indices``; the same
in 0.22.0-era releases and in 0.32.0, checked in the vLLM CPU image of the test bed, so in 0.28.0 too):

  partitions  = [L // pp] * pp; the remainder L % pp goes one layer each to the partitions just before the last
                (``partitions[-i] += 1 for i in 2 .. remainder + 1``): the last stage also holds the final norm and
                the LM head, the first the embeddings.  VLLM_PP_LAYER_PARTITION overrides the split.
  stage s     = layers [sum(partitions[:s]), sum(partitions[:s + 1]))

Every stage profiles its own memory and sizes its own KV cache; the engine takes the smallest ``num_blocks`` of
all stages (vllm/v1/engine/core.py: the KV cache configs of all workers are unified to the minimum).  The first
stage holds the token embeddings, the last the LM head (a tied head is loaded again on the last stage).
"""

from __future__ import annotations

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import engine_memory as EM
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import layer_specs as LS
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError

# Hosts a plan may span (vLLM itself has no limit; a bound keeps the search and the suggestions short).
MAX_HOSTS = 16
SUGGESTED_HOST_COUNTS = (2, 3, 4, 6, 8)


def pp_partitions(num_layers, pp_size, partition=None):
    """Layers per pipeline stage, as vLLM's get_pp_indices splits them.  ``partition``: the
    VLLM_PP_LAYER_PARTITION override (a list or a comma-separated string), checked like vLLM checks it."""
    num_layers, pp_size = int(num_layers), int(pp_size)
    if pp_size < 1:
        raise PlanError("pipeline_parallel_size must be at least 1")
    if partition not in (None, "", []):
        if isinstance(partition, str):
            try:
                parts = [int(x) for x in partition.split(",")]
            except ValueError:
                raise PlanError("VLLM_PP_LAYER_PARTITION %r is not a comma-separated list of layer counts"
                                % partition)
        else:
            parts = [int(x) for x in partition]
        if len(parts) != pp_size:
            raise PlanError("VLLM_PP_LAYER_PARTITION has %d entries for %d pipeline stages" % (len(parts), pp_size))
        if sum(parts) != num_layers:
            raise PlanError("VLLM_PP_LAYER_PARTITION sums to %d layers; the model has %d" % (sum(parts), num_layers))
        return parts
    if num_layers < pp_size:
        raise PlanError("%d pipeline stages for a model of %d layers: every stage needs a layer"
                        % (pp_size, num_layers))
    parts = [num_layers // pp_size] * pp_size
    for i in range(2, num_layers % pp_size + 2):
        parts[-i] += 1
    return parts


def pp_indices(num_layers, pp_rank, pp_size, partition=None):
    """(start, end) layer indices of stage ``pp_rank`` (vLLM's get_pp_indices)."""
    parts = pp_partitions(num_layers, pp_size, partition)
    start = sum(parts[:pp_rank])
    return start, start + parts[pp_rank]


def host_facts(gpu_facts, hosts=None):
    """The gpu_facts of every host of a plan, in node-rank order.  ``gpu_facts`` is one host's facts (with
    ``hosts`` identical hosts, default 1) or a list of several hosts' facts (``hosts``, when given, must match)."""
    if hosts is not None:
        try:
            hosts = int(hosts)
        except (TypeError, ValueError):
            raise PlanError("hosts must be a whole number of identical hosts, got %r" % (hosts,))
        if not 1 <= hosts <= MAX_HOSTS:
            raise PlanError("hosts must be between 1 and %d, got %d" % (MAX_HOSTS, hosts))
    if isinstance(gpu_facts, (list, tuple)):
        facts = list(gpu_facts)
        if not facts:
            raise PlanError("gpu_facts is an empty list: give one host's gpu_facts, or one per host of the group")
        bad = [i for i, f in enumerate(facts) if not isinstance(f, dict) or not f.get("gpus")]
        if bad:
            raise PlanError("gpu_facts entry %s lists no GPUs: run llmfleet.vllm.gpu_facts on every host of the group"
                            % ", ".join(map(str, bad)))
        if hosts is not None and hosts != len(facts):
            raise PlanError("hosts is %d but gpu_facts lists %d hosts: drop hosts, or give one gpu_facts per host"
                            % (hosts, len(facts)))
        if len(facts) > MAX_HOSTS:
            raise PlanError("gpu_facts lists %d hosts; a plan spans at most %d" % (len(facts), MAX_HOSTS))
        return facts
    return [gpu_facts] * (hosts or 1)


def host_label(facts, i):
    """A host's name in messages: its hostname when gpu_facts carries one, else 'host <i>' (node rank)."""
    name = (facts or {}).get("hostname") or (facts or {}).get("host")
    return "%s (node rank %d)" % (name, i) if name else "host %d" % i


def describe_host(facts):
    """'8x NVIDIA H100 80GB HBM3' for messages."""
    gpus = (facts or {}).get("gpus") or []
    names = sorted({g.get("name") or "GPU" for g in gpus})
    return "%dx %s" % (len(gpus), "/".join(names))


def stage_layer_counts(arch, start, end):
    """{KV kind: layers} of the layers [start, end).  One KV kind: exact.  Several (hybrids): each kind's layers
    in proportion to the stage's share of the model (vLLM places them by their index; the planner keeps counts, not
    the per-layer list), rounded so that the stage's counts add up to its layers."""
    counts = {k: n for k, n in arch["layer_counts"].items() if n}
    n = end - start
    total = arch["num_layers"]
    if not counts or n == total:
        return dict(counts)
    if len(counts) == 1:
        (kind, have), = counts.items()
        return {kind: n if have >= total else int(round(have * n / float(total)))}
    share = {k: c * n / float(total) for k, c in counts.items()}
    out = {k: int(v) for k, v in share.items()}
    # parallel hybrids (Falcon-H1: attention and Mamba in every layer) sum to more than n; keep their ratio
    target = int(round(sum(share.values())))
    for k in sorted(share, key=lambda k: share[k] - out[k], reverse=True)[:max(0, target - sum(out.values()))]:
        out[k] += 1
    return out


def stage_arch(arch, start, end):
    """The arch of one pipeline stage (layers [start, end)): its layer counts by kind, its dense/MoE layers."""
    counts = stage_layer_counts(arch, start, end)
    a = dict(arch)
    a["num_layers"] = end - start
    a["layer_counts"] = counts
    a["full_attention_layers"] = LS.attention_layers(counts)
    a["linear_attention_layers"] = LS.state_layers(counts)
    a["windows"] = {k: w for k, w in (arch.get("windows") or {}).items() if counts.get(k)}
    sizes = arch.get("moe_sizes")
    if arch.get("moe") and sizes:
        s = dict(sizes)
        s["dense_layers"] = max(0, min(end, sizes["dense_layers"]) - start)
        a["moe_sizes"] = s
    return a


def _layer_params(arch, i):
    """(dense-dtype parameters, quantised parameters, expert parameters) of decoder layer ``i``."""
    h = arch["hidden_size"]
    attention = EM._attention_params(arch) if arch["full_attention_layers"] else 0  # pylint: disable=protected-access
    attention = attention * arch["full_attention_layers"] / float(arch["num_layers"])
    state = EM._state_params(arch) / float(arch["num_layers"])  # pylint: disable=protected-access
    moe, sizes = arch.get("moe"), arch.get("moe_sizes")
    if moe and sizes and i >= sizes["dense_layers"]:
        mlp = 3 * h * sizes["shared_intermediate_size"] + h * moe["num_experts"]
        experts = moe["num_experts"] * 3 * h * sizes["intermediate_size"]
    else:
        mlp = 3 * h * (arch.get("intermediate_size") or 0)
        experts = 0
    return attention + state + mlp, experts


def stage_weight_bytes(arch, start, end, pp_size, total_bytes):
    """Bytes of weights stage [start, end) of ``pp_size`` loads, as a share of the checkpoint's ``total_bytes``
    counted from config.json: the first stage the embeddings, the last the LM head (again, when it is tied), each
    its own layers (DeepSeek's dense first layers are lighter than its MoE layers)."""
    quant = arch.get("quant_method")
    per = EM.QUANT_BYTES.get(quant, arch["dtype_bytes"]) if quant else arch["dtype_bytes"]
    dense_bytes = arch["dtype_bytes"] if quant == "mxfp4" else per
    emb = arch["vocab_size"] * arch["hidden_size"] * arch["dtype_bytes"]

    def layers_bytes(a, b):
        out = 0.0
        for i in range(a, b):
            dense, experts = _layer_params(arch, i)
            out += dense * dense_bytes + experts * per
        return out

    whole = emb * (1 if arch.get("tie_word_embeddings") else 2) + layers_bytes(0, arch["num_layers"])
    mine = layers_bytes(start, end)
    if start == 0:
        mine += emb
    if end == arch["num_layers"] and (pp_size > 1 or not arch.get("tie_word_embeddings")):
        mine += emb
    return int(total_bytes * mine / whole) if whole else 0
