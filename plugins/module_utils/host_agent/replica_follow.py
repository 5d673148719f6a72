# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""follow-container: a replica's container followed for systemd (host package: host_package.py). Does I/O.

Run on the serving host as the unit's main process after `docker run --detach`
(roles/vllm_server/files/follow-container NAME). Streams the container's log to stdout (the journal) and
returns the container's exit code once it stops, so Restart=on-failure sees a crash. A dockerd restart only
interrupts the stream (live-restore keeps the container running): the follow is picked up again instead of
failing the unit, which would replace a healthy container. Returns 1 when dockerd answers and the container
no longer exists.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import subprocess
import sys
import time

DOCKER = "/usr/bin/docker"


def _say(message):
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def state(name):
    """(running, exit_code), or None when dockerd does not answer or the container does not exist."""
    r = subprocess.run([DOCKER, "inspect", "--format", "{{.State.Running}} {{.State.ExitCode}}", name],
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        return None
    running, code = r.stdout.split()
    return running == "true", int(code)


def daemon_answers():
    return subprocess.run([DOCKER, "version", "--format", "{{.Server.Version}}"], capture_output=True,
                          check=False).returncode == 0


def main(argv=None):
    """Follow container argv[0] until it stops; its exit code (1 when it is gone)."""
    name = (sys.argv[1:] if argv is None else argv)[0]
    since = None
    while True:
        subprocess.run([DOCKER, "logs", "--follow"] + (["--since", since] if since else []) + [name], check=False)
        since = str(int(time.time()))
        s = state(name)
        if s is None:
            if daemon_answers() and state(name) is None:
                _say("container %s no longer exists" % name)
                return 1
            time.sleep(2)  # dockerd is restarting: the container keeps running (live-restore)
            continue
        running, code = s
        if not running:
            _say("container %s exited with %d" % (name, code))
            return code
        _say("log stream of %s interrupted (dockerd restart?); following again" % name)
        time.sleep(1)
