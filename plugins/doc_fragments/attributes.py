# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # What every module of the collection shares; a module's own attribute entry (its check_mode, a diff_mode it
    # supports, a platform other than posix) wins over these.
    DOCUMENTATION = r"""
attributes:
  diff_mode:
    support: none
  platform:
    platforms: posix
  action_group:
    support: full
    membership: [llmfleet.vllm.vllm]
"""
