# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: host_package
author:
  - llmfleet maintainers (!UNKNOWN)
version_added: "1.0.0"
short_description: The files of the host package (llmfleet_host) that the serving host runs on its own
description:
  - Returns the files of the self-contained Python package C(llmfleet_host) under a directory of the managed
    host, as the O(llmfleet.vllm.config_files#module:files) list of M(llmfleet.vllm.config_files) takes them.
  - The package holds the hang watchdog, the replica start gate (C(wait-healthy)), the container follower
    (C(follow-container)) and the diagnosis they use. Its modules are the collection's own module_utils files
    (the subpackage plugins/module_utils/host_agent, shipped whole), read on the controller; they import only each other and
    the standard library, so the host needs neither Ansible nor the collection.
  - The package directory itself (C(<dir>/llmfleet_host)) must exist or be in the module's O(llmfleet.vllm.config_files#module:directories).
options:
  _terms:
    description: The directory on the managed host that receives C(llmfleet_host/) (one path).
    required: true
    type: list
    elements: path
"""

EXAMPLES = r"""
- name: Install the host package under /usr/local/libexec/llmfleet
  llmfleet.vllm.config_files:
    directories:
      - path: /usr/local/libexec/llmfleet/llmfleet_host
    files: "{{ query('llmfleet.vllm.host_package', '/usr/local/libexec/llmfleet') }}"
"""

RETURN = r"""
_raw:
  description: One entry per file of the package.
  type: list
  elements: dict
  contains:
    path:
      description: Where the file goes on the managed host (C(<dir>/llmfleet_host/<module>.py)).
      type: path
    content:
      description: The file's text.
      type: str
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.host_package import package_files


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        if len(terms) != 1 or not str(terms[0]).startswith("/"):
            raise AnsibleLookupError("host_package takes one absolute directory on the managed host, got %r"
                                     % (terms,))
        return package_files(str(terms[0]).rstrip("/") or "/")
