# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Byte units and the rounding the planner shares with vLLM (one definition each)."""

from __future__ import annotations

MIB = 1024 ** 2
GIB = 1024 ** 3


def cdiv(a, b):
    """Ceiling division, as vLLM's ``cdiv``."""
    return -(-a // b)


def gib(n):
    """Bytes as GiB with one decimal, as the plan's reasons print them."""
    return "%.1f GiB" % (n / GIB)
