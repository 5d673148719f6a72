# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the verify stage smoke-tests, by kind (logic in module_utils.serving.openai_smoke)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Each filter's documentation: plugins/filter/<filter name>.yml.

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.module_utils.serving.openai_smoke import smoke_targets
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.served_models import served_models


def _smoke_targets(serving, base_urls=None, model=None):
    if not isinstance(serving, dict):
        raise AnsibleFilterError("smoke_targets expects the deployment description (a dict), got %s"
                                 % type(serving).__name__)
    return smoke_targets(served_models(serving), list(base_urls or []), model or None)


class FilterModule(object):
    def filters(self):
        return {"smoke_targets": _smoke_targets}
