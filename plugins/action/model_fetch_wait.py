# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Wait for a model_fetch started with ``async``/``poll: 0`` and show its progress while it runs.

A play cannot print from inside an ``until`` loop, and recursive includes hit Python's recursion
limit after a few hundred polls. This action runs on the controller instead: every poll_interval it
asks the host for the job's status (async_status) and reads model_fetch's progress JSON (slurp), and
prints one line (bytes, percent, rate, ETA) whenever it changed. When the job ends it returns the
module's own result, so ``register`` sees model_fetch's RETURN values.
"""
from __future__ import annotations

import base64
import json
import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("jid", "progress_file", "poll_interval", "timeout"))

    def _async_dir(self):
        return self._remote_expand_user(self.get_shell_option("async_dir", default="~/.ansible_async"))

    def _status(self, jid, task_vars, mode="status"):
        return self._execute_module(module_name="ansible.legacy.async_status", task_vars=task_vars,
                                    module_args={"jid": jid, "mode": mode, "_async_dir": self._async_dir()})

    def _progress(self, path, task_vars):
        res = self._execute_module(module_name="ansible.legacy.slurp", task_vars=task_vars,
                                   module_args={"src": path})
        if res.get("failed") or "content" not in res:
            return None
        try:
            return json.loads(base64.b64decode(res["content"]).decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return None

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        _valid, args = self.validate_argument_spec(argument_spec={
            "jid": {"type": "str", "required": True},
            "progress_file": {"type": "path", "required": True},
            "poll_interval": {"type": "int", "default": 10},
            "timeout": {"type": "int", "default": 14400},
        })
        host = task_vars.get("inventory_hostname", "?")
        start, last_line, polls = time.time(), None, 0
        try:
            while True:
                polls += 1
                status = self._status(args["jid"], task_vars)
                if status.get("finished"):
                    break
                if status.get("failed") and not status.get("started"):
                    raise AnsibleActionFail("model_fetch job %s is unknown on %s: %s"
                                            % (args["jid"], host, status.get("msg")))
                prog = self._progress(args["progress_file"], task_vars)
                if prog and prog.get("line") and prog["line"] != last_line:
                    display.display("  [%s] model_fetch %s" % (host, prog["line"]), color="cyan")
                    last_line = prog["line"]
                if time.time() - start > args["timeout"]:
                    raise AnsibleActionFail("model_fetch still running after %ds (job %s keeps running on %s; "
                                            "raise model_weights_timeout or re-run the play later: it resumes)"
                                            % (args["timeout"], args["jid"], host))
                # 1, 2, 4, ... s up to poll_interval: a small or nearly complete fetch is collected within a
                # second or two instead of a whole interval later.
                time.sleep(max(1, min(args["poll_interval"], 2 ** (polls - 1))))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        prog = self._progress(args["progress_file"], task_vars)
        if prog and prog.get("line") and prog["line"] != last_line:
            display.display("  [%s] model_fetch %s" % (host, prog["line"]), color="cyan")
        self._status(args["jid"], task_vars, mode="cleanup")
        for key in ("started", "finished", "ansible_job_id", "results_file", "stdout", "stderr",
                    "stdout_lines", "stderr_lines"):
            status.pop(key, None)
        result.update(status)
        result["polls"] = polls
        return result
