# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""llmfleet-watchdog: the hang watchdog for the vLLM replicas of a host (host package: host_package.py). Does I/O.

Run on the serving host by llmfleet-watchdog.timer (roles/vllm_server/files/llmfleet-watchdog CONFIG.json;
docs/OPERATIONS.md).

Each run asks every active replica for a 1-token completion, directly on its loopback port, with a deadline.
/health is not enough: it answers 200 while the engine core is hung. A probe fails when the completion does
not come back in time (or comes back as an error) AND the engine made no progress meanwhile (vLLM's
prompt + generation token counters on /metrics did not move): a replica that is merely saturated keeps
producing tokens and is left alone. After `failures` failed runs in a row the replica's container is killed
and its unit restarted; the reason and a diagnosis (the collection's diagnose signatures over the journal and
the container's log) go to the journal. Every run writes Prometheus metrics for the node exporter's textfile
collector (llmfleet_watchdog_*), on which the LLMFleetReplicaHung alert fires.

On a host of several models each replica is probed with its own model's name, and replicas that share a GPU are
never restarted at the same moment: vLLM sizes its memory from what the GPU has free when it starts, so two
engines starting together on one GPU mis-size each other. A hung replica whose GPU has a co-tenant restarted in
this run, or still starting from an earlier one, waits for a later run (restart_turns).

Config (written by the vllm_server role): {"replicas": [{"name", "url", "unit", "container", "env_file", and on
a host of several models "model", "gpus" and "runner" (generate or pooling)}], "model", "timeout", "failures", "textfile", "state", "diagnose": true}
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

from .diagnose_evidence import diagnose_replica
from .diagnostics import EVIDENCE_PREFIX
from .replica_env import api_key, http_open

DOCKER = "/usr/bin/docker"


def log(priority, message):
    """One journal line with its syslog priority (3 err, 4 warning, 6 info)."""
    for line in str(message).splitlines() or [""]:
        sys.stdout.write("<%d>%s\n" % (priority, line))
    sys.stdout.flush()


def progress(url, timeout):
    """Sum of vLLM's prompt + generation token counters, or None when /metrics does not answer."""
    try:
        with http_open(url + "/metrics", timeout=timeout) as response:
            text = response.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError):
        return None
    total = 0.0
    for line in text.splitlines():
        if line.startswith(("vllm:generation_tokens_total", "vllm:prompt_tokens_total")):
            try:
                total += float(line.rsplit(" ", 1)[1])
            except ValueError:
                pass
    return total


# What each kind of engine is asked (the replica's runner): a path, the request, the key its answer must carry.
# A pooling model (embeddings, scores) generates nothing: vLLM's generic /pooling runs one input through it.
PROBES = {
    "generate": ("/v1/completions", {"prompt": "ping", "max_tokens": 1, "temperature": 0}, "choices"),
    "pooling": ("/pooling", {"input": "ping"}, "data"),
}


def probe(replica, model, timeout):
    """{ok, seconds, reason, busy}: one 1-token completion (a pooling model: one pooled input) against the replica
    itself."""
    url = replica["url"]
    before = progress(url, min(timeout, 5))
    path, request_body, answer_key = PROBES.get(replica.get("runner") or "generate", PROBES["generate"])
    body = json.dumps(dict(request_body, model=model)).encode()
    headers = {"Content-Type": "application/json"}
    key = api_key(replica.get("env_file", ""))
    if key:
        headers["Authorization"] = "Bearer " + key
    request = urllib.request.Request(url + path, data=body, headers=headers, method="POST")
    started = time.monotonic()
    reason = None
    try:
        with http_open(request, timeout=timeout) as response:
            answer = json.loads(response.read().decode("utf-8", "replace") or "{}")
            if not answer.get(answer_key):
                reason = "the answer to %s came back without %s" % (path, answer_key)
    except urllib.error.HTTPError as err:
        reason = "%s answered HTTP %d" % (path, err.code)
    except (urllib.error.URLError, OSError, ValueError) as err:
        cause = getattr(err, "reason", err)
        reason = ("no answer to a 1-token completion within %ss" % timeout
                  if "timed out" in str(cause) else "the completion failed: %s" % cause)
    seconds = time.monotonic() - started
    if reason is None:
        return {"ok": True, "seconds": seconds, "reason": "", "busy": False}
    after = progress(url, 5)
    busy = before is not None and after is not None and after > before
    if after is None:
        reason += "; /metrics does not answer either"
    elif not busy:
        reason += "; the engine produced no token meanwhile"
    return {"ok": False, "seconds": seconds, "reason": reason, "busy": busy}


