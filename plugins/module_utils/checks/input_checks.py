# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Checks of the user's inputs that need no host: one sentence per problem, naming the variable the user set
and the fix. Pure functions, no I/O (the hub answers are passed in by the caller).

  value_problems(checks)                  numbers / choices / non-empty strings / dicts ({var, value, type, ...})
  json_flag_problems(flags, json_flags)   JSON-valued vLLM flags whose value does not parse
  env_problems(env, known)                VLLM_* variables vLLM does not read (known: the image's own list)
  model_dir_problems(names, index)        a model directory without config, tokenizer or a shard of its index
  hf_revision_verdict / ms_revision_verdict   a hub's answer about a repo and revision -> None or a problem
  json_flags_from_help(text)              the flags whose help says they take JSON (vLLM's --help=all)
  secret_problems(secrets, key_check)     secrets set but empty / unresolved; production without a key
  image_problems(ref, ...)                vllm_image_ref: pinned repository:tag@sha256:<64 hex>, right for the profile
  port_problems(replicas, edge, offset)   every port a replica listens on, after the edge's offset, in 1-65535
  args_extra_flag_problems(extra, flags)  flags of vllm_server_args_extra the pinned image's `vllm serve` lacks
  image_facts_for_ref(docs, ref)          the controller's cached image facts (flag table) of a pinned reference
  model_head_dim(config) / head_size_problem(...)   a model's attention head size against the image's backends
  rule_problems(rules)                    the roles' declarative input rules (condition, variable, message, fix)
  held_port_problems(replicas, host)      ports replica_state found held by a process that is not ours
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import json
import re

from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent import conventions as CV
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks import image_ref as IR
from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent.diagnostics import ENV_TO_FLAG
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_args import VllmArgsError, render_vllm_args
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_flags import format_problems, validate_argv

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
# The file names that make a model directory (plugins/module_utils/host_agent/conventions.py).
_TOKENIZER_FILES = CV.TOKENIZER_FILES
_WEIGHT_SUFFIXES = CV.WEIGHT_SUFFIXES


def _show(value):
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _number(value, kind):
    """value as an int / float, or None when it is not one (booleans are not numbers)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)) and kind == "float":
        return float(value)
    if isinstance(value, int):
        return value
    text = str(value).strip()
    try:
        return float(text) if kind == "float" else int(text)
    except ValueError:
        if kind == "int":
            try:
                as_float = float(text)
            except ValueError:
                return None
            return int(as_float) if as_float.is_integer() else None
        return None


def value_problems(checks):
    """Each check: {var, value, type: int|float|choice|str|dict|abspath, min, max, gt (exclusive minimum),
    choices, example, hint}. Returns one sentence per failed check."""
    problems = []
    for check in checks or []:
        var, value, kind = check.get("var"), check.get("value"), check.get("type", "str")
        example = check.get("example")
        hint = (" " + check["hint"]) if check.get("hint") else ""
        if kind in ("int", "float"):
            number = _number(value, kind)
            what = "a whole number" if kind == "int" else "a number"
            bounds = []
            if check.get("gt") is not None:
                bounds.append("above %s" % check["gt"])
            if check.get("min") is not None:
                bounds.append("at least %s" % check["min"])
            if check.get("max") is not None:
                bounds.append("at most %s" % check["max"])
            rule = "%s%s" % (what, (" " + " and ".join(bounds)) if bounds else "")
            ex = (" (e.g. %s)" % example) if example is not None else ""
            if number is None:
                problems.append("%s must be %s%s; got %s.%s" % (var, rule, ex, _show(value), hint))
                continue
            if ((check.get("gt") is not None and not number > check["gt"])
                    or (check.get("min") is not None and number < check["min"])
                    or (check.get("max") is not None and number > check["max"])):
                problems.append("%s must be %s%s; got %s.%s" % (var, rule, ex, _show(value), hint))
        elif kind == "choice":
            choices = [str(c) for c in check.get("choices") or []]
            if str(value) not in choices or isinstance(value, bool):
                problems.append("%s must be one of %s; got %s.%s" % (var, ", ".join(choices), _show(value), hint))
        elif kind == "dict":
            if not isinstance(value, dict):
                ex = (" (e.g. %s)" % example) if example is not None else ""
                problems.append("%s must be a dict%s; got %s.%s" % (var, ex, _show(value), hint))
        elif kind == "abspath":
            text = value if isinstance(value, str) else ""
            if not re.match(r"^/[^\0]+$", text) or len(text.rstrip("/")) <= 1:
                problems.append("%s must be an absolute path on the host (e.g. %s); got %s.%s"
                                % (var, example or "/srv/llmfleet/models/qwen3.5-35b-a3b", _show(value), hint))
        elif kind == "str":
            if not isinstance(value, str) or not value.strip():
                problems.append("%s must not be empty; got %s.%s" % (var, _show(value), hint))
            elif value != value.strip() or re.search(r"\s", value):
                problems.append("%s must not contain spaces; got %s.%s" % (var, _show(value), hint))
    return problems


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
        return ["%s must be a dict of vLLM flag -> value (e.g. {enforce-eager: true}); got %s." % (var, _show(flags))]
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
                % (var, name, _show(value), exc))
    return problems


def env_problems(env, known=None, var="vllm_server_env", image=None):
    """VLLM_* variables vLLM does not read. Without known, only the ones people set believing vLLM reads them
    (diagnostics.ENV_TO_FLAG, e.g. the seed's VLLM_ENABLE_PREFIX_CACHING); with known (the image's
    vllm.envs.environment_variables), every VLLM_* name outside it."""
    problems = []
    if not isinstance(env, dict):
        return ["%s must be a dict of NAME -> value; got %s." % (var, _show(env))]
    known_set = set(known) if known is not None else None
    where = (" of the pinned image %s" % image) if image else ""
    for name in sorted(str(k) for k in env):
        if not name.startswith("VLLM_"):
            continue
        if name in ENV_TO_FLAG:
            problems.append("%s sets %s, which vLLM does not read: remove it and use %s instead (the plan's flags: "
                            "llmfleet_features / vllm_server_args_extra)." % (var, name, ENV_TO_FLAG[name]))
        elif known_set is not None and name not in known_set:
            close = difflib.get_close_matches(name, sorted(known_set), n=1, cutoff=0.75)
            problems.append("%s sets %s, which is not one of vLLM's environment variables%s (vllm.envs): %s"
                            % (var, name, where, ("did you mean %s?" % close[0]) if close else
                               "remove it, or use the `vllm serve` flag that does the job."))
    return problems


def model_dir_problems(names, index=None, where="the model directory", check_tokenizer=True):
    """What a model directory lacks for vLLM to load it. names: the relative paths in it; index: the parsed
    model.safetensors.index.json (None when there is none)."""
    names = set(names or [])
    missing = []
    if CV.CONFIG_FILE not in names:
        missing.append(CV.CONFIG_FILE)
    if check_tokenizer:
        if CV.TOKENIZER_CONFIG_FILE not in names:
            missing.append(CV.TOKENIZER_CONFIG_FILE)
        if not names.intersection(_TOKENIZER_FILES) and not any(n.endswith(".tiktoken") for n in names):
            missing.append("a tokenizer file (one of %s)" % ", ".join(_TOKENIZER_FILES))
    if index is not None:
        shards = sorted(set(((index or {}).get("weight_map") or {}).values()))
        if not shards:
            missing.append("the shard list of model.safetensors.index.json (its weight_map is empty)")
        absent = [s for s in shards if s not in names]
        if absent:
            missing.append("%d of the %d shards its model.safetensors.index.json lists (%s)"
                           % (len(absent), len(shards), ", ".join(absent[:3]) + (", ..." if len(absent) > 3 else "")))
    elif not any(n.endswith(_WEIGHT_SUFFIXES) for n in names):
        missing.append("weight files (*.safetensors)")
    if not missing:
        return []
    return ["%s lacks %s: copy the complete checkpoint (config, tokenizer files and every shard) from the same "
            "revision." % (where, ", ".join(missing))]


# ---- hub answers --------------------------------------------------------------------------------------------

def _json_or_none(body):
    try:
        return json.loads(body) if body else None
    except (TypeError, ValueError):
        return None


def looks_like_hf(status, headers, body):
    """A Hugging Face (or mirror) answer to GET /api/models/{repo}/revision/{rev}."""
    headers = dict((str(k).lower(), v) for k, v in (headers or {}).items())
    doc = _json_or_none(body)
    if headers.get("x-error-code") or headers.get("x-repo-commit"):
        return True
    return status == 200 and isinstance(doc, dict) and "sha" in doc


def looks_like_modelscope(status, headers, body):
    """A ModelScope (or mirror) answer: JSON with a numeric Code."""
    doc = _json_or_none(body)
    return isinstance(doc, dict) and "Code" in doc


def hf_revision_verdict(status, headers, body, repo_id, revision, endpoint):
    """None when the hub has repo_id at revision, else a problem naming the variable to change."""
    headers = dict((str(k).lower(), v) for k, v in (headers or {}).items())
    code = headers.get("x-error-code", "")
    rev = revision or "main"
    doc = _json_or_none(body)
    if status == 200 and isinstance(doc, dict) and doc.get("sha"):
        return None
    if code == "RevisionNotFound" or (status == 404 and "revision" in str(body).lower() and code != "RepoNotFound"):
        return ("model_weights_revision %s does not exist in %s on %s: set it to a branch, tag or commit of that "
                "repository (or leave it empty for main)." % (_show(rev), repo_id, endpoint))
    if code == "GatedRepo":
        return ("%s on %s is gated: accept its terms with your account and set model_weights_token to a token of "
                "that account." % (repo_id, endpoint))
    if status in (401, 403, 404) and (code in ("RepoNotFound", "")):
        return ("%s at revision %s was not found on %s (or model_weights_token cannot read it): check "
                "model_weights_repo_id and model_weights_revision%s." % (
                    repo_id, _show(rev), endpoint,
                    "" if code else " (and that model_weights_endpoint is a Hugging Face hub or mirror)"))
    return ("%s answered HTTP %s for %s at revision %s: check model_weights_endpoint and model_weights_repo_id."
            % (endpoint, status, repo_id, _show(rev)))


def ms_revision_verdict(status, headers, body, repo_id, revision, endpoint):
    doc = _json_or_none(body)
    rev = revision or "master"
    if isinstance(doc, dict) and "Code" in doc:
        if status == 200 and doc.get("Code") in (200, "200") and doc.get("Success", True) is not False:
            return None
        message = str(doc.get("Message") or "")
        if "revision" in message.lower():
            return ("model_weights_revision %s does not exist in %s on %s (%s): set it to a branch, tag or commit "
                    "of that repository (or leave it empty for master)." % (_show(rev), repo_id, endpoint, message))
        return ("%s at revision %s was not found on %s (%s): check model_weights_repo_id, model_weights_revision "
                "and, for a private model, model_weights_token." % (repo_id, _show(rev), endpoint,
                                                                    message or "HTTP %s" % status))
    return None  # not a ModelScope answer: the caller decides (endpoint_problem)


def endpoint_problem(source, endpoint, answers_as):
    """The endpoint answers as another hub (answers_as: 'hf', 'modelscope' or None for neither)."""
    names = {"hf": "Hugging Face", "modelscope": "ModelScope"}
    if answers_as == source:
        return None
    if answers_as in names:
        return ("model_weights_endpoint %s is a %s endpoint, but model_weights_source is %s: point "
                "model_weights_endpoint at a %s hub or mirror, or set model_weights_source: %s."
                % (endpoint, names[answers_as], source, names.get(source, source), answers_as))
    return ("model_weights_endpoint %s does not answer as a %s hub (no %s API there): point it at a %s mirror, "
            "or leave it empty for the public hub." % (endpoint, names.get(source, source),
                                                       names.get(source, source), names.get(source, source)))


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


# ---- secrets ------------------------------------------------------------------------------------------------
# The caller hands over what state each secret is in, never its value: {var, kind, set, defined, blank}
#   set      the variable is set somewhere (inventory, group_vars, extra vars)
#   defined  its value resolves (False: a template naming an undefined variable, e.g. a vault file not loaded)
#   blank    its value is empty or white space (kind keys: a list with such an entry, or no list at all)
# kind: key (an API key), keys (a list of API keys), token (a hub token), password (registry credentials).

_SECRET_FIX = {
    "key": "Set it to the key (keep it in Ansible Vault: ansible-vault encrypt_string --name {var}), or remove the "
           "variable.",
    "keys": "Remove the empty entries, or set each to a key (from Ansible Vault).",
    "token": "Set it to the token (from Ansible Vault), or remove the variable when the repository is public.",
    "password": "Set it (from Ansible Vault), or remove both vllm_image_registry_username and "
                "vllm_image_registry_password for an anonymous pull.",
}
_SECRET_RISK = {
    "key": "an empty key would serve the endpoint without authentication",
    "keys": "an empty key would let requests through without authentication",
    "token": "an empty token fails against a private or gated repository",
    "password": "an empty password fails at the registry",
}


def _truth(value):
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "yes", "1", "on")


def secret_problems(secrets, key_check=None):
    """Secrets that are set but empty, white space or unresolved; and a production endpoint without any key.

    key_check: {environment, key_var, key_set (bool: a non-empty key is in effect), address, address_var, scope
    (the address_scope of what clients reach)}: prod with no key on an address beyond loopback is refused, as the
    serve role refuses it. The value of a secret is never part of a message."""
    problems = []
    for item in secrets or []:
        var, kind = item.get("var"), item.get("kind", "key")
        if not _truth(item.get("set", False)):
            continue
        fix = _SECRET_FIX.get(kind, _SECRET_FIX["key"]).format(var=var)
        risk = _SECRET_RISK.get(kind, _SECRET_RISK["key"])
        if not _truth(item.get("defined", True)):
            problems.append("%s is set to a template that does not resolve (it names an undefined variable, e.g. a "
                            "vault variable whose file is not loaded): %s. %s" % (var, risk, fix))
        elif _truth(item.get("blank", False)):
            what = ("is not a list of keys or has an empty entry" if kind == "keys"
                    else "is set but empty (or only white space)")
            problems.append("%s %s (an unset vault or environment lookup?): %s. %s" % (var, what, risk, fix))
    kc = key_check or {}
    if (kc.get("environment") == "prod" and not _truth(kc.get("key_set", True))
            and kc.get("scope") not in (None, "", "loopback")):
        problems.append("llmfleet_environment is prod and no API key is set, so anyone who reaches %s (%s) can use "
                        "the model. Set %s (e.g. ansible-vault encrypt_string --name llmfleet_api_key), or keep the "
                        "endpoint on this host only (%s: 127.0.0.1)."
                        % (kc.get("address"), kc.get("scope"), kc.get("key_var") or "llmfleet_api_key",
                           kc.get("address_var") or "vllm_server_edge_bind_address"))
    return problems


# ---- the image pin --------------------------------------------------------------------------------------------

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
    if _truth(allow_unpinned) and environment == "prod":
        problems.append("llmfleet_environment is prod, where vllm_image_allow_unpinned must stay false: a tag can "
                        "move, so two hosts could serve different vLLM builds. Pin %s by digest "
                        "(repository:tag@sha256:<64 hex>)." % var)
    if parts and accelerator == "cpu" and parts.get("path") == "vllm/vllm-openai":
        problems.append("llmfleet_accelerator is cpu but %s is %s, the CUDA build of vLLM, which cannot serve "
                        "without an NVIDIA GPU. Set %s to a CPU build of vLLM pinned by digest." % (var, ref, var))
    return problems


# ---- ports ----------------------------------------------------------------------------------------------------

def port_problems(replicas, edge=True, offset=0, replicas_var=None, offset_var="vllm_server_edge_port_offset"):
    """Every port a replica listens on must be a TCP port (1-65535): its own (the edge's, or vLLM's without the
    edge) and, behind the edge, vLLM's at port + offset. replicas: [{name, port}] as the serve role renders them;
    replicas_var and offset_var: the variables that set the ports and the offset, for messages."""
    problems = []
    try:
        offset = int(offset) if edge else 0
    except (TypeError, ValueError):
        return ["%s must be a whole number (e.g. 10000); got %s." % (offset_var, _show(offset))]
    which = replicas_var or "vllm_server_port_base"
    for replica in replicas or []:
        try:
            port = int(replica.get("port"))
        except (TypeError, ValueError, AttributeError):
            problems.append("replica %s has no port number (%s): fix %s." % (
                replica.get("name") if isinstance(replica, dict) else replica, _show(replica), which))
            continue
        name = replica.get("name", "?")
        if not 1 <= port <= 65535:
            problems.append("Replica %s would listen on port %d, outside 1-65535: set %s so that every replica's port "
                            "is a TCP port." % (name, port, which))
        elif edge and offset and not 1 <= port + offset <= 65535:
            problems.append("Replica %s listens on port %d through the edge, and vLLM itself on port %d + "
                            "%s %d = %d, outside 1-65535: lower %s (e.g. 8000) or "
                            "%s so that both stay at most 65535."
                            % (name, port, port, offset_var, offset, port + offset, which, offset_var))
    return problems


# ---- flags of vllm_server_args_extra against the pinned image's own table -------------------------------------

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


# ---- attention head size against what the image's attention backends serve ------------------------------------

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


# ---- the roles' declarative input rules -------------------------------------------------------------------------
# A role lists its input checks as data, one rule each: {fail, var, msg, fix, group}
#   fail   the condition (a bool, or the text of one as Ansible templates it) under which the input is refused
#   var    the variable the user set (documentation of the rule: each message names it)
#   msg    what is wrong; fix: what to do (appended after one space)
#   group  rules of one group are alternatives: only the first failing rule of a group is reported
# or {problems: [sentences]} for the sentences another check of this module returned (e.g. port_problems).

def rule_problems(rules):
    """One sentence per failed rule, in the order of rules."""
    problems, groups = [], set()
    for rule in rules or []:
        if not isinstance(rule, dict):
            raise TypeError("an input rule must be a dict (fail, var, msg, fix), got %s" % type(rule).__name__)
        if "problems" in rule:
            problems.extend(str(p) for p in rule.get("problems") or [])
            continue
        if "fail" not in rule:
            raise ValueError("input rule %r needs a condition (fail)" % (rule.get("var"),))
        group = rule.get("group")
        if not _truth(rule["fail"]) or (group is not None and group in groups):
            continue
        if not str(rule.get("msg") or "").strip():
            raise ValueError("input rule %r failed and has no message (msg)" % (rule.get("var"),))
        if group is not None:
            groups.add(group)
        fix = str(rule.get("fix") or "").strip()
        problems.append(str(rule["msg"]).strip() + ((" " + fix) if fix else ""))
    return problems


def held_port_problems(replicas, host):
    """The ports replica_state read as held by a process that is not ours, one sentence each, naming the variable
    that moves the port. replicas: replica_state's replicas ({name, port, container_port, ports: [{port, role,
    holder}]})."""
    problems = []
    for replica in replicas or []:
        for port in replica.get("ports") or []:
            if port.get("holder") != "other":
                continue
            who = ("the edge in front of replica %s" % replica.get("name") if port.get("role") == "edge"
                   else "replica %s" % replica.get("name"))
            offset = (" (or vllm_server_edge_port_offset, vLLM's own port behind the edge)"
                      if port.get("role") == "container" and replica.get("container_port") != replica.get("port")
                      else "")
            problems.append("Port %s on %s is in use by another process, so %s could not listen there; the replica "
                            "was left as it is. Free the port (ss -ltnp 'sport = :%s' shows who holds it), or set "
                            "vllm_server_port_base (or vllm_server_replicas)%s to free ports. Nothing was changed."
                            % (port.get("port"), host, who, port.get("port"), offset))
    return problems
