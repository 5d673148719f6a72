# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin for llmfleet.vllm.replica_spec: what each replica runs, on the controller (documentation in
plugins/modules/replica_spec.py, logic in plugins/plugin_utils/fleet/replica_spec.py)."""
from __future__ import annotations

import json
import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.llmfleet.vllm.plugins.modules.replica_spec import ARGUMENT_SPEC
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.replica_spec import SpecError, host_spec, image_facts


def cached_flag_help(cache_dir, image, inspects):
    """The image's `vllm serve --help=all` text from the controller's flag cache (vllm_flag_check's image_facts,
    kept by the role as <dir>/<image hex>.json); '' when not kept yet."""
    hex_id = image_facts(image, inspects).get("hex")
    path = os.path.join(cache_dir, "%s.json" % hex_id) if cache_dir and hex_id else ""
    try:
        with open(path) as handle:
            kept = json.load(handle)
    except (OSError, ValueError):
        return ""
    return str(kept.get("help") or "") if isinstance(kept, dict) else ""


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        models = args.pop("models")
        serve = dict(args.get("serve_list") or {})
        if serve.get("entries"):
            serve["flag_help"] = cached_flag_help(serve.pop("flag_cache_dir", ""), args.get("image"),
                                                  args.get("image_inspects"))
            args["serve_list"] = serve
        try:
            result.update(host_spec(args, models))
        except SpecError as exc:
            raise AnsibleActionFail("replica_spec: %s" % exc)
        result["changed"] = False
        return result