# Unit states (systemctl is-active) of a replica on its way up or down: its engine is (re)sizing its memory.
TRANSITIONS = ("activating", "deactivating", "reloading")


def unit_state(unit):
    """systemctl is-active's word for the unit: active, activating, inactive, failed, ..."""
    result = subprocess.run(["systemctl", "is-active", unit], capture_output=True, text=True, check=False)
    return result.stdout.strip() or "unknown"


def run(argv, limit=20000):
    r = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    return (r.stdout + r.stderr)[-limit:]


def diagnose(replica, reason):
    """The collection's diagnosis (diagnose_evidence.py, in this package) of the replica's journal and log."""
    evidence = {
        "replica": replica["name"], "unit": replica["unit"], "container": replica["container"],
        "unit_show": run(["systemctl", "show", replica["unit"]]),
        "journal": run(["journalctl", "--no-pager", "-o", "cat", "-n", "300", "-u", replica["unit"]]),
        "container_log": run([DOCKER, "logs", "--tail", "300", replica["container"]]),
        "inspect_json": run([DOCKER, "inspect", replica["container"]]),
        "extra_text": "%s watchdog: %s" % (EVIDENCE_PREFIX, reason),
    }
    try:
        report = diagnose_replica(evidence)["report"]
        return "\n".join(report) if isinstance(report, list) else str(report)
    except Exception as err:  # pylint: disable=broad-except
        return "diagnosis failed: %s" % err


def write_metrics(path, results, state, now, models=None):
    """The llmfleet_watchdog_* series of this run, labelled replica (and model where the config names it)."""
    if not path:
        return
    models = models or {}
    series = {
        "llmfleet_watchdog_probe_success": ("gauge", lambda r, s: 1 if r["ok"] else 0),
        "llmfleet_watchdog_probe_duration_seconds": ("gauge", lambda r, s: round(r["seconds"], 3)),
        "llmfleet_watchdog_consecutive_failures": ("gauge", lambda r, s: s.get("failures", 0)),
        "llmfleet_watchdog_restarts_total": ("counter", lambda r, s: s.get("restarts", 0)),
        "llmfleet_watchdog_last_restart_timestamp_seconds": ("gauge", lambda r, s: s.get("last_restart", 0)),
    }
    lines = []
    for metric, (kind, value) in series.items():
        lines.append("# TYPE %s %s" % (metric, kind))
        for name, result in sorted(results.items()):
            labels = 'replica="%s"' % name + (',model="%s"' % models[name] if models.get(name) else "")
            lines.append('%s{%s} %s' % (metric, labels, value(result, state.get(name, {}))))
    lines.append("# TYPE llmfleet_watchdog_last_run_timestamp_seconds gauge")
    lines.append("llmfleet_watchdog_last_run_timestamp_seconds %d" % now)
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def probe_all(config, timeout):
    """{replica name: probe result}, every active replica probed at once; inactive ones marked skipped."""
    results, threads = {}, []

    def one(replica):
        state = unit_state(replica["unit"])
        if state != "active":
            results[replica["name"]] = {"ok": True, "seconds": 0.0, "reason": "", "busy": False, "skipped": True,
                                        "state": state}
            return
        results[replica["name"]] = probe(replica, replica.get("model") or config["model"], timeout)

    for replica in config["replicas"]:
        thread = threading.Thread(target=one, args=(replica,))
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    return results


