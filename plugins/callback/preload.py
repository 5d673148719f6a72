# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: preload
type: aggregate
author:
  - llmfleet maintainers (!UNKNOWN)
version_added: "1.0.0"
short_description: Load the plays' connection plugins and the Jinja plugins once, before the first task forks a worker
description:
  - C(ansible-playbook) runs each task of each host in a process it forks for that task. A plugin the main process
    never loaded is imported again in every one of those processes; the main process itself loads neither connection
    plugins nor this collection's filters, so every task pays for them.
  - At the start of each play this callback loads, in the main process, the connection plugin of every host of the
    play (its C(ansible_connection) in the inventory, else the play's C(connection), else the configured default) and
    the filter and test plugins (Ansible's own and this collection's). The forked task processes inherit them.
  - "Measured on the test bed (C(community.docker.docker_api) connection, whose import brings C(requests)): the
    no-op re-run of C(site.yml) spends about 9 s of controller CPU importing that plugin in 46 task processes, and
    3 s more importing filters (tests/bench/p1_p2_deploy.py)."
  - It changes no result and prints nothing. A plugin that cannot be loaded here is left to the task that uses it,
    which reports the error as before.
requirements:
  - enable it in ansible.cfg (C(callbacks_enabled = llmfleet.vllm.preload)), as the collection's own ansible.cfg does
"""

EXAMPLES = r"""
# ansible.cfg
# [defaults]
# callbacks_enabled = llmfleet.vllm.preload
"""

import importlib
import pkgutil

from ansible import constants as C
from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import PluginLoader, connection_loader, filter_loader, test_loader

# The collections whose Jinja plugin files are loaded whole: a collection filter is found by loading the files of
# its collection's filter package one after the other, in every task process that uses one.
_JINJA_COLLECTIONS = ("llmfleet.vllm",)


def connection_names(play_connection, host_vars, default=None):
    """The connection plugin names a play uses: each host's inventory ansible_connection, the play's own
    `connection`, the configured default. Templated or empty values are left out (the task resolves those)."""
    names = []
    for candidate in [play_connection] + [hv.get("ansible_connection") for hv in host_vars] + [default]:
        if isinstance(candidate, str) and candidate and "{" not in candidate and candidate not in names:
            names.append(candidate)
    return names


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "llmfleet.vllm.preload"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._loaded = set()
        self._jinja_loaded = False

    def _load_connections(self, play):
        host_vars = []
        inventory = getattr(getattr(play, "_variable_manager", None), "_inventory", None)
        if inventory is not None:
            for host in inventory.get_hosts(play.hosts):
                merged = {}
                for group in host.get_groups():
                    merged.update(group.get_vars())
                merged.update(host.get_vars())
                host_vars.append(merged)
        for name in connection_names(getattr(play, "connection", None), host_vars, C.DEFAULT_TRANSPORT):
            if name in self._loaded:
                continue
            self._loaded.add(name)
            try:
                connection_loader.get(name, class_only=True)
            except Exception as exc:  # pylint: disable=broad-exception-caught
                self._display.vvv("llmfleet.vllm.preload: connection %s not loaded ahead: %s" % (name, exc))

    def _load_jinja_plugins(self):
        self._jinja_loaded = True
        for loader, builtin in ((filter_loader, "ansible.builtin.to_json"), (test_loader, "ansible.builtin.file")):
            try:
                loader.get(builtin)
            except Exception as exc:  # pylint: disable=broad-exception-caught
                self._display.vvv("llmfleet.vllm.preload: %s plugins not loaded ahead: %s" % (loader.type, exc))
            for collection in _JINJA_COLLECTIONS:
                package = "ansible_collections.%s.plugins.%s" % (collection, loader.type)
                try:
                    path = importlib.import_module(package).__path__
                except ImportError:
                    continue
                for dummy, name, ispkg in pkgutil.iter_modules(path, prefix=collection + "."):
                    if ispkg:
                        continue
                    try:
                        # The file itself, as Jinja2Loader loads it through its parent class while it looks for a name.
                        PluginLoader.get_with_context(loader, name)
                    except Exception as exc:  # pylint: disable=broad-exception-caught
                        self._display.vvv("llmfleet.vllm.preload: %s not loaded ahead: %s" % (name, exc))

    def v2_playbook_on_play_start(self, play):
        if not self._jinja_loaded:
            self._load_jinja_plugins()
        self._load_connections(play)
