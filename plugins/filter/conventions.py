# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's conventions for the roles (plugins/module_utils/host_agent/conventions.py): the accelerator a
play serves on when none is set, where a host reaches a service bound to an address, and the unit and container of
one replica (the other shared names: the llmfleet.vllm.conventions lookup)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Each filter's documentation: plugins/filter/<filter name>.yml.

from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent import conventions as CV


def accelerator(value):
    """llmfleet_accelerator as set, or the collection's default when it is not set (None)."""
    return CV.DEFAULT_ACCELERATOR if value is None else value


def reach_address(bind_address):
    """Where this host reaches a service bound to bind_address: loopback for a wildcard address, else itself."""
    return CV.reach_address(bind_address)


def replica_unit(name):
    """The systemd unit of replica name."""
    return CV.replica_unit(str(name))


def replica_container(name):
    """The container the unit of replica name runs."""
    return CV.replica_container(str(name))


class FilterModule(object):
    def filters(self):
        return {"accelerator": accelerator, "reach_address": reach_address, "replica_unit": replica_unit,
                "replica_container": replica_container}
