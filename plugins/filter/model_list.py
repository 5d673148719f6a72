# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""llmfleet_models normalised and checked; the logic lives in plugins/plugin_utils/fleet/model_list.py."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import model_list as ML

# Each filter's documentation: plugins/filter/<filter name>.yml.


def model_list(models, shorthand=None, gpu_count=None):
    if shorthand is not None and not isinstance(shorthand, dict):
        raise AnsibleFilterError("model_list: shorthand must be a mapping of the one-model variables, got %r"
                                 % (shorthand,))
    if gpu_count is not None:
        try:
            gpu_count = int(gpu_count)
        except (TypeError, ValueError) as exc:
            raise AnsibleFilterError("model_list: gpu_count must be a number, got %r" % (gpu_count,)) from exc
    return ML.model_list(models, dict(shorthand or {}), gpu_count)


class FilterModule:
    def filters(self):
        return {"model_list": model_list}
