# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Checks of the user's inputs that need no host: one sentence per problem, naming the variable the user set
and the fix. Pure functions, no I/O.

  value_problems(checks)                  numbers / choices / non-empty strings / dicts ({var, value, type, ...})
  env_problems(env, known)                VLLM_* variables vLLM does not read (known: the image's own list)
  model_dir_problems(names, index)        a model directory without config, tokenizer or a shard of its index
  port_problems(replicas, edge, offset)   every port a replica listens on, after the edge's offset, in 1-65535
  rule_problems(rules)                    the roles' declarative input rules (condition, variable, message, fix)
  held_port_problems(replicas, host)      ports replica_state found held by a process that is not ours

The other checks of this room, by what they read: json_flags.py (JSON-valued vLLM flags), hub_answers.py (a
hub's answer about a repository and revision), secret_checks.py (secrets and the production key), image_checks.py
(the image pin, and flags and head size against the pinned image).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import json
import re

from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent import conventions as CV
from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent.diagnostics import ENV_TO_FLAG


# The file names that make a model directory (plugins/module_utils/host_agent/conventions.py).
_TOKENIZER_FILES = CV.TOKENIZER_FILES
_WEIGHT_SUFFIXES = CV.WEIGHT_SUFFIXES


def show_value(value):
    """value as a message quotes it: a string in double quotes, anything else as Python writes it."""
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
                problems.append("%s must be %s%s; got %s.%s" % (var, rule, ex, show_value(value), hint))
                continue
            if ((check.get("gt") is not None and not number > check["gt"])
                    or (check.get("min") is not None and number < check["min"])
                    or (check.get("max") is not None and number > check["max"])):
                problems.append("%s must be %s%s; got %s.%s" % (var, rule, ex, show_value(value), hint))
        elif kind == "choice":
            choices = [str(c) for c in check.get("choices") or []]
            if str(value) not in choices or isinstance(value, bool):
                problems.append("%s must be one of %s; got %s.%s" % (var, ", ".join(choices), show_value(value), hint))
        elif kind == "dict":
            if not isinstance(value, dict):
                ex = (" (e.g. %s)" % example) if example is not None else ""
                problems.append("%s must be a dict%s; got %s.%s" % (var, ex, show_value(value), hint))
        elif kind == "abspath":
            text = value if isinstance(value, str) else ""
            if not re.match(r"^/[^\0]+$", text) or len(text.rstrip("/")) <= 1:
                problems.append("%s must be an absolute path on the host (e.g. %s); got %s.%s"
                                % (var, example or "/srv/llmfleet/models/qwen3.5-35b-a3b", show_value(value), hint))
        elif kind == "str":
            if not isinstance(value, str) or not value.strip():
                problems.append("%s must not be empty; got %s.%s" % (var, show_value(value), hint))
            elif value != value.strip() or re.search(r"\s", value):
                problems.append("%s must not contain spaces; got %s.%s" % (var, show_value(value), hint))
    return problems


def env_problems(env, known=None, var="vllm_server_env", image=None):
    """VLLM_* variables vLLM does not read. Without known, only the ones people set believing vLLM reads them
    (diagnostics.ENV_TO_FLAG, e.g. the seed's VLLM_ENABLE_PREFIX_CACHING); with known (the image's
    vllm.envs.environment_variables), every VLLM_* name outside it."""
    problems = []
    if not isinstance(env, dict):
        return ["%s must be a dict of NAME -> value; got %s." % (var, show_value(env))]
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


def truthy(value):
    """A bool, or the text of one as Ansible templates it ("True", "yes", "1", "on")."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "yes", "1", "on")


# ---- ports ----------------------------------------------------------------------------------------------------

def port_problems(replicas, edge=True, offset=0, replicas_var=None, offset_var="vllm_server_edge_port_offset"):
    """Every port a replica listens on must be a TCP port (1-65535): its own (the edge's, or vLLM's without the
    edge) and, behind the edge, vLLM's at port + offset. replicas: [{name, port}] as the serve role renders them;
    replicas_var and offset_var: the variables that set the ports and the offset, for messages."""
    problems = []
    try:
        offset = int(offset) if edge else 0
    except (TypeError, ValueError):
        return ["%s must be a whole number (e.g. 10000); got %s." % (offset_var, show_value(offset))]
    which = replicas_var or "vllm_server_port_base"
    for replica in replicas or []:
        try:
            port = int(replica.get("port"))
        except (TypeError, ValueError, AttributeError):
            problems.append("replica %s has no port number (%s): fix %s." % (
                replica.get("name") if isinstance(replica, dict) else replica, show_value(replica), which))
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
        if not truthy(rule["fail"]) or (group is not None and group in groups):
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
