# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""wait-healthy: a replica's start gate (host package: host_package.py). Does I/O.

Run on the serving host by systemd (ExecStartPost, roles/vllm_server/files/wait-healthy URL CONTAINER
[ENV_FILE]): blocks until the replica answers GET /health with 200, then warms it up. Returns 0 once healthy
(and warmed up); 1 as soon as the container is no longer running (no point waiting for a crashed engine).
systemd's TimeoutStartSec bounds the whole wait.

Warm-up (LLMFLEET_WARMUP_TOKENS > 0, from the unit's EnvironmentFile): one completion of that many prompt tokens
and 1 output token for LLMFLEET_SERVED_MODEL, with the replica's API key read from ENV_FILE, before the unit counts
as started. vLLM's engine with --enforce-eager skips its own warm-up pass, so the first client request would be its
first forward pass; on the CPU engine (vLLM 0.32, AMX CPUs) a first pass of a few tokens kills the engine core with
SIGILL, a long one does not (and later short ones then work). A warm-up that fails over HTTP is reported, not fatal.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

from .replica_env import api_key, http_open


def _say(message, stream=None):
    stream = stream or sys.stdout
    stream.write(message + "\n")
    stream.flush()


def container_running(name):
    result = subprocess.run(
        ["docker", "inspect", "--format", "{{.State.Running}}", name],
        capture_output=True, text=True, check=False)
    # Not created yet (the run command is still starting) counts as running.
    return result.returncode != 0 or result.stdout.strip() == "true"


def warm_up(url, container, env_file, tokens, model):
    """One completion with `tokens` prompt tokens; 0 when answered (or refused over HTTP), 1 when the engine died."""
    base = url.rsplit("/health", 1)[0]
    body = json.dumps({"model": model, "prompt": " ".join(["warm"] * tokens), "max_tokens": 1}).encode()
    headers = {"Content-Type": "application/json"}
    key = api_key(env_file)
    if key:
        headers["Authorization"] = "Bearer " + key
    started = time.monotonic()
    request = urllib.request.Request(base + "/v1/completions", data=body, headers=headers, method="POST")
    try:
        with http_open(request, timeout=300) as response:
            _say("warm-up completion (%d prompt tokens) answered %d after %.1fs"
                 % (tokens, response.status, time.monotonic() - started))
            return 0
    except urllib.error.HTTPError as err:
        detail = err.read()[:300].decode("utf-8", "replace")
        time.sleep(3)
        if not container_running(container):
            _say("container %s stopped during the warm-up completion (HTTP %d: %s)" % (container, err.code, detail),
                 sys.stderr)
            return 1
        _say("warm-up completion answered HTTP %d (%s); starting anyway" % (err.code, detail), sys.stderr)
        return 0
    except (urllib.error.URLError, OSError) as err:
        _say("warm-up completion failed (%s)" % err, sys.stderr)
        return 0 if container_running(container) else 1


def main(argv=None):
    """wait-healthy URL CONTAINER [ENV_FILE]: 0 once healthy (and warmed up), 1 when the container stopped."""
    argv = sys.argv[1:] if argv is None else argv
    url, container = argv[0], argv[1]
    env_file = argv[2] if len(argv) > 2 else None
    tokens = int(os.environ.get("LLMFLEET_WARMUP_TOKENS") or 0)
    started = time.monotonic()
    checked = started
    while True:
        try:
            with http_open(url, timeout=5) as response:
                if response.status == 200:
                    _say("healthy after %.0fs: %s" % (time.monotonic() - started, url))
                    if tokens > 0:
                        return warm_up(url, container, env_file, tokens,
                                       os.environ.get("LLMFLEET_SERVED_MODEL", ""))
                    return 0
        except (urllib.error.URLError, OSError):
            pass
        # /health every half second (a local request: the unit counts as started as soon as vLLM is up), the
        # container's state (a docker call) every two.
        now = time.monotonic()
        if now - started > 5 and now - checked >= 2:
            checked = now
            if not container_running(container):
                _say("container %s stopped before %s answered" % (container, url), sys.stderr)
                return 1
        time.sleep(0.5)
