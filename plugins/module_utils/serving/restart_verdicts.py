# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a replica runs now versus what it should run, and who holds its port. Pure functions, no I/O.

  listening_ports(text)         TCP ports in LISTEN state in /proc/net/tcp + tcp6 text
  docker_time(text)             docker's Created timestamp (RFC 3339, nanoseconds) -> epoch seconds
  published_ports(ports)        host ports of a container's NetworkSettings.Ports (or HostConfig.PortBindings)
  port_holder(...)              None (free), 'self' (this replica's own container), another replica's container
                                name, or 'other' (a process that is not ours)
  replica_verdict(...)          does the replica need a restart, and why (whatever its unit state)
  unit_up(unit, running=False)  is a unit up and enabled, so that a re-run need not touch it

A replica's desired configuration is its files (run command, environment, systemd settings) and the unit
template; its container was created by the unit from those files. The container runs a stale configuration when
any file is newer than the container (a previous run wrote it and did not get to restart, or the restart
failed). Convergence therefore depends only on the files and the container, not on the unit's state.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import ipaddress
import re

from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent import conventions as CV

_DOCKER_TIME = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


def _proc_addr(hexaddr):
    """/proc/net/tcp{,6} address hex (32-bit words in host order, little-endian here) -> IPv4 / compressed IPv6."""
    if len(hexaddr) == 8:
        return str(ipaddress.IPv4Address(bytes.fromhex(hexaddr)[::-1]))
    raw = b"".join(bytes.fromhex(hexaddr[i:i + 8])[::-1] for i in range(0, 32, 8))
    address = ipaddress.IPv6Address(raw)
    return str(address.ipv4_mapped) if address.ipv4_mapped else address.compressed


def listening_entries(text):
    """(address, port, inode) of every socket in LISTEN state (st 0A) in /proc/net/tcp and /proc/net/tcp6 text."""
    found = set()
    for line in str(text or "").splitlines():
        cols = line.split()
        if len(cols) < 4 or ":" not in cols[1] or cols[3] != "0A":
            continue
        addr, _unused, port = cols[1].rpartition(":")
        try:
            found.add((_proc_addr(addr), int(port, 16), cols[9] if len(cols) > 9 else ""))
        except ValueError:
            continue
    return found


def listening_sockets(text):
    """(address, port) of every socket in LISTEN state (st 0A) in /proc/net/tcp and /proc/net/tcp6 text."""
    return set((addr, port) for addr, port, _unused in listening_entries(text))


def unit_of_cgroup(text, units_prefixes=(CV.EDGE_UNIT, CV.REPLICA_UNIT_PREFIX)):
    """The collection's systemd unit a process belongs to, from /proc/<pid>/cgroup text; None when not ours."""
    for line in str(text or "").splitlines():
        for part in line.rsplit(":", 1)[-1].split("/"):
            if part.startswith(tuple(units_prefixes)):
                return part
    return None


def config_bind_ports(text):
    """Ports an HAProxy configuration listens on (its `bind ADDRESS:PORT` lines), e.g. the edge's edge.cfg."""
    ports = set()
    for line in str(text or "").splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "bind" and ":" in words[1]:
            try:
                ports.add(int(words[1].rsplit(":", 1)[1]))
            except ValueError:
                continue
    return ports


def listening_ports(text):
    """Ports with a socket in LISTEN state in the text of /proc/net/tcp and /proc/net/tcp6."""
    return set(port for _unused, port in listening_sockets(text))


# Every spelling of "every address" (plugins/module_utils/host_agent/conventions.py).
WILDCARDS = CV.WILDCARD


def conflicts(bind_address, listener_address):
    """Would binding bind_address fail because listener_address holds the same port? A wildcard on either side
    conflicts with everything; otherwise only the same address."""
    return (bind_address in WILDCARDS or listener_address in WILDCARDS or bind_address == listener_address)


def docker_time(text):
    """'2026-12-01T12:34:56.123456789Z' -> epoch seconds (float); None when it is not such a time."""
    match = _DOCKER_TIME.match(str(text or "").strip())
    if not match:
        return None
    y, mo, d, h, mi, s, frac, tz = match.groups()
    if y == "0001":
        return None  # docker's zero time: never
    epoch = calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(s), 0, 0, 0))
    if frac:
        epoch += float("0." + frac[:9])
    if tz != "Z":
        sign = 1 if tz[0] == "+" else -1
        epoch -= sign * (int(tz[1:3]) * 3600 + int(tz[4:6]) * 60)
    return epoch


def published_ports(ports):
    """{"8000/tcp": [{"HostIp": "0.0.0.0", "HostPort": "8000"}], ...} -> set of host ports (ints)."""
    out = set()
    for bindings in (ports or {}).values():
        for binding in bindings or []:
            try:
                out.add(int(binding.get("HostPort")))
            except (TypeError, ValueError, AttributeError):
                continue
    return out


