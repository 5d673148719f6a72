# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the planner's modules share: the error every input problem raises and the layout constants."""

from __future__ import annotations

DEFAULT_MAX_NUM_SEQS = {"throughput": 256, "latency": 64}
TP_SIZES = (1, 2, 4, 8, 16)
# Layout scoring (objective throughput): full-context sequences served, discounted for the all-reduce traffic
# of a TP group, per doubling of the TP size.  An assumption, not a measurement: NVLink TP costs some of each
# decode step; a TP group over PCIe costs a lot (a 2-GPU PCIe TP deployment of this MoE was measured slower
# than one GPU: the seed's benchmark).
TP_EFFICIENCY = {"nvlink": 0.8, "pcie": 0.5}


class PlanError(ValueError):
    """Input the planner cannot work with; the message says what to change."""


def version_at_least(have, need):
    """Whether the vLLM version ``have`` is ``need`` or later (release numbers only: "0.22.0+cu129" is 0.22.0)."""
    def release(v):
        return tuple(int(x) for x in str(v).split("+", maxsplit=1)[0].split(".")[:3] if x.isdigit())
    return release(have) >= release(need)


def gib(n):
    """Bytes as GiB with one decimal, as the plan's reasons print them."""
    return "%.1f GiB" % (n / 1024 ** 3)
