# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Paths on a managed host, as the roles walk them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Each filter's documentation: plugins/filter/<filter name>.yml.

import posixpath

from ansible.errors import AnsibleFilterError


def path_ancestors(path):
    """/, /srv, /srv/llmfleet, ... down to path itself (an absolute POSIX path), outermost first."""
    text = str(path or "")
    if not text.startswith("/"):
        raise AnsibleFilterError("path_ancestors expects an absolute path, got %r" % text)
    out, current = [], posixpath.normpath(text)
    while True:
        out.append(current)
        parent = posixpath.dirname(current)
        if parent == current:
            return out[::-1]
        current = parent


class FilterModule(object):
    def filters(self):
        return {"path_ancestors": path_ancestors}
