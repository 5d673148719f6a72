# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""vLLM versions: how the planner compares them (rules that change with the version live beside their subject)."""

from __future__ import annotations


def version_at_least(have, need):
    """Whether the vLLM version ``have`` is ``need`` or later (release numbers only: "0.22.0+cu129" is 0.22.0)."""
    def release(v):
        return tuple(int(x) for x in str(v).split("+", maxsplit=1)[0].split(".")[:3] if x.isdigit())
    return release(have) >= release(need)