def port_holder(port, replica_name, listening, ours, container_prefix=CV.REPLICA_CONTAINER_PREFIX, bind_address="0.0.0.0",
                owners=None):
    """Who holds port: None, 'self', the name of another of our containers or units, or 'other'.

    listening: set of ports, or of (address, port[, inode]) sockets, in LISTEN state on the host; ours: {container
    name: set of published host ports} of this collection's running containers; bind_address: where the replica
    will bind (a listener on another specific address does not stand in its way); owners: {inode: unit} for
    listeners that belong to one of the collection's units (the edge), which are ours too."""
    port = int(port)
    for name, ports in sorted((ours or {}).items()):
        if port in ports:
            return "self" if name == container_prefix + str(replica_name) else name
    holder = None
    for item in listening or set():
        if isinstance(item, tuple):
            if item[1] != port or not conflicts(bind_address, item[0]):
                continue
            unit = (owners or {}).get(item[2]) if len(item) > 2 else None
            if unit:
                holder = holder or unit
            else:
                return "other"
        elif item == port:
            return "other"
    return holder


def replica_verdict(unit, container, config_mtime, changed=False):
    """Decide whether the replica must be (re)started now.

    unit: systemctl show properties (LoadState, ActiveState, SubState, NeedDaemonReload), {} when unknown;
    container: {exists, running, created (epoch)} of its container; config_mtime: newest mtime of its files
    (None when none exist yet); changed: its files were rewritten in this run.
    Returns {action: 'restarted' | 'started', reasons: [...], stale: bool}. 'restarted' on a unit that is not
    running starts it once; 'started' leaves a running (or starting) replica alone.
    """
    unit = unit or {}
    container = container or {}
    reasons = []
    active = unit.get("ActiveState", "")
    sub = unit.get("SubState", "")
    stale = False
    if changed:
        reasons.append("its configuration changed in this run")
    created = container.get("created")
    if container.get("exists") and created is not None and config_mtime is not None and created < config_mtime:
        stale = True
        reasons.append("its container is older than its configuration files (a previous run changed them and "
                       "did not restart it)")
    if unit.get("NeedDaemonReload") == "yes":
        reasons.append("systemd has not loaded the unit file written last")
    deployed = active not in ("", "inactive") or container.get("exists")
    if deployed:
        if active == "failed":
            reasons.append("its unit failed")
        elif sub == "auto-restart":
            reasons.append("its unit is waiting to restart after a failure (auto-restart)")
        elif active in ("active", "activating", "reloading") and container.get("exists") is False:
            reasons.append("its unit is %s/%s but its container does not exist" % (active, sub))
        elif active in ("active", "activating", "reloading") and container.get("exists") \
                and not container.get("running"):
            reasons.append("its unit is %s/%s but its container is not running" % (active, sub))
    return {"action": "restarted" if reasons else "started", "reasons": reasons, "stale": stale}


def unit_up(unit, running=False):
    """Is a unit up and enabled at boot (systemctl show properties), so that a re-run has nothing to start?

    running: also require SubState running. A replica's service must be running (a unit still activating has not
    passed its health gate, one in auto-restart is between crashes); a timer is up while it is active/waiting.
    Whether systemd still has to load a newer unit file (NeedDaemonReload) is the caller's to add: it restarts.
    """
    unit = unit or {}
    if unit.get("ActiveState") != "active" or unit.get("UnitFileState") != "enabled":
        return False
    return unit.get("SubState") == "running" if running else True


def replica_actions(states, names, written, config_dir, unit_file):
    """What the serve role does with each replica in this run, from what replica_state read before any file was
    written (states: its `replicas`, each with name, action, up, unit, health) and the files written since
    (written: the paths whose content changed).

    names: the replicas to serve, in order; config_dir: where each replica's vllm-<name>.{env,unit.conf,run} live;
    unit_file: the replica unit template. Returns, names as strings in the order of names:
      restart     a replica replica_state says must restart, or whose files (or the unit template) changed now;
      start       a replica whose unit is not up (not running, or not enabled);
      background  of those, a replica with nothing running (no unit yet, stopped or failed): it starts in the
                  background, as there is no serving replica to keep;
      foreground  the other replicas to restart or start, one at a time, so the others keep serving;
      daemon_reload  the unit template changed now, or systemd has not loaded the one written last;
      gate        anything to start or restart, or a replica that did not answer /health with 200 when read.
    """
    by_name = dict((str(state.get("name")), state) for state in states or [])
    written = set(written or [])
    unit_changed = unit_file in written
    names = [str(name) for name in names]
    restart, start, background = [], [], []
    for name in names:
        state = by_name.get(name, {})
        own = set("%s/vllm-%s.%s" % (config_dir, name, ext) for ext in ("env", "unit.conf", "run"))
        if state.get("action") == "restarted" or unit_changed or own & written:
            restart.append(name)
        if not state.get("up"):
            start.append(name)
            if (state.get("unit") or {}).get("ActiveState", "") in ("", "inactive", "failed"):
                background.append(name)
    foreground = [name for name in names if (name in restart or name in start) and name not in background]
    daemon_reload = unit_changed or any((by_name.get(name, {}).get("unit") or {}).get("NeedDaemonReload") == "yes"
                                        for name in names)
    gate = bool(restart or start) or any(by_name.get(name, {}).get("health") != 200 for name in names)
    return {"restart": restart, "start": start, "background": background, "foreground": foreground,
            "daemon_reload": daemon_reload, "gate": gate}