def count(replica, result, entry, limit):
    """Count one probe result in the replica's state entry; True when it has failed `limit` times in a row (due
    for a restart)."""
    name = replica["name"]
    if result.get("skipped"):
        entry["failures"] = 0  # starting, stopping or stopped on purpose: not the watchdog's business
        return False
    if result["ok"]:
        if entry.get("failures"):
            log(6, "replica %s answers again (%.2fs) after %d failed probe(s)"
                % (name, result["seconds"], entry["failures"]))
        entry["failures"] = 0
        return False
    if result["busy"]:
        log(4, "replica %s: %s, but it is busy producing tokens: not counted" % (name, result["reason"]))
        return False
    entry["failures"] = entry.get("failures", 0) + 1
    log(4, "replica %s: probe failed %d/%d: %s" % (name, entry["failures"], limit, result["reason"]))
    return entry["failures"] >= limit


def restart_turns(due, replicas, results):
    """(the replicas to restart now, {replica deferred: the co-tenant it waits for}), in the order of replicas.

    due: the names of the replicas due for a restart. A replica waits while one of its GPUs has a co-tenant that
    is restarted earlier in this run or whose unit is still starting or stopping (results' state): at most one
    engine (re)starts on a GPU at a time. Replicas without GPUs (the CPU engine) never wait."""
    holder = {}  # GPU -> the replica (re)starting on it
    for replica in replicas:
        if (results.get(replica["name"]) or {}).get("state") in TRANSITIONS:
            for gpu in replica.get("gpus") or []:
                holder.setdefault(gpu, replica["name"])
    now, deferred = [], {}
    for replica in replicas:
        name = replica["name"]
        if name not in due:
            continue
        busy = [holder[g] for g in replica.get("gpus") or [] if holder.get(g, name) != name]
        if busy:
            deferred[name] = busy[0]
            continue
        now.append(name)
        for gpu in replica.get("gpus") or []:
            holder[gpu] = name
    return now, deferred


def restart(config, replica, result, entry, timeout):
    """Kill and restart a hung replica (reason and diagnosis to the journal); its state entry records it."""
    name = replica["name"]
    reason = ("replica %s is hung: %s, %d times in a row (probe deadline %ss); restarting it"
              % (name, result["reason"], entry["failures"], timeout))
    log(3, reason)
    if config.get("diagnose", True):
        log(3, diagnose(replica, reason))
    # The engine does not answer: a graceful stop would wait for nothing until docker's stop timeout.
    run([DOCKER, "kill", replica["container"]])
    run(["systemctl", "restart", "--no-block", replica["unit"]])
    entry["failures"] = 0
    entry["restarts"] = entry.get("restarts", 0) + 1
    entry["last_restart"] = int(time.time())
    entry["last_reason"] = reason


def decide_all(config, results, state, timeout, limit):
    """Count every probe result; restart the hung replicas, one (re)start per GPU at a time (restart_turns)."""
    replicas = config["replicas"]
    due = [r["name"] for r in replicas if count(r, results[r["name"]], state.setdefault(r["name"], {}), limit)]
    now, deferred = restart_turns(due, replicas, results)
    for replica in replicas:
        name = replica["name"]
        if name in now:
            restart(config, replica, results[name], state[name], timeout)
        elif name in deferred:
            log(4, "replica %s is hung but shares a GPU with replica %s, which is (re)starting: its restart waits "
                   "for a later run (two engines starting on one GPU mis-size each other)" % (name, deferred[name]))


def main(argv=None):
    """llmfleet-watchdog CONFIG.json: one round of probes and decisions, its metrics and state written; 0."""
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as fh:
        config = json.load(fh)
    timeout = float(config.get("timeout", 30))
    limit = int(config.get("failures", 3))
    state_path = config.get("state", "/var/lib/llmfleet/watchdog.json")
    try:
        with open(state_path) as fh:
            state = json.load(fh)
    except (OSError, ValueError):
        state = {}
    now = time.time()
    results = probe_all(config, timeout)
    decide_all(config, results, state, timeout, limit)
    models = dict((r["name"], r.get("model")) for r in config["replicas"])
    write_metrics(config.get("textfile"), results, state, now, models)
    os.makedirs(os.path.dirname(state_path), exist_ok=True)
    tmp = state_path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(state, fh, indent=1, sort_keys=True)
    os.replace(tmp, state_path)
    return 0
