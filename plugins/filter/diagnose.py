# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters that turn collected evidence into diagnoses (controller side; logic in module_utils.host_agent.diagnose_evidence)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Each filter's documentation: plugins/filter/<filter name>.yml.

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent.diagnose_evidence import (
    container_facts_json,
    context_from_plan,
    diagnose_replica,
    parse_df,
    replica_names,
)


def _diagnose_replica(evidence, context=None, raw_limit=40):
    if not isinstance(evidence, dict):
        raise AnsibleFilterError("diagnose_replica expects a dict of evidence, got %s" % type(evidence).__name__)
    return diagnose_replica(evidence, context or {}, raw_limit=int(raw_limit))


def diagnose_finding_ids(results):
    """The ids of every finding of diagnose_replica's results, each once, in the order first found."""
    if not isinstance(results, (list, tuple)):
        raise AnsibleFilterError("diagnose_finding_ids expects diagnose_replica results, got %s" % type(results).__name__)
    ids = []
    for result in results:
        for finding in (result or {}).get("findings") or []:
            if finding.get("id") not in ids:
                ids.append(finding.get("id"))
    return ids


class FilterModule(object):
    def filters(self):
        return {
            "diagnose_replica": _diagnose_replica,
            "diagnose_context_from_plan": context_from_plan,
            "diagnose_replica_names": replica_names,
            "diagnose_container_facts_json": container_facts_json,
            "diagnose_df": parse_df,
            "diagnose_finding_ids": diagnose_finding_ids,
        }
