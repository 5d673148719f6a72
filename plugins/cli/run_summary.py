# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The JSON summary llmfleet-run prints: per-host counters, the failed tasks with their messages, and why a run
stopped before its play ran. Pure functions over ansible-runner's event dicts; secrets are redacted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from .run_secrets import redact


MESSAGE_LIMIT = 2000
STREAM_TAIL_LIMIT = 600


def _tail(text: str, limit: int) -> str:
    text = str(text).strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def failure_message(res) -> str:
    """A one-paragraph message from a failed/unreachable task result (event_data.res).

    A no_log result carries only ``censored``: that text is returned, nothing else.
    """
    if not isinstance(res, Mapping):
        return _tail(res, MESSAGE_LIMIT) if res else "task failed (no result recorded)"
    if "censored" in res:
        return str(res["censored"])
    parts = []
    msg = res.get("msg")
    if msg:
        parts.append(msg if isinstance(msg, str) else json.dumps(msg, sort_keys=True))
    rc = res.get("rc")
    if isinstance(rc, int) and rc != 0:
        parts.append(f"rc={rc}")
    results = res.get("results")
    if isinstance(results, list):
        for item in results:
            if isinstance(item, Mapping) and (item.get("failed") or item.get("unreachable")):
                label = item.get("_ansible_item_label", item.get("item"))
                parts.append(f"item {json.dumps(label, sort_keys=True, default=str)}: {failure_message(item)}")
    if res.get("stderr"):
        parts.append("stderr: " + _tail(res["stderr"], STREAM_TAIL_LIMIT))
    elif res.get("stdout") and isinstance(rc, int) and rc != 0:
        parts.append("stdout: " + _tail(res["stdout"], STREAM_TAIL_LIMIT))
    if not parts and res.get("exception"):
        parts.append(_tail(res["exception"], STREAM_TAIL_LIMIT))
    if not parts:
        return "task failed (no message)"
    return _tail("; ".join(parts), MESSAGE_LIMIT)


def host_stats(stats_event_data: Mapping | None) -> dict:
    """Per-host counters from a playbook_on_stats event's data."""
    if not stats_event_data:
        return {}
    fields = {
        "ok": "ok", "changed": "changed", "failed": "failures", "unreachable": "dark",
        "skipped": "skipped", "rescued": "rescued", "ignored": "ignored",
    }
    hosts = set()
    for source in list(fields.values()) + ["processed"]:
        hosts.update((stats_event_data.get(source) or {}).keys())
    return {
        host: {name: int((stats_event_data.get(source) or {}).get(host, 0)) for name, source in fields.items()}
        for host in sorted(hosts)
    }


def failed_tasks(events: Iterable[Mapping], hosts: Mapping[str, Mapping] | None = None) -> list[dict]:
    """Tasks that failed or found their host unreachable, in event order.

    Failures with ignore_errors are not failures. When the run's stats are known, failures on hosts
    whose stats count no failure and no unreachable (a ``rescue`` handled them) are left out too.
    """
    out = []
    for event in events:
        kind = event.get("event")
        if kind not in ("runner_on_failed", "runner_on_unreachable", "runner_on_async_failed"):
            continue
        data = event.get("event_data") or {}
        if data.get("ignore_errors"):
            continue
        host = data.get("host") or data.get("remote_addr") or "?"
        if hosts and host in hosts and not (hosts[host]["failed"] or hosts[host]["unreachable"]):
            continue
        msg = failure_message(data.get("res"))
        if kind == "runner_on_unreachable":
            msg = "UNREACHABLE: " + msg
        out.append({
            "host": host,
            "task": data.get("task") or "",
            "role": data.get("role") or None,
            "msg": msg,
        })
    return out


def build_summary(events: list[Mapping], *, status: str, rc: int, elapsed_s: float, playbook: str,
                  artifacts_dir: str | None, secrets: Iterable[str] = (), stdout_tail: str = "",
                  check: bool = False, warnings: Iterable[str] = ()) -> dict:
    """The JSON document llmfleet-run prints. Pure: events are ansible-runner event dicts."""
    secrets = list(secrets)
    stats = None
    for event in events:
        if event.get("event") == "playbook_on_stats":
            stats = event.get("event_data") or {}
    hosts = host_stats(stats)
    tasks = failed_tasks(events, hosts if stats is not None else None)
    for task in tasks:
        task["msg"] = redact(task["msg"], secrets)
    summary = {
        "status": status,
        "rc": rc,
        "elapsed_s": round(float(elapsed_s), 3),
        "playbook": playbook,
        "check_mode": bool(check),
        "hosts": hosts,
        "failed_tasks": tasks,
        "artifacts_dir": artifacts_dir,
    }
    if stats is None and rc != 0:
        # Ansible stopped before the play ran (syntax error, missing role, bad inventory...): the
        # only account of why is its output.
        summary["error"] = redact(_tail(stdout_tail, MESSAGE_LIMIT), secrets) or f"ansible-playbook exited {rc}"
    if warnings:
        summary["warnings"] = list(warnings)
    return summary
