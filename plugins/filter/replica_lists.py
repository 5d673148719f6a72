# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Lists the serve role builds from its replicas (logic in plugin_utils.fleet.replica_lists)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Each filter's documentation: plugins/filter/<filter name>.yml.

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import replica_lists as SL


def _replicas(value, name):
    if not isinstance(value, list) or not all(isinstance(r, dict) and "name" in r and "port" in r for r in value):
        raise AnsibleFilterError("%s expects the replicas (a list of dicts with name and port), got %r" % (name, value))
    return value


def edge_members(replicas, bind_address, offset=0):
    return SL.edge_members(_replicas(replicas, "edge_members"), bind_address, offset)


def watchdog_targets(replicas, health_base, offset, config_dir):
    return SL.watchdog_targets(_replicas(replicas, "watchdog_targets"), str(health_base), offset, str(config_dir))


def replica_files(replicas, config_dir, kinds):
    try:
        return SL.replica_files(_replicas(replicas, "replica_files"), str(config_dir), list(kinds or []))
    except (KeyError, ValueError) as exc:
        raise AnsibleFilterError("replica_files: %s" % exc)


def instance_paths(names, config_dir, settings_only=False):
    if not isinstance(names, list):
        raise AnsibleFilterError("instance_paths expects a list of instance names, got %r" % (names,))
    return SL.instance_paths([str(n) for n in names], str(config_dir), bool(settings_only))


class FilterModule(object):
    def filters(self):
        return {"edge_members": edge_members, "watchdog_targets": watchdog_targets, "replica_files": replica_files,
                "instance_paths": instance_paths}
