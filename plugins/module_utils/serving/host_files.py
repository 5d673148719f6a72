# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Reading small files on the managed host, for the read-only modules (host_state, replica_state). Does I/O.

  read_text(path)          the file's text, or None when it does not exist or cannot be read as text
  model_dir_digest(path)   the digest of what a model directory holds (serving_identity), or None
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.llmfleet.vllm.plugins.module_utils.serving.serving_identity import listing_digest, manifest_digest

# The weights role's record of a verified directory (plugins/module_utils/weights/weights.py MARKER_NAME; not imported from there,
# which would pull the hub helpers into the read-only modules).
WEIGHTS_MARKER = ".llmfleet-weights.json"


def read_text(path):
    """The content of the text file at path; None when it is missing, unreadable or not text in the locale's
    encoding (a caller that wants '' for all of those writes `read_text(path) or ''`)."""
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError, UnicodeDecodeError):
        return None


def model_dir_digest(path):
    """What the model directory at path holds: the digest of the manifest the weights role verified (its
    .llmfleet-weights.json), else of its files' names, sizes and modification times. None when it is not a
    directory or holds no file."""
    if not path or not os.path.isdir(path):
        return None
    stats = {}
    for root, _dirs, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            try:
                st = os.stat(full)
            except OSError:
                continue
            stats[os.path.relpath(full, path)] = (st.st_size, st.st_mtime_ns, st.st_ino)
    text = read_text(os.path.join(path, WEIGHTS_MARKER))
    if text:
        try:
            digest = manifest_digest(json.loads(text), dict((k, v[1:]) for k, v in stats.items()))
        except (ValueError, TypeError, AttributeError):
            digest = None
        if digest:
            return digest
    return listing_digest(dict((k, v[:2]) for k, v in stats.items()))
