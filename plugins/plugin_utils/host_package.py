# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The host package: the collection's ``module_utils/host_agent/`` subpackage, shipped whole to the serving host.

The vllm_server role installs it as ``<libexec>/llmfleet_host/`` (lookup ``llmfleet.vllm.host_package``); the
role's small launchers (roles/vllm_server/files: llmfleet-watchdog, wait-healthy, follow-container,
llmfleet-group-watch) put their own directory first on sys.path and call ``main()`` of one module of it. The
subpackage imports only itself (relatively) and the standard library, so it imports the same inside the
collection and as ``llmfleet_host.*`` on a host without Ansible
(tests/unit/plugins/plugin_utils/test_host_package.py checks that closure). Every ``*.py`` file of the folder
is shipped: there is no list to keep.

  package_files(dest)     [{path, content}] of the package under directory dest (config_files' files list)
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.llmfleet.vllm.plugins.module_utils import host_agent

PACKAGE = "llmfleet_host"
SOURCE_DIR = os.path.dirname(os.path.abspath(host_agent.__file__))


def host_modules(directory=None):
    """The module names of the host agent (its *.py files but __init__), sorted."""
    names = os.listdir(directory or SOURCE_DIR)
    return sorted(n[:-3] for n in names if n.endswith(".py") and n != "__init__.py")


def source(name, directory=None):
    """The text of host agent module `name`."""
    with open(os.path.join(directory or SOURCE_DIR, name + ".py")) as fh:
        return fh.read()


def package_files(dest, directory=None):
    """[{path, content}] of the package installed under directory dest (dest/llmfleet_host/*.py)."""
    root = os.path.join(dest, PACKAGE)
    return [{"path": os.path.join(root, name + ".py"), "content": source(name, directory)}
            for name in ["__init__"] + host_modules(directory)]
