# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Inputs checked against the pinned image: vllm_image_ref itself (pinned by digest, right for the profile), the
flags of vllm_server_args_extra against the image's `vllm serve` table, the cached image facts of a pin, and the
model's attention head size against the image's attention backends. Pure functions."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks import image_ref as IR
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.input_checks import truthy
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_args import VllmArgsError, render_vllm_args
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_flags import format_problems, validate_argv


def image_problems(ref, var="vllm_image_ref", mirror="", allow_unpinned=False, environment="dev", accelerator="gpu"):
    """vllm_image_ref as the vllm_image role will read it: a valid reference pinned by digest (repository:tag@
    sha256:<64 hex>), a valid mirror, never unpinned in prod, and not the CUDA build on the cpu profile."""
    problems = []
    try:
        parts = IR.describe(ref, mirror or "", bool(allow_unpinned))
    except IR.ImageRefError as exc:
        parts = None
        text = str(exc)
        problems.append("%s: %s%s" % (var, text, "" if text.endswith(".") else "."))
    if truthy(allow_unpinned) and environment == "prod":
        problems.append("llmfleet_environment is prod, where vllm_image_allow_unpinned must stay false: a tag can "
                        "move, so two hosts could serve different vLLM builds. Pin %s by digest "
                        "(repository:tag@sha256:<64 hex>)." % var)
    if parts and accelerator == "cpu" and parts.get("path") == "vllm/vllm-openai":
        problems.append("llmfleet_accelerator is cpu but %s is %s, the CUDA build of vLLM, which cannot serve "
                        "without an NVIDIA GPU. Set %s to a CPU build of vLLM pinned by digest." % (var, ref, var))
    return problems


def args_extra_flag_problems(args_extra, flags, var="vllm_server_args_extra", image=None, vllm_version=None):
    """Flags of args_extra (a flag dict) that the image's `vllm serve` does not accept, with the variable named."""
    if not isinstance(args_extra, dict) or not flags:
        return []
    try:
        argv = render_vllm_args(args_extra)
    except VllmArgsError as exc:
        return ["%s: %s." % (var, exc)]
    problems = validate_argv(argv, set(flags))
    for p in problems:
        p["var"] = var
    return format_problems(problems, image or "the pinned image", None, vllm_version)


def image_facts_for_ref(docs, ref):
    """The cached image facts (vllm_flag_check's image_facts, as the serve role keeps them on the controller) whose
    image carries ref's digest (its repo_digests), or None. docs: the parsed files."""
    try:
        digest = IR.parse(ref).get("digest")
    except IR.ImageRefError:
        return None
    if not digest:
        return None
    for doc in docs or []:
        if not isinstance(doc, dict):
            continue
        if any(str(d).endswith("@" + digest) for d in doc.get("repo_digests") or []):
            return doc
    return None


def model_head_dim(config):
    """The attention head size vLLM uses for a config.json: head_dim, else hidden_size / num_attention_heads (the
    text_config of a multimodal wrapper first). None when the config does not say."""
    if not isinstance(config, dict):
        return None
    cfg = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    for source in (cfg, config):
        head = source.get("head_dim")
        if isinstance(head, int) and not isinstance(head, bool) and head > 0:
            return head
    hidden, heads = cfg.get("hidden_size"), cfg.get("num_attention_heads")
    if isinstance(hidden, int) and isinstance(heads, int) and heads > 0 and hidden % heads == 0:
        return hidden // heads
    return None


def head_size_problem(config, attention, accelerator, model="the model", image="the pinned image", fix_var=None):
    """None, or why the image cannot serve the model's attention head size on this accelerator.

    attention: the image facts' "attention" ({accelerator: {backend: [head sizes]}}; an empty list means the
    backend takes any size). A head size is servable when one backend of the accelerator takes it."""
    head = model_head_dim(config)
    backends = ((attention or {}).get(accelerator) or {}) if isinstance(attention, dict) else {}
    if head is None or not backends:
        return None
    if any(not sizes or head in sizes for sizes in backends.values()):
        return None
    sizes = sorted(set(s for v in backends.values() for s in v))
    return ("%s has attention head size %d (config.json head_dim, or hidden_size / num_attention_heads), which the "
            "%s attention of %s (%s) does not support: it supports %s. The engine would start and then fail on the "
            "first request (\"Unsupported ... attention configuration: head_dim=%d\"). Serve a model whose head size "
            "is one of those%s, or pin an image whose attention backend supports %d."
            % (model, head, accelerator.upper() if accelerator == "cpu" else accelerator, image,
               ", ".join(sorted(backends)), ", ".join(str(s) for s in sizes), head,
               (" (%s)" % fix_var) if fix_var else "", head))
