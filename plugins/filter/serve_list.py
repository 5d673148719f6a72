# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Many models on a serving host (logic in plugin_utils.fleet.serve_list)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import serve_list as SV

# Each filter's documentation: plugins/filter/<filter name>.yml.


def cpu_placement(entries):
    if not isinstance(entries, list) or not all(isinstance(e, dict) and e.get("name") for e in entries):
        raise AnsibleFilterError("cpu_placement expects llmfleet_models as the model_list filter returns them "
                                 "(.models: entries with a name), got %r" % (entries,))
    return SV.cpu_placement(entries)


def stale_instances(recorded, serving, files=None):
    if not isinstance(recorded, dict):
        raise AnsibleFilterError("stale_instances expects the port record ({instance: port}), got %r" % (recorded,))
    return SV.stale_instances(recorded, list(serving or []), dict(files or {}))


def failed_models(result):
    return SV.failed_models(result if isinstance(result, dict) else {})


def flag_check_models(models, one_model=None):
    if not isinstance(models, list) or not all(isinstance(m, dict) and m.get("name") for m in models):
        raise AnsibleFilterError("flag_check_models expects replica_spec's models (a list of models with a name), "
                                 "got %r" % (models,))
    if one_model is not None and not isinstance(one_model, dict):
        raise AnsibleFilterError("flag_check_models: one_model must be a dict of vllm_flag_check options, got %r"
                                 % (one_model,))
    return SV.flag_check_models(models, one_model)


class FilterModule:
    def filters(self):
        return {"cpu_placement": cpu_placement, "failed_models": failed_models, "flag_check_models": flag_check_models,
                "stale_instances": stale_instances}
