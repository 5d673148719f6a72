#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
---
module: group_port_listen
short_description: Listen briefly on TCP ports so the other hosts of a group can test that they reach them
version_added: "1.0.0"
description:
  - Before a model group over several hosts starts, the preflight role checks that each host reaches the ports
    the others will listen on (vLLM's master port on the leader, a probe port on every host). Nothing listens
    there yet, so this module listens on each port for a short while, accepts and closes the connections, and
    returns when every port has seen its expected connections or the timeout has passed. Run it with C(async) and
    C(poll 0), then test the ports from the other hosts (M(ansible.builtin.wait_for)), then wait for it with
    M(ansible.builtin.async_status).
  - A port already held by a process (the group's own running vLLM on a re-run) is left alone and reported as
    C(held); the others then reach that process instead.
  - It leaves nothing behind; nothing is read from or written to the connections.
options:
  ports:
    description: The ports to listen on, each a dict with C(port) and C(expect) (connections to wait for).
    type: list
    elements: dict
    required: true
  address:
    description: Address to listen on.
    type: str
    default: 0.0.0.0
  timeout:
    description: Seconds to listen at most.
    type: int
    default: 30
author:
  - llmfleet maintainers (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.vllm.attributes
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  check_mode:
    support: full
    details: It only listens for a while; nothing persists.
"""

EXAMPLES = r"""
- name: Listen on the leader's master port while the other hosts test it
  llmfleet.vllm.group_port_listen:
    ports: [{port: 29500, expect: 1}]
    timeout: 30
  async: 45
  poll: 0
  register: listener
"""

RETURN = r"""
ports:
  description: Per port, whether it was bound (or already held by another process) and the connections seen.
  returned: always
  type: list
  elements: dict
  sample: [{"port": 29500, "bound": true, "held": false, "connections": 1, "peers": ["10.0.0.2"]}]
"""

import errno
import select
import socket
import time

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec=dict(
            ports=dict(type="list", elements="dict", required=True),
            address=dict(type="str", default="0.0.0.0"),
            timeout=dict(type="int", default=30),
        ),
        supports_check_mode=True,
    )
    p = module.params
    state, socks = [], {}
    for entry in p["ports"]:
        try:
            port, expect = int(entry["port"]), int(entry.get("expect", 1))
        except (KeyError, TypeError, ValueError):
            module.fail_json(msg="ports: each entry needs a numeric port (and expect), got %r" % (entry,))
        if not 1 <= port <= 65535:
            module.fail_json(msg="ports: %d is not a TCP port (1-65535)" % port)
        row = {"port": port, "expect": expect, "bound": False, "held": False, "connections": 0, "peers": []}
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((p["address"], port))
            s.listen(64)
            s.setblocking(False)
            row["bound"] = True
            socks[s] = row
        except OSError as e:
            s.close()
            if e.errno != errno.EADDRINUSE:
                module.fail_json(msg="cannot listen on %s:%d: %s" % (p["address"], port, e))
            row["held"] = True
        state.append(row)
    deadline = time.time() + max(1, p["timeout"])
    try:
        while socks and time.time() < deadline:
            if all(r["connections"] >= r["expect"] for r in socks.values()):
                break
            ready, _w, _x = select.select(list(socks), [], [], min(1.0, max(0.0, deadline - time.time())))
            for s in ready:
                try:
                    conn, peer = s.accept()
                except OSError:
                    continue
                conn.close()
                socks[s]["connections"] += 1
                if peer[0] not in socks[s]["peers"]:
                    socks[s]["peers"].append(peer[0])
    finally:
        for s in socks:
            s.close()
    module.exit_json(changed=False, ports=state)


if __name__ == "__main__":
    main()
