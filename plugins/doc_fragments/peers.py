# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The peer transfer options of the modules that take files from other hosts of the fleet (model_fetch,
    # model_peer_pull): one text for both. What differs between them is said in each module's description.
    DOCUMENTATION = r"""
options:
  peers:
    description:
      - Hosts of the fleet that hold the model, tried in this order. Each is a read-only rsync daemon module,
        C(rsync://address:port/module/), as the C(model_weights) role runs on them. The files still missing are pulled
        with C(rsync --partial), so a transfer cut off by a peer that dies is continued by the next peer from where it
        stopped.
    type: list
    elements: dict
    default: []
    suboptions:
      url:
        description: C(rsync://address:port/module/).
        type: str
        required: true
      host:
        description: The peer's name, for the report.
        type: str
  peer_timeout:
    description: Seconds without data after which rsync gives up on a peer and the next one is tried.
    type: int
    default: 30
  peer_bwlimit_kib:
    description: Most KiB/s one transfer from a peer may use (rsync C(--bwlimit)); 0 is no limit.
    type: int
    default: 0
"""
