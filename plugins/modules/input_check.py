#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: input_check
short_description: Check the deployment's inputs that need no host, with the name the user set and the fix
description:
  - Runs on the controller (the preflight role delegates it to localhost) before anything changes on a host, and
    fails with every problem found, one sentence each.
  - Checks values (numbers, ranges, choices, non-empty names, dicts) under the variable names the user set; the
    JSON-valued vLLM flags of O(args_extra); C(VLLM_*) variables of O(env) that vLLM does not read; a local model
    directory's completeness (config.json, tokenizer files, every shard of the safetensors index); and, for a hub
    source, that the repository and revision exist on the configured endpoint and that the endpoint is a hub of
    the configured kind (a ModelScope source pointed at a Hugging Face endpoint is named as such).
  - Secrets set but empty, white space or naming an undefined variable (O(secrets) carries only their state,
    never a value); a production endpoint without an API key; the image pin's form (O(image)); every port a
    replica listens on after the edge's offset (O(ports)); and, when the controller has cached the pinned image's
    flag table (O(flag_cache_dir)), the flags of O(args_extra) and the model's attention head size against that image.
  - A hub the controller cannot reach gives a warning, not a failure (the hosts may reach it; they check again).
version_added: "1.0.0"
options:
  checks:
    description:
      - Value checks, each a dict with C(var) (the name the user set), C(value), C(type) (C(int), C(float), C(choice),
        C(str) for a non-empty name without spaces, C(dict)), and optionally C(min), C(max), C(gt) (exclusive
        minimum), C(choices), C(example), C(hint).
    type: list
    elements: dict
    default: []
  args_extra:
    description: Extra vLLM flags (flag -> value) whose JSON-valued flags must parse.
    type: raw
  args_extra_var:
    description: The variable O(args_extra) came from, for messages (the C(preflight) role passes C(vllm_server_args_extra)).
    type: str
    default: args_extra
  env:
    description: The replica environment (NAME -> value).
    type: raw
  env_var:
    description: The variable O(env) came from, for messages (the C(preflight) role passes C(vllm_server_env)).
    type: str
    default: env
  model_source:
    description:
      - Where the weights come from, as the model_weights role reads it - C(source) (hf, modelscope, local, archive),
        C(repo_id), C(revision), C(endpoint), C(local_path) (a directory on the controller), and C(local_path_var),
        the variable C(local_path) came from, for messages (default C(model_source.local_path); the C(preflight)
        role passes C(model_weights_local_path)).
    type: dict
    default: {}
  token:
    description: Hub token for private or gated repositories (never logged).
    type: str
  secrets:
    description:
      - The state of each secret input, never its value - C(var), C(kind) (C(key), C(keys), C(token), C(password)),
        C(set) (the variable is set), C(defined) (its value resolves), C(blank) (empty or white space; for C(keys) a
        list with such an entry, or no list). A set secret that is blank or does not resolve is refused.
    type: list
    elements: dict
    default: []
  key_check:
    description:
      - Refuse production without an API key - C(environment), C(key_set) (a non-empty key is in effect), C(key_var),
        C(address) and C(address_var) (what clients reach) and its C(scope) (the address_scope filter's answer).
      - Refuse production with TLS off beyond loopback - C(tls) (whether the listener speaks TLS, default true) and
        C(tls_var) (the variable that turned it off).
    type: dict
  image:
    description:
      - The image pin as the vllm_image role reads it - C(ref) (required to check), C(var) (the variable C(ref)
        came from, for messages; default C(image.ref)), C(mirror), C(allow_unpinned), C(environment), C(accelerator).
    type: dict
  ports:
    description:
      - The replicas' ports after the edge's offset - C(replicas) (a list of C(name), C(port)), C(edge),
        C(offset), and for messages C(replicas_var) (the variable that sets the ports; default C(ports.replicas))
        and C(offset_var) (the one that sets the offset; default C(ports.offset)).
    type: dict
  flag_cache_dir:
    description:
      - The controller's cache of what the serve stage read from images (vllm_server_flag_cache_controller_dir).
        When it holds the facts of the image O(image) pins, the flags of O(args_extra) are checked against that
        image's own C(vllm serve) flags, and the model's attention head size (O(model_config)) against its
        attention backends.
    type: path
  model_config:
    description: A config.json on the controller of the model to serve (its head size is checked, see O(flag_cache_dir)).
    type: path
  model_var:
    description:
      - The variables that choose the model of O(model_config), named by a head-size refusal as the fix (the
        C(preflight) role passes C(llmfleet_model / model_weights_*)).
    type: str
    default: model_config
    version_added: "1.0.0"
  accelerator:
    description: C(gpu) or C(cpu), for the attention backends to check the head size against.
    type: str
    default: gpu
  check_hub:
    description: Ask the hub whether the repository and revision exist.
    type: bool
    default: true
  hub_timeout:
    description: Seconds for each hub request.
    type: int
    default: 10
author:
  - llmfleet maintainers (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.vllm.attributes
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  check_mode:
    support: full
    details: It only reads; the hub is asked in check mode too.
"""

EXAMPLES = r"""
- name: Check the inputs before anything changes
  llmfleet.vllm.input_check:
    checks:
      - {var: llmfleet_gpu_memory_utilization, value: "{{ llmfleet_gpu_memory_utilization }}", type: float, gt: 0, max: 1}
    args_extra: "{{ vllm_server_args_extra | default({}) }}"
    args_extra_var: vllm_server_args_extra
    env: "{{ vllm_server_env | default({}) }}"
    env_var: vllm_server_env
    model_source: {source: hf, repo_id: Qwen/Qwen3.5-35B-A3B-FP8, revision: main}
  delegate_to: localhost
"""

RETURN = r"""
problems:
  description: One sentence per problem (the task fails when there is any).
  returned: always
  type: list
  elements: str
hub:
  description: What the hub answered (C(url), C(status), C(answers_as)) when it was asked.
  returned: always
  type: dict
image_facts_cached:
  description: Whether the controller's cache held the pinned image's facts (its flags and attention were checked).
  returned: always
  type: bool
"""

import json
import os

from urllib.parse import quote

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_flags import parse_help
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.hub_answers import (
    endpoint_problem,
    hf_revision_verdict,
    looks_like_hf,
    looks_like_modelscope,
    ms_revision_verdict,
)
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.image_checks import (
    args_extra_flag_problems,
    head_size_problem,
    image_facts_for_ref,
    image_problems,
)
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.input_checks import (
    env_problems,
    model_dir_problems,
    port_problems,
    value_problems,
)
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.json_flags import json_flag_problems
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.secret_checks import secret_problems

PUBLIC = {"hf": "https://huggingface.co", "modelscope": "https://www.modelscope.cn"}


def _get(module, url, token, timeout):
    headers = {"Accept": "application/json", "User-Agent": "llmfleet.vllm preflight"}
    if token:
        headers["Authorization"] = "Bearer " + token
    resp, info = fetch_url(module, url, headers=headers, method="GET", timeout=timeout, force=True)
    status = info.get("status", -1)
    # On an HTTP error fetch_url has read the body already (into info) and may still hand back the response.
    body = info.get("body") or b""
    if not body and resp is not None:
        try:
            body = resp.read()
        except Exception:  # pylint: disable=broad-except
            body = b""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    headers = dict((k.lower(), v) for k, v in info.items() if isinstance(v, str))
    return status, headers, body[:20000], info.get("msg", "")


def hf_url(endpoint, repo_id, revision):
    return "%s/api/models/%s/revision/%s" % (endpoint, repo_id, quote(revision or "main", safe=""))


def ms_url(endpoint, repo_id, revision):
    return "%s/api/v1/models/%s/repo/files?Revision=%s&Recursive=False" % (
        endpoint, repo_id, quote(revision or "master", safe=""))


def hub_problems(module, src, token, timeout):
    """([problems], [warnings], hub info) for a hub source."""
    source = src.get("source")
    repo_id = src.get("repo_id") or ""
    revision = src.get("revision") or ""
    endpoint = (src.get("endpoint") or PUBLIC[source]).rstrip("/")
    shown = src.get("endpoint") or PUBLIC[source]
    url = hf_url(endpoint, repo_id, revision) if source == "hf" else ms_url(endpoint, repo_id, revision)
    status, headers, body, msg = _get(module, url, token, timeout)
    info = {"url": url, "status": status}
    if status < 0 or status >= 500 and not body:
        return [], ["Could not ask %s from the controller whether %s at revision %r exists (%s); the hosts check it "
                    "when they fetch." % (shown, repo_id, revision or "default", msg or "HTTP %s" % status)], info
    if source == "hf":
        ours = looks_like_hf(status, headers, body)
    else:
        ours = looks_like_modelscope(status, headers, body)
    if ours:
        info["answers_as"] = source
        verdict = (hf_revision_verdict if source == "hf" else ms_revision_verdict)(
            status, headers, body, repo_id, revision, shown)
        return ([verdict] if verdict else []), [], info
    # Not an answer of the configured kind: which hub is it?
    other = "modelscope" if source == "hf" else "hf"
    other_url = ms_url(endpoint, repo_id, revision) if other == "modelscope" else hf_url(endpoint, repo_id, revision)
    o_status, o_headers, o_body, o_msg = _get(module, other_url, token, timeout)
    if other == "hf":
        answers_as = other if looks_like_hf(o_status, o_headers, o_body) else None
    else:
        answers_as = other if looks_like_modelscope(o_status, o_headers, o_body) else None
    info["answers_as"] = answers_as
    problem = endpoint_problem(source, shown, answers_as)
    if answers_as is None:
        problem += " (GET %s answered HTTP %s.)" % (url, status)
    return [problem], [], info


def cached_image_facts(directory, ref):
    """The controller's cached facts of the image ref pins (see vllm_server_flag_cache_controller_dir), or None."""
    if not directory or not ref or not os.path.isdir(directory):
        return None
    docs = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(directory, name)) as fh:
                docs.append(json.load(fh))
        except (IOError, OSError, ValueError):
            continue
    return image_facts_for_ref(docs, ref)


def _image_facts_problems(p, image, facts):
    """What the pinned image's cached facts refuse: unknown args_extra flags, a head size its attention lacks."""
    problems = []
    if isinstance(p["args_extra"], dict):
        problems += args_extra_flag_problems(p["args_extra"], parse_help(facts.get("help") or ""),
                                             var=p["args_extra_var"], image=image.get("ref"),
                                             vllm_version=facts.get("version"))
    if p["model_config"] and os.path.isfile(p["model_config"]):
        try:
            with open(p["model_config"]) as fh:
                config = json.load(fh)
        except (IOError, OSError, ValueError):
            config = None
        problem = head_size_problem(config, facts.get("attention"), p["accelerator"],
                                    model=os.path.dirname(p["model_config"]), image=image.get("ref"),
                                    fix_var=p["model_var"])
        if problem:
            problems.append(problem)
    return problems


def _local_source_problems(path, args_extra, var):
    """A controller-side model directory that vLLM could not serve (var: the variable path came from)."""
    if not os.path.isdir(path):
        return ["%s %s is not a directory on the controller: set it to the "
                "checkpoint directory (config.json, tokenizer files, *.safetensors)." % (var, path)]
    names = []
    for root, dirs, files in os.walk(path):
        names.extend(os.path.relpath(os.path.join(root, f), path) for f in files)
    index = None
    if "model.safetensors.index.json" in names:
        try:
            with open(os.path.join(path, "model.safetensors.index.json")) as fh:
                index = json.load(fh)
        except ValueError:
            index = {}
    extra = args_extra if isinstance(args_extra, dict) else {}
    own_tokenizer = any(str(k).replace("_", "-").lstrip("-") == "tokenizer" and v for k, v in extra.items())
    return model_dir_problems(names, index, where="%s %s" % (var, path),
                              check_tokenizer=not own_tokenizer)


# The variable names in messages are parameters (the preflight role passes its own); the defaults name only this
# module's options.
ARGUMENT_SPEC = dict(
    checks=dict(type="list", elements="dict", default=[]),
    args_extra=dict(type="raw"),
    args_extra_var=dict(type="str", default="args_extra"),
    env=dict(type="raw"),
    env_var=dict(type="str", default="env"),
    model_source=dict(type="dict", default={}),
    token=dict(type="str", no_log=True),
    secrets=dict(type="list", elements="dict", default=[], no_log=False),
    key_check=dict(type="dict", no_log=False),
    image=dict(type="dict"),
    ports=dict(type="dict"),
    flag_cache_dir=dict(type="path"),
    model_config=dict(type="path"),
    model_var=dict(type="str", default="model_config"),
    accelerator=dict(type="str", default="gpu"),
    check_hub=dict(type="bool", default=True),
    hub_timeout=dict(type="int", default=10),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    p = module.params
    problems = value_problems(p["checks"])
    if p["args_extra"] is not None:
        problems += json_flag_problems(p["args_extra"], var=p["args_extra_var"])
    if p["env"] is not None:
        problems += env_problems(p["env"], var=p["env_var"])

    problems += secret_problems(p["secrets"], p["key_check"])
    image = p["image"] or {}
    if image.get("ref"):
        problems += image_problems(image["ref"], var=image.get("var") or "image.ref",
                                   mirror=image.get("mirror") or "", allow_unpinned=image.get("allow_unpinned", False),
                                   environment=image.get("environment") or "dev",
                                   accelerator=image.get("accelerator") or p["accelerator"])
    ports = p["ports"] or {}
    if ports.get("replicas") is not None:
        problems += port_problems(ports.get("replicas"), edge=ports.get("edge", True), offset=ports.get("offset", 0),
                                  replicas_var=ports.get("replicas_var") or "ports.replicas",
                                  offset_var=ports.get("offset_var") or "ports.offset")
    facts = cached_image_facts(p["flag_cache_dir"], image.get("ref"))
    if facts:
        problems += _image_facts_problems(p, image, facts)

    src = p["model_source"] or {}
    warnings, hub = [], {}
    source = src.get("source")
    if source == "local" and src.get("local_path"):
        problems += _local_source_problems(src["local_path"], p["args_extra"],
                                           src.get("local_path_var") or "model_source.local_path")
    elif source in ("hf", "modelscope") and src.get("repo_id") and p["check_hub"]:
        found, warnings, hub = hub_problems(module, src, p["token"], p["hub_timeout"])
        problems += found

    for warning in warnings:
        module.warn(warning)
    if problems:
        module.fail_json(msg=" ".join(problems) + " Nothing was changed.", problems=problems, hub=hub,
                         image_facts_cached=bool(facts))
    module.exit_json(changed=False, problems=[], hub=hub, image_facts_cached=bool(facts))


if __name__ == "__main__":
    main()
