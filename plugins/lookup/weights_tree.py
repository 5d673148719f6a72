# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: weights_tree
author:
  - llmfleet maintainers (!UNKNOWN)
version_added: "1.1.0"
short_description: The files of several model directories on the controller, each listed on its own
description:
  - For each directory given, its regular files (hidden ones included, links and directories left out) with their
    path relative to the directory and their size, as C(community.general.filetree) lists one directory.
  - The C(model_weights) role compares them with what each host's marker recorded, for every model of
    C(llmfleet_models) uploaded from the controller at once (C(community.general.filetree) merges the files of
    several directories into one list).
  - A relative directory is taken from where ansible-playbook runs. A missing directory has no files.
options:
  _terms:
    description: The directories on the controller.
    type: list
    elements: path
    required: true
"""

EXAMPLES = r"""
- name: List two model directories on the controller
  ansible.builtin.debug:
    msg: "{{ lookup('llmfleet.vllm.weights_tree', '/data/models/chat', '/data/models/embed') }}"
"""

RETURN = r"""
_raw:
  description: One dict, {directory as given - [{path, size}, ...]}, the files sorted by path.
  type: list
  elements: dict
"""

import os

from ansible.plugins.lookup import LookupBase


def tree(directory):
    """The regular files under directory: [{path (relative), size}], sorted."""
    out = []
    for root, _dirs, files in os.walk(directory):
        for name in files:
            full = os.path.join(root, name)
            if os.path.islink(full) or not os.path.isfile(full):
                continue
            out.append({"path": os.path.relpath(full, directory), "size": os.path.getsize(full)})
    return sorted(out, key=lambda f: f["path"])


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        cwd = os.environ.get("PWD") or os.getcwd()
        return [dict((str(term), tree(os.path.join(cwd, str(term)))) for term in terms)]
