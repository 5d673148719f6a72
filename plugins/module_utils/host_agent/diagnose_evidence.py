# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Evidence: what the diagnose role (and the replica watchdog) collects on a host about one replica - unit
state, `docker inspect`, journal and container log, the model directory, the served names - turned into
[llmfleet] lines and context for diagnostics.classify, and diagnose_replica, the whole diagnosis of a replica.

Pure functions, no I/O; no environment value and no key reaches a report (container_facts, redact).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

# Relative imports: the same file also runs in the host package (host_package.py), outside the collection.
from .conventions import CONFIG_FILE, TOKENIZER_FILES, WEIGHT_SUFFIXES
from .diagnostics import ENV_TO_FLAG, EVIDENCE_PREFIX, classify, format_report


_SECRET_PATTERNS = [
    (re.compile(r"(?i)(['\"]?api_key['\"]?\s*[:=]\s*)(\[[^\]]*\]|'[^']*'|\"[^\"]*\"|\S+)"), r"\1<redacted>"),
    (re.compile(r"(?i)(--api-key[= ])(\S+)"), r"\1<redacted>"),
    (re.compile(r"(?i)\b((?:VLLM_API_KEY|HF_TOKEN|HUGGING_FACE_HUB_TOKEN|MODELSCOPE_API_TOKEN|[A-Z_]*SECRET[A-Z_]*|"
                r"[A-Z_]*TOKEN)=)(\S+)"), r"\1<redacted>"),
    (re.compile(r"(?i)(authorization:\s*bearer\s+)(\S+)"), r"\1<redacted>"),
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"), "<redacted>"),
]


def redact(line):
    """Mask API keys and hub tokens in a log line before it is printed."""
    line = str(line)
    for pattern, repl in _SECRET_PATTERNS:
        line = pattern.sub(repl, line)
    return line


def container_facts_json(text):
    """container_facts() of `docker inspect` output text; {} when it is not JSON (no such container)."""
    try:
        return container_facts(json.loads(text or "[]"))
    except ValueError:
        return {}


def parse_df(text):
    """`df -P` output -> [{mount, use}] (use in percent, an int)."""
    out = []
    for line in str(text or "").splitlines()[1:]:
        cols = line.split()
        if len(cols) >= 6 and cols[4].rstrip("%").isdigit():
            out.append({"mount": cols[5], "use": int(cols[4].rstrip("%"))})
    return out


def _arg_value(args, *names):
    args = [str(a) for a in (args or [])]
    for i, a in enumerate(args):
        for name in names:
            if a == name and i + 1 < len(args):
                return args[i + 1]
            if a.startswith(name + "="):
                return a.split("=", 1)[1]
    return None


def container_facts(inspect):
    """Safe facts from one `docker inspect` object (no environment values: they may hold secrets)."""
    if isinstance(inspect, list):
        inspect = inspect[0] if inspect else None
    if not inspect:
        return {}
    state = inspect.get("State") or {}
    config = inspect.get("Config") or {}
    host = inspect.get("HostConfig") or {}
    args = list(config.get("Entrypoint") or []) + list(config.get("Cmd") or [])
    mounts = [m for m in inspect.get("Mounts") or [] if str(m.get("Destination", "")).startswith("/models")]
    facts = {
        "status": state.get("Status"),
        "running": bool(state.get("Running")),
        "exit_code": state.get("ExitCode"),
        "oom_killed": bool(state.get("OOMKilled")),
        "error": state.get("Error") or "",
        "restart_count": inspect.get("RestartCount", 0),
        "image": config.get("Image"),
        "env_names": sorted(e.split("=", 1)[0] for e in config.get("Env") or []),
        "ipc_mode": host.get("IpcMode"),
        "shm_size": host.get("ShmSize"),
        "network_mode": host.get("NetworkMode"),
        "model_mounts": [{"source": m.get("Source"), "destination": m.get("Destination")} for m in mounts],
    }
    port = _arg_value(args, "--port")
    bindings = (host.get("PortBindings") or {})
    if port is None:
        port = "8000"
    host_port = None
    for key, value in bindings.items():
        if key.split("/")[0] == str(port) and value:
            host_port = value[0].get("HostPort")
    facts["port"] = int(host_port or port) if str(host_port or port).isdigit() else None
    for key, names in (("served_model_name", ("--served-model-name", "--served_model_name")),
                       ("max_model_len", ("--max-model-len", "--max_model_len")),
                       ("gpu_memory_utilization", ("--gpu-memory-utilization", "--gpu_memory_utilization")),
                       ("max_num_seqs", ("--max-num-seqs", "--max_num_seqs"))):
        value = _arg_value(args, *names)
        if value is not None:
            facts[key] = value
    positional = [a for a in args if str(a).startswith("/models")]
    if positional:
        facts["model_path"] = positional[0]
    if "served_model_name" not in facts and facts.get("model_path"):
        facts["served_model_name"] = facts["model_path"]
    return facts


