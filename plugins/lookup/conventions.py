# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: conventions
author:
  - llmfleet maintainers (!UNKNOWN)
version_added: "1.1.0"
short_description: The names the collection gives its units, containers and files on a host, for roles and templates
description:
  - Returns one dict of the names that roles, templates and the host package share (module_utils/host_agent/conventions.py is
    the one place that spells them), so that no role or template spells them again.
  - For one replica's unit and container, use the filters C(llmfleet.vllm.replica_unit) and
    C(llmfleet.vllm.replica_container).
options: {}
"""

EXAMPLES = r"""
- name: Reload the edge
  ansible.builtin.systemd_service:
    name: "{{ lookup('llmfleet.vllm.conventions').edge_unit }}"
    state: reloaded
"""

RETURN = r"""
_raw:
  description: The names (one dict).
  type: list
  elements: dict
  contains:
    edge_unit:
      description: The authenticating edge's systemd unit (C(llmfleet-edge.service)).
      type: str
    watchdog_unit:
      description: The hang watchdog's service (C(llmfleet-watchdog.service)).
      type: str
    watchdog_timer:
      description: The timer that runs the hang watchdog (C(llmfleet-watchdog.timer)).
      type: str
    replica_unit_prefix:
      description: What every replica's unit name starts with (C(llmfleet-vllm@); the unit is C(<prefix><replica>.service)).
      type: str
    replica_unit_template:
      description: The template unit every replica is an instance of (C(llmfleet-vllm@.service)).
      type: str
    replica_units_glob:
      description: A glob that matches every replica's unit (for C(systemctl list-units)).
      type: str
    replica_container_prefix:
      description: What every replica's container name starts with (C(llmfleet-vllm-); the container is C(<prefix><replica>)).
      type: str
      version_added: 1.1.0
    replica_containers_regex:
      description: A regular expression that matches every replica's container name (for C(docker ps --filter name=)).
      type: str
    tls_dir:
      description: Where a host keeps its TLS files (C(/etc/llmfleet/tls)).
      type: str
      version_added: 1.1.0
    tls_ca_file:
      description: The CA certificate clients on the host verify the endpoints against (C(/etc/llmfleet/tls/ca.crt)).
      type: str
      version_added: 1.1.0
    tls_edge_pem:
      description: The certificate and key the edge presents (one PEM file, root only).
      type: str
      version_added: 1.1.0
    tls_balancer_pem:
      description: The certificate and key the fleet balancer presents (one PEM file, root only).
      type: str
      version_added: 1.1.0
    replica_port_base:
      description:
        - The first replica's port when C(vllm_server_port_base) is not set (C(8000)); the default of
          C(vllm_server_port_base), C(benchmark_base_url) and C(loadbalancer_edge_port).
      type: int
      version_added: 1.1.0
"""

from ansible.plugins.lookup import LookupBase

from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent import conventions as CV


def names():
    """The shared names, as roles read them."""
    return {
        "edge_unit": CV.EDGE_UNIT,
        "watchdog_unit": CV.WATCHDOG_UNIT,
        "watchdog_timer": CV.WATCHDOG_TIMER,
        "replica_unit_prefix": CV.REPLICA_UNIT_PREFIX,
        "replica_unit_template": CV.REPLICA_UNIT_PREFIX + ".service",
        "replica_units_glob": CV.REPLICA_UNIT_PREFIX + "*",
        "replica_container_prefix": CV.REPLICA_CONTAINER_PREFIX,
        "replica_containers_regex": "^" + CV.REPLICA_CONTAINER_PREFIX,
        "tls_dir": CV.TLS_DIR,
        "tls_ca_file": CV.TLS_CA_FILE,
        "tls_edge_pem": CV.tls_pem("edge"),
        "tls_balancer_pem": CV.tls_pem("balancer"),
        "replica_port_base": CV.REPLICA_PORT_BASE,
    }


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        return [names()]
