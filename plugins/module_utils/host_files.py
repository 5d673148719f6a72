# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Reading small files on the managed host, for the read-only modules (host_state, replica_state). Does I/O.

  read_text(path)   the file's text, or None when it does not exist or cannot be read as text
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def read_text(path):
    """The content of the text file at path; None when it is missing, unreadable or not text in the locale's
    encoding (a caller that wants '' for all of those writes `read_text(path) or ''`)."""
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError, UnicodeDecodeError):
        return None