def model_dir_lines(model_dir, files):
    """Evidence lines about a model directory's content. files: names in it, or None if it is absent."""
    if not model_dir:
        return []
    if files is None:
        return ["%s model directory %s does not exist" % (EVIDENCE_PREFIX, model_dir)]
    names = set(files)
    out = []
    if CONFIG_FILE not in names:
        out.append("%s model directory %s has no config.json" % (EVIDENCE_PREFIX, model_dir))
    if not any(n.endswith(WEIGHT_SUFFIXES) for n in names):
        out.append("%s model directory %s has no *.safetensors weight files" % (EVIDENCE_PREFIX, model_dir))
    if not names.intersection(TOKENIZER_FILES):
        out.append("%s model directory %s has no tokenizer files (tokenizer.json, tokenizer_config.json)"
                   % (EVIDENCE_PREFIX, model_dir))
    return out


def context_from_plan(plan):
    """Context values from the plan fact (llmfleet_plan, made by the vllm_plan module).

    The plan's own values (max_model_len, max_num_seqs, gpu_memory_utilization, min_vllm_version, model)
    are copied; its `suggestions` (a list of {set: {...}, text}, present when the plan did not fit) give
    suggested_<key> values. Where the plan suggests nothing for a knob, the next conservative step from
    the planned value is offered (utilization - 0.05, half the context, half the sequences), so a fix
    names a number the user can try.
    """
    plan = plan or {}
    ctx = {}
    for key in ("served_model_name", "min_vllm_version", "image", "max_model_len",
                "gpu_memory_utilization", "max_num_seqs", "vllm_version"):
        if plan.get(key) not in (None, ""):
            ctx[key] = plan[key]
    if plan.get("model") and "model" not in ctx:
        ctx["model"] = plan["model"]
    suggestions = plan.get("suggestions") or []
    if isinstance(suggestions, dict):  # {knob: value} is accepted too
        suggestions = [{"set": suggestions}]
    for suggestion in suggestions:
        for key, value in ((suggestion or {}).get("set") or {}).items():
            name = "suggested_variant" if key == "model" else "suggested_" + key
            if value not in (None, "") and name not in ctx:
                ctx[name] = value
    try:
        if "suggested_gpu_memory_utilization" not in ctx and plan.get("gpu_memory_utilization"):
            ctx["suggested_gpu_memory_utilization"] = round(max(0.05, float(plan["gpu_memory_utilization"]) - 0.05), 2)
        if "suggested_max_model_len" not in ctx and plan.get("max_model_len"):
            ctx["suggested_max_model_len"] = max(256, int(plan["max_model_len"]) // 2)
        if "suggested_max_num_seqs" not in ctx and plan.get("max_num_seqs"):
            ctx["suggested_max_num_seqs"] = max(1, int(plan["max_num_seqs"]) // 2)
    except (TypeError, ValueError):
        pass
    return ctx


def parse_systemctl_show(text):
    """`systemctl show -p A -p B unit` output (Key=Value lines) -> dict."""
    out = {}
    for line in str(text or "").splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def replica_names(unit_list_text="", container_names_text="", plan=None,
                  unit_prefix="llmfleet-vllm@", container_prefix="llmfleet-vllm-"):
    """Replica names found on a host: from the plan's replicas, the vLLM units and the vLLM containers."""
    names = []

    def add(name):
        name = str(name).strip()
        if name and name not in names:
            names.append(name)

    for replica in (plan or {}).get("replicas") or []:
        add(replica.get("name", "") if isinstance(replica, dict) else replica)
    for line in str(unit_list_text or "").splitlines():
        for token in line.split():
            if token.startswith(unit_prefix) and token.endswith(".service"):
                add(token[len(unit_prefix):-len(".service")])
    for line in str(container_names_text or "").splitlines():
        line = line.strip().lstrip("/")
        if line.startswith(container_prefix):
            add(line[len(container_prefix):])
    return names


def _evidence_lines(ev, ctx, facts):
    """The [llmfleet] lines for facts that are in no log (unit missing, OOM kill, model files, served names,
    nvidia runtime, full disk, variables vLLM does not read); fills ctx with what the container shows."""
    lines = []
    unit = ev.get("unit") or ""
    if unit and ev["unit_state"].get("LoadState") == "not-found":
        lines.append("%s unit %s is not installed" % (EVIDENCE_PREFIX, unit))
    if facts.get("oom_killed"):
        lines.append("%s container %s was OOM-killed (exit code %s)" % (EVIDENCE_PREFIX, ev.get("container") or "",
                                                                        facts.get("exit_code")))
    for key in ("served_model_name", "max_model_len", "gpu_memory_utilization", "max_num_seqs", "port",
                "model_path", "image"):
        if facts.get(key) not in (None, "") and key not in ctx:
            ctx[key] = facts[key]
    model_dir = ev.get("model_dir") or ""
    if not model_dir and facts.get("model_mounts"):
        model_dir = facts["model_mounts"][0]["source"]
    if model_dir:
        ctx.setdefault("model_dir", model_dir)
    if "model_files" in ev:
        lines.extend(model_dir_lines(model_dir, ev.get("model_files")))
    served = ev.get("served_names")
    requested = ev.get("requested_model") or ctx.get("requested_model")
    if served is not None and requested and requested not in served:
        lines.append("%s requested model %s is not among the served names [%s]"
                     % (EVIDENCE_PREFIX, requested, ", ".join(served)))
        ctx.setdefault("served_model_name", ", ".join(served))
    if ev.get("accelerator") == "gpu" and ev.get("docker_runtimes") is not None \
            and "nvidia" not in ev.get("docker_runtimes"):
        lines.append("%s docker has no nvidia runtime (runtimes: %s)"
                     % (EVIDENCE_PREFIX, ", ".join(ev.get("docker_runtimes")) or "none"))
    for disk in ev.get("disk") or []:
        try:
            use = int(str(disk.get("use", "0")).rstrip("%"))
        except ValueError:
            continue
        if use >= 97:
            lines.append("%s disk %s is %d%% used" % (EVIDENCE_PREFIX, disk.get("mount"), use))
    for name in facts.get("env_names", []):
        if name in ENV_TO_FLAG:
            # vLLM only warns about these; say it even when the log has scrolled past the warning.
            lines.append("%s container environment sets %s, which vLLM does not read" % (EVIDENCE_PREFIX, name))
    return lines


def _state_summary(unit_state, facts, container):
    """One phrase for the replica's state: unit active/sub state, restarts, container status and exit code."""
    state_bits = []
    if unit_state:
        state_bits.append("unit %s" % "/".join(x for x in (unit_state.get("ActiveState"),
                                                           unit_state.get("SubState")) if x))
        if unit_state.get("NRestarts") not in (None, "", "0"):
            state_bits.append("%s restarts" % unit_state.get("NRestarts"))
    if facts:
        bit = "container %s" % facts.get("status")
        if not facts.get("running") and facts.get("exit_code") is not None:
            bit += " (exit code %s%s)" % (facts.get("exit_code"), ", OOM-killed" if facts.get("oom_killed") else "")
        state_bits.append(bit)
    elif container:
        state_bits.append("container %s absent" % container)
    return ", ".join(state_bits) or "no unit or container found"


def diagnose_replica(evidence, context=None, raw_limit=40):
    """Classify everything collected for one replica.

    evidence keys (all optional): replica, unit, unit_state (dict of systemctl show properties) or
    unit_show (its text), container, inspect (docker inspect object) or inspect_json (its text), journal,
    container_log, container_stderr, model_dir, model_files,
    served_names (list from GET /v1/models), requested_model, extra_text (e.g. a health-gate
    response body), docker_runtimes (list), accelerator ('gpu'|'cpu'), disk (list of {mount, use}).
    Returns {replica, state, findings, report, context}.
    """
    ev = dict(evidence or {})
    ctx = dict(context or {})
    if ev.get("replica") not in (None, ""):
        ctx.setdefault("replica", ev["replica"])
    ev["unit_state"] = ev.get("unit_state") or parse_systemctl_show(ev.get("unit_show"))
    if ev.get("inspect_json") and not ev.get("inspect"):
        try:
            ev["inspect"] = json.loads(ev["inspect_json"])
        except ValueError:
            ev["inspect"] = None
    facts = container_facts(ev.get("inspect"))
    lines = _evidence_lines(ev, ctx, facts)
    log_lines = []
    for key in ("journal", "container_log", "container_stderr", "extra_text"):
        text = ev.get(key)
        if text:
            log_lines.extend(str(text).splitlines())
    findings = classify(log_lines + lines, ctx)
    for f in findings:
        f["evidence"] = redact(f["evidence"])
    state = _state_summary(ev["unit_state"], facts, ev.get("container") or "")
    title = "%s: %s" % (ev.get("replica", "?"), state)
    raw = [redact(x) for x in log_lines if x.strip()]
    report = format_report(findings, title=title, raw_lines=raw + lines, raw_limit=raw_limit)
    return {"replica": ev.get("replica"), "state": state, "findings": findings, "report": report,
            "context": dict((k, v) for k, v in ctx.items() if k != "api_key")}
