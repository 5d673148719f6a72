# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters over container image references; the parsing lives in plugins/module_utils/checks/image_ref.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks import image_ref


def vllm_image_ref(ref, mirror_host="", allow_unpinned=False, strict=False):
    """Describe ref (see image_ref.describe) plus an "error" key: None, or what is wrong and how to fix it.

    With strict=true a bad or unpinned reference raises instead (for use outside an assert).
    """
    try:
        result = image_ref.describe(ref, mirror_host or "", bool(allow_unpinned))
    except image_ref.ImageRefError as exc:
        if strict:
            raise AnsibleFilterError("vllm_image_ref: %s" % exc)
        return {"error": str(exc)}
    result["error"] = None
    return result


class FilterModule(object):
    def filters(self):
        return {"vllm_image_ref": vllm_image_ref}
