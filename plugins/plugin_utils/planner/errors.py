# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The errors the planner raises."""

from __future__ import annotations


class PlanError(ValueError):
    """Input the planner cannot work with; the message says what to change."""


class KVSpecError(ValueError):
    """A config the KV model does not understand; the message names what and the way out."""
