# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The host package: the Python the serving host runs on its own, as one self-contained package.

The vllm_server role installs it as ``<libexec>/llmfleet_host/`` (lookup ``llmfleet.vllm.host_package``); the
role's small launchers (roles/vllm_server/files: llmfleet-watchdog, wait-healthy, follow-container) put their
own directory first on sys.path and call ``main()`` of one module of it. The modules are the collection's own
module_utils files, copied as they are: they import each other relatively (``from .diagnostics import ...``)
and otherwise only the standard library, so they import the same inside the collection and as
``llmfleet_host.*`` on a host without Ansible (tests/unit/plugins/module_utils/test_host_package.py checks that closure).

  HOST_MODULES            the module_utils files the package holds
  package_files(dest)     [{path, content}] of the package under directory dest (config_files' files list)
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

PACKAGE = "llmfleet_host"

HOST_MODULES = (
    "replica_watchdog",     # llmfleet-watchdog
    "replica_gate",         # wait-healthy
    "replica_follow",       # follow-container
    "replica_env",          # a replica's environment file (API key)
    "diagnostics",          # the diagnosis the watchdog writes to the journal
    "diagnose_signatures",  # its data
    "nvidia_driver",        # CUDA_MIN_DRIVER, which the diagnosis quotes
    "multinode",            # llmfleet-group-watch (a rank of a model served over several hosts)
)

INIT = ('"""llmfleet.vllm host package, installed by the vllm_server role (plugins/module_utils/host_package.py '
        'in the collection)."""\n')


def source(name, directory=None):
    """The text of module_utils file `name` (a HOST_MODULES entry)."""
    with open(os.path.join(directory or os.path.dirname(os.path.abspath(__file__)), name + ".py")) as fh:
        return fh.read()


def package_files(dest, directory=None):
    """[{path, content}] of the package installed under directory dest (dest/llmfleet_host/*.py)."""
    root = os.path.join(dest, PACKAGE)
    files = [{"path": os.path.join(root, "__init__.py"), "content": INIT}]
    for name in HOST_MODULES:
        files.append({"path": os.path.join(root, name + ".py"), "content": source(name, directory)})
    return files
