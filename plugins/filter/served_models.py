# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The models a serving host describes, one at a time; the logic lives in plugins/plugin_utils/fleet/served_models.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import fleet
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import served_models as SM

# Each filter's documentation: plugins/filter/<filter name>.yml.


def served_model_view(serving, name=""):
    if serving is not None and not isinstance(serving, dict):
        raise AnsibleFilterError("served_model_view: serving.json must be a mapping, got %s" % type(serving).__name__)
    try:
        return SM.model_view(serving, str(name or ""))
    except SM.ServedModelError as exc:
        raise AnsibleFilterError("served_model_view: %s" % exc)


def served_replica_models(serving):
    if serving is not None and not isinstance(serving, dict):
        raise AnsibleFilterError("served_replica_models: serving.json must be a mapping, got %s" % type(serving).__name__)
    return SM.replica_models(serving)


def model_backends(members):
    try:
        return SM.model_backends(list(members or []))
    except fleet.FleetError as exc:
        raise AnsibleFilterError("model_backends: %s" % exc)


def prometheus_model_targets(backends):
    return SM.prometheus_model_targets(list(backends or []))


class FilterModule(object):
    def filters(self):
        return {
            "served_model_view": served_model_view,
            "served_replica_models": served_replica_models,
            "model_backends": model_backends,
            "prometheus_model_targets": prometheus_model_targets,
        }
