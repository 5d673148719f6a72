#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
---
module: network_facts
short_description: Read what a multi-host vLLM group needs from this host's network (read-only)
version_added: "1.0.0"
description:
  - For one model served over several hosts (an inventory group, C(llmfleet_model_group)), reads the route from
    this host to each other host of the group (C(ip -j route get)), the interface that carries it and its MTU, and
    the InfiniBand / RoCE devices, verbs devices and GPUDirect RDMA module NCCL would use.
  - Chooses the interface NCCL and Gloo should bind (C(NCCL_SOCKET_IFNAME), C(GLOO_SOCKET_IFNAME)) - the one the
    routes to the other hosts leave through - or checks the one given.
  - Reports problems and warnings (each naming this host, the interface and the fix) and changes nothing; the
    preflight role fails on problems, compares MTUs across the group and tests the ports between the hosts.
options:
  peers:
    description: Addresses or names of the other hosts of the group (as the serve side will reach them).
    type: list
    elements: str
    default: []
  nccl_socket_ifname:
    description:
      - C(auto) chooses the interface of the route to the peers; any other value (an interface name, or NCCL's
        comma-separated list / prefix syntax) is checked against this host's interfaces instead.
    type: str
    default: auto
  ifname_var:
    description: The variable a user sets to choose the interface, named in the messages.
    type: str
    default: llmfleet_nccl_socket_ifname
  check_rdma:
    description: Warn when NCCL would use TCP sockets (no usable RDMA port, no GPUDirect RDMA); false for the CPU engine.
    type: bool
    default: true
author:
  - llmfleet maintainers (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.vllm.attributes
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  check_mode:
    support: full
    details: It only reads.
"""

EXAMPLES = r"""
- name: Read the group's network from this host
  llmfleet.vllm.network_facts:
    peers: "{{ groups['llama405b'] | difference([inventory_hostname]) | map('extract', hostvars, 'ansible_host') | list }}"
  register: net

- name: Show the interface NCCL will use
  ansible.builtin.debug:
    msg: "NCCL_SOCKET_IFNAME={{ net.network_facts.nccl_socket_ifname }} ({{ net.network_facts.rdma.data_path }})"
"""

RETURN = r"""
network_facts:
  description: The network facts of this host for its group.
  returned: always
  type: dict
  contains:
    routes:
      description: Per peer, the route to it (dev, src, gateway) or an error.
      type: dict
    nccl_socket_ifname:
      description: The interface for NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME (null when none could be chosen).
      type: str
    address:
      description: This host's source address towards the peers (the address the others reach it at).
      type: str
    mtu:
      description: MTU of the chosen interface (null when unknown).
      type: int
    interfaces:
      description: This host's interfaces (mtu, operstate, type) from /sys/class/net.
      type: dict
    rdma:
      description: >-
        InfiniBand / RoCE devices and ports, uverbs devices, rdma_cm, the peer-memory module, gpudirect_rdma and
        data_path (ib_gdr, ib or socket), with warnings (see llmfleet.vllm.gpu_facts).
      type: dict
    container_rdma:
      description: What a container needs for RDMA (devices, cap_add, ulimits); empty lists on the socket path.
      type: dict
    problems:
      description: What stops the group from working, each naming the host, the interface and the fix.
      type: list
      elements: str
    warnings:
      description: What makes it slower than it could be (sockets instead of RDMA, no GPUDirect RDMA).
      type: list
      elements: str
"""

import socket

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.network_facts import (
    NetworkFactsError, choose_socket_ifname, container_rdma_options, parse_route_get, rdma_facts, read_interfaces,
    read_rdma_tree)


def _resolve(name):
    try:
        return socket.getaddrinfo(name, None, socket.AF_UNSPEC, socket.SOCK_STREAM)[0][4][0]
    except (socket.gaierror, IndexError, UnicodeError):
        return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            peers=dict(type="list", elements="str", default=[]),
            nccl_socket_ifname=dict(type="str", default="auto"),
            ifname_var=dict(type="str", default="llmfleet_nccl_socket_ifname"),
            check_rdma=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    host = socket.gethostname()
    problems, routes = [], {}
    ip_bin = module.get_bin_path("ip")
    for peer in p["peers"]:
        addr = _resolve(peer)
        if addr is None:
            problems.append("%s cannot resolve %s (a host of its group): add it to DNS or /etc/hosts, or set "
                            "ansible_host to its address" % (host, peer))
            continue
        if ip_bin is None:
            problems.append("%s has no ip command (iproute2): install it so the route to %s can be read" % (host, peer))
            break
        rc, out, err = module.run_command([ip_bin, "-j", "route", "get", addr], environ_update={"LC_ALL": "C"})
        if rc != 0 and not out.strip():
            rc, out, err = module.run_command([ip_bin, "route", "get", addr], environ_update={"LC_ALL": "C"})
        try:
            routes[peer] = parse_route_get(out if rc == 0 else err)
            routes[peer]["address"] = addr
        except NetworkFactsError as e:
            problems.append("%s has no route to %s (%s, a host of its group): %s; fix the routing or the address "
                            "the inventory gives" % (host, peer, addr, e))
    interfaces = read_interfaces("/")
    choice = choose_socket_ifname(routes, p["nccl_socket_ifname"], interfaces, host, p["ifname_var"])
    problems.extend(choice["problems"])
    rdma = rdma_facts(read_rdma_tree("/"))
    ifname = choice["ifname"]
    srcs = sorted({r.get("src") for r in routes.values() if r.get("src")})
    facts = dict(
        routes=routes, nccl_socket_ifname=ifname, address=srcs[0] if len(srcs) == 1 else None,
        mtu=(interfaces.get(ifname) or {}).get("mtu") if ifname else None,
        interfaces=interfaces, rdma=rdma, container_rdma=container_rdma_options(rdma),
        problems=problems, warnings=choice["warnings"] + (["%s: %s" % (host, w) for w in rdma["warnings"]]
                                                          if p["check_rdma"] else []))
    for w in facts["warnings"]:
        module.warn(w)
    module.exit_json(changed=False, network_facts=facts)


if __name__ == "__main__":
    main()
