# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The host agent: what a serving host runs on its own (watchdog, start gate, container follower, group watch,
the diagnosis they write, and the names and tables they share with the controller). Shipped whole to the hosts
as the ``llmfleet_host`` package by the vllm_server role (plugins/plugin_utils/host_package.py); it imports only
itself and the standard library."""
