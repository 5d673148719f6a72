# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The minimum NVIDIA driver for each CUDA release: data the preflight (gpu/nvidia_driver.py) and the host's
diagnosis both quote, kept here because the host agent must stand alone."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Minimum Linux x86_64 driver for each CUDA toolkit release (the GA row of each minor release).
# Source: NVIDIA CUDA Toolkit Release Notes, "Table 3 CUDA Toolkit and Corresponding Driver Versions"
# https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html (13.2 Update 2 edition), and the
# 13.0 GA notes https://docs.nvidia.com/cuda/archive/13.0.0/cuda-toolkit-release-notes/index.html.
# Updates of a minor release (e.g. 13.0 Update 2 -> >=580.95.05) need newer drivers for the *toolkit's
# bundled* driver, but a container built on 13.0.x declares NVIDIA_REQUIRE_CUDA=cuda>=13.0, so the GA
# row is the one the container runtime enforces.
CUDA_MIN_DRIVER = {
    "13.2": "595.45.04",
    "13.1": "590.44.01",
    "13.0": "580.65.06",
    "12.9": "575.51.03",
    "12.8": "570.26",
    "12.6": "560.28.03",
    "12.5": "555.42.02",
    "12.4": "550.54.14",
    "12.3": "545.23.06",
    "12.2": "535.54.03",
    "12.1": "530.30.02",
    "12.0": "525.60.13",
    "11.8": "520.61.05",
}
