# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A replica's environment file, as the host tools read it (host package: host_package.py). Does I/O.

  api_key(env_file)   VLLM_API_KEY from the replica's root-only environment file (shell-quoted values), or ""
                      when the file or the variable is absent: the only copy of the secret on the host.
  http_open(request, timeout)   an HTTP request to a replica's loopback port through urllib's default opener.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import shlex
import urllib.request


def api_key(env_file):
    """VLLM_API_KEY from the replica's environment file, or "" (no file, no key, or no env_file given)."""
    if not env_file:
        return ""
    try:
        with open(env_file) as fh:
            for line in fh:
                if line.startswith("VLLM_API_KEY="):
                    return (shlex.split(line.split("=", 1)[1]) or [""])[0]
    except OSError:
        pass
    return ""


def http_open(request, timeout):
    """Send request (a URL or a urllib Request) through urllib's default opener, as the standard library's own
    one-call helper does. These tools run on the serving host outside Ansible: ansible.module_utils.urls.open_url,
    which the collection's modules use, is not installed there."""
    return urllib.request.build_opener().open(request, timeout=timeout)
