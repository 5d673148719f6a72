# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Lists the serve role hands to other tasks, built from its replicas (pure functions, no I/O).

  edge_members(replicas, bind_address, offset)                  the edge's replicas: its port, vLLM's behind it
  watchdog_targets(replicas, health_base, offset, config_dir)   what the watchdog probes for each replica
  replica_files(replicas, config_dir, rendered)                 per-replica files for the config_files module
  instance_paths(names, config_dir, settings_only)              the files of instances that are removed

replicas: vllm_server_replicas ({name, port, gpus}).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent import conventions as CV
from ansible_collections.llmfleet.vllm.plugins.module_utils.serving.serving_identity import replica_files as _kinds


def replica_file(config_dir, name, suffix):
    """The path of one of replica name's files in config_dir (vllm-<name><suffix>)."""
    return "%s/vllm-%s%s" % (config_dir, name, suffix)


def edge_members(replicas, bind_address, offset=0):
    """The edge's view of each replica: it listens on the replica's port and forwards to vLLM on this host's
    address for bind_address (loopback for a wildcard) at port + offset."""
    address = CV.reach_address(bind_address)
    return [{"name": r["name"], "port": int(r["port"]), "address": address,
             "backend_port": int(r["port"]) + int(offset or 0)} for r in replicas or []]


def watchdog_targets(replicas, health_base, offset, config_dir):
    """What the watchdog probes for each replica: vLLM's URL (health_base + port + offset), its unit, its
    container and its environment file (for the key)."""
    return [{"name": r["name"], "url": "%s%d" % (health_base, int(r["port"]) + int(offset or 0)),
             "unit": CV.replica_unit(r["name"]), "container": CV.replica_container(r["name"]),
             "env_file": replica_file(config_dir, r["name"], ".env")} for r in replicas or []]


def replica_files(replicas, config_dir, kinds):
    """The files of each replica for the config_files module. kinds: [{suffix, mode (optional), contents}], where
    contents lists the rendered text for each replica in the order of replicas. Per replica, in the order of
    kinds."""
    files = []
    for index, replica in enumerate(replicas or []):
        for kind in kinds or []:
            contents = kind.get("contents") or []
            if len(contents) != len(replicas):
                raise ValueError("replica_files: %d contents for %d replicas (suffix %s)"
                                 % (len(contents), len(replicas), kind.get("suffix")))
            entry = {"path": replica_file(config_dir, replica["name"], kind["suffix"]), "content": contents[index]}
            if kind.get("mode"):
                entry["mode"] = kind["mode"]
            files.append(entry)
    return files


def instance_paths(names, config_dir, settings_only=False):
    """Every file an instance of ``names`` leaves in config_dir: its settings, run and environment files and their
    known-good copies (known-good/), for an instance no longer served. settings_only: only each settings file
    (vllm-<name>.unit.conf, no secret in it), to see which instances the host has."""
    if settings_only:
        return [replica_file(config_dir, name, ".unit.conf") for name in names or []]
    paths = []
    for name in names or []:
        for live in sorted(_kinds(str(config_dir), str(name)).values()):
            paths += [live, "%s/known-good/%s" % (str(config_dir).rstrip("/"), live.rsplit("/", 1)[-1])]
    return paths
