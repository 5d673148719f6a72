# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The network one model instance over several hosts needs (issue #30): the interface NCCL and Gloo should use,
InfiniBand / RoCE devices and GPUDirect RDMA, MTUs, and what each problem means.

Reading is split from judging: ``read_rdma_tree(root)`` and ``read_interfaces(root)`` read sysfs / /dev / /proc
under ``root`` ("/" on a host, a captured tree in the unit tests) into plain dicts of strings; every other function is
pure.  What is read, and why:

  /sys/class/infiniband/<dev>/ports/<n>/{state,phys_state,link_layer,rate}   RDMA devices and their ports
      (state "4: ACTIVE", link_layer "InfiniBand" or "Ethernet" for RoCE); NCCL's IB transport needs an ACTIVE port.
  /sys/class/infiniband/<dev>/device/net/<ifname>   the netdev behind a RoCE / IPoIB port.
  /dev/infiniband/{uverbsN,rdma_cm}   the verbs devices a container must be given (--device) for NCCL to use RDMA.
  /sys/module/nvidia_peermem, /proc/modules (nvidia_peermem, nv_peer_mem)   GPUDirect RDMA: without the peer-memory
      module NCCL stages every transfer through host memory ("NET/IB" instead of "NET/IB/GDRDMA" in its log).
  /sys/class/net/<ifname>/{mtu,operstate,type}   interfaces (type 32 = IPoIB).

Without an ACTIVE RDMA port (or without /dev/infiniband) NCCL falls back to TCP sockets ("NET/Socket"): it works, but
tensor/pipeline traffic between hosts is then limited by the socket interface.
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent import multinode

ARPHRD_INFINIBAND = "32"
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")


class NetworkFactsError(ValueError):
    """A network fact that cannot be read or used; the message names what to fix."""


# ---------------------------------------------------------------------------------------------------------------
# Reading (thin; everything below it is pure)
# ---------------------------------------------------------------------------------------------------------------

def _read(path):
    try:
        with open(path) as fh:
            return fh.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def read_rdma_tree(root="/"):
    """The RDMA-related files under ``root`` as a dict of strings (missing files are None / empty lists)."""
    ib = os.path.join(root, "sys", "class", "infiniband")
    devices = {}
    for dev in _listdir(ib):
        ports = {}
        for port in _listdir(os.path.join(ib, dev, "ports")):
            base = os.path.join(ib, dev, "ports", port)
            ports[port] = {k: _read(os.path.join(base, k)) for k in ("state", "phys_state", "link_layer", "rate")}
        devices[dev] = {"ports": ports, "netdevs": _listdir(os.path.join(ib, dev, "device", "net"))}
    return {
        "devices": devices,
        "dev_infiniband": _listdir(os.path.join(root, "dev", "infiniband")),
        "sys_modules": [m for m in PEERMEM_MODULES if os.path.isdir(os.path.join(root, "sys", "module", m))],
        "proc_modules": _read(os.path.join(root, "proc", "modules")) or "",
    }


def read_interfaces(root="/"):
    """{ifname: {mtu, operstate, type}} from /sys/class/net under ``root``."""
    net = os.path.join(root, "sys", "class", "net")
    out = {}
    for name in _listdir(net):
        d = os.path.join(net, name)
        mtu = _read(os.path.join(d, "mtu"))
        out[name] = {"mtu": int(mtu) if mtu and mtu.isdigit() else None,
                     "operstate": _read(os.path.join(d, "operstate")), "type": _read(os.path.join(d, "type"))}
    return out


# ---------------------------------------------------------------------------------------------------------------
# RDMA: devices, GPUDirect, the data path NCCL will take
# ---------------------------------------------------------------------------------------------------------------

def _state_word(state):
    """'4: ACTIVE' -> 'ACTIVE'."""
    if not state:
        return None
    return state.split(":", 1)[-1].strip().upper()


def peermem_loaded(tree):
    """The GPUDirect RDMA peer-memory module that is loaded (nvidia_peermem, or the older nv_peer_mem), or None."""
    if tree.get("sys_modules"):
        return tree["sys_modules"][0]
    for line in (tree.get("proc_modules") or "").splitlines():
        name = line.split(" ", 1)[0]
        if name in PEERMEM_MODULES:
            return name
    return None


def rdma_facts(tree):
    """What NCCL will find on this host: RDMA devices and ports, the verbs devices, GPUDirect RDMA, the data path
    (``ib_gdr``: InfiniBand/RoCE with GPUDirect RDMA, ``ib``: RDMA staged through host memory, ``socket``: TCP) and
    the warnings that go with it."""
    devices = []
    for dev, d in sorted((tree.get("devices") or {}).items()):
        ports = []
        for port, p in sorted(d.get("ports", {}).items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else 0):
            ports.append({"port": int(port) if port.isdigit() else port, "state": _state_word(p.get("state")),
                          "phys_state": _state_word(p.get("phys_state")), "link_layer": p.get("link_layer"),
                          "rate": p.get("rate")})
        devices.append({"name": dev, "ports": ports, "netdevs": list(d.get("netdevs") or [])})
    active = [(d["name"], p) for d in devices for p in d["ports"] if p["state"] == "ACTIVE"]
    verbs = [n for n in tree.get("dev_infiniband") or [] if n.startswith("uverbs")]
    rdma_cm = "rdma_cm" in (tree.get("dev_infiniband") or [])
    peermem = peermem_loaded(tree)
    warnings = []
    if not devices:
        path = "socket"
        warnings.append("no InfiniBand / RoCE device (/sys/class/infiniband is empty): NCCL between hosts will use "
                        "TCP sockets (NET/Socket); for GPU traffic across hosts install the RDMA NIC's driver "
                        "(MLNX_OFED / DOCA, rdma-core) or accept socket bandwidth")
    elif not active:
        path = "socket"
        warnings.append("InfiniBand / RoCE device%s %s but no ACTIVE port (%s): NCCL falls back to TCP sockets "
                        "(NET/Socket); check the cable and the subnet manager (ibstat, `sminfo`) or the RoCE link"
                        % ("s" if len(devices) > 1 else "", ", ".join(d["name"] for d in devices),
                           ", ".join("%s port %s %s" % (d["name"], p["port"], p["state"] or "unknown")
                                     for d in devices for p in d["ports"]) or "no ports"))
    elif not verbs:
        path = "socket"
        warnings.append("RDMA port%s active (%s) but /dev/infiniband has no uverbs device: load ib_uverbs "
                        "(modprobe ib_uverbs), else NCCL falls back to TCP sockets"
                        % ("s" if len(active) > 1 else "", ", ".join("%s/%s" % (n, p["port"]) for n, p in active)))
    elif not peermem:
        path = "ib"
        warnings.append("RDMA is usable (%s) but GPUDirect RDMA is not: the nvidia_peermem module is not loaded, so "
                        "NCCL stages every transfer through host memory (NET/IB without GDRDMA); load it "
                        "(modprobe nvidia_peermem, and add it to /etc/modules-load.d)"
                        % ", ".join("%s/%s %s" % (n, p["port"], p["link_layer"] or "") for n, p in active))
    else:
        path = "ib_gdr"
    return {
        "devices": devices, "active_ports": ["%s/%s" % (n, p["port"]) for n, p in active],
        "link_layers": sorted({p["link_layer"] for _n, p in active if p["link_layer"]}),
        "uverbs_devices": verbs, "rdma_cm": rdma_cm, "peermem_module": peermem,
        "gpudirect_rdma": path == "ib_gdr", "data_path": path, "warnings": warnings,
    }


def container_rdma_options(rdma):
    """What a vLLM container needs to use RDMA (devices, capabilities, memlock), or nothing on the socket path:
    ``{devices: [/dev/infiniband/...], cap_add: [IPC_LOCK], ulimits: [memlock:-1:-1]}``."""
    if not rdma or rdma.get("data_path") == "socket":
        return {"devices": [], "cap_add": [], "ulimits": []}
    devs = ["/dev/infiniband/%s" % n for n in rdma.get("uverbs_devices") or []]
    if rdma.get("rdma_cm"):
        devs.append("/dev/infiniband/rdma_cm")
    return {"devices": devs, "cap_add": ["IPC_LOCK"], "ulimits": ["memlock:-1:-1"]}


# ---------------------------------------------------------------------------------------------------------------
# Routes and the socket interface
# ---------------------------------------------------------------------------------------------------------------

_ROUTE_WORDS = re.compile(r"\b(dev|src|via)\s+(\S+)")


def parse_route_get(text):
    """``ip -j route get ADDR`` (JSON) or its plain-text form -> {dev, src, gateway}; NetworkFactsError when the
    output names no device (no route)."""
    text = (text or "").strip()
    route = None
    if text.startswith("["):
        try:
            data = json.loads(text)
        except ValueError:
            data = []
        if data and isinstance(data[0], dict):
            route = {"dev": data[0].get("dev"), "src": data[0].get("prefsrc") or data[0].get("src"),
                     "gateway": data[0].get("gateway")}
    else:
        words = dict(_ROUTE_WORDS.findall(text))
        if words:
            route = {"dev": words.get("dev"), "src": words.get("src"), "gateway": words.get("via")}
    if not route or not route.get("dev"):
        raise NetworkFactsError("no route: %s" % (text.splitlines()[0] if text else "ip route get printed nothing"))
    return route


def choose_socket_ifname(routes, requested="auto", interfaces=None, host="this host", var="llmfleet_nccl_socket_ifname"):
    """The interface NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME should name on one host: the one carrying the route to
    every other host of the group (``routes``: {peer: parse_route_get result}).  ``requested`` other than auto is
    checked instead.  Returns {ifname, problems, warnings}; problems name the host, the interface and the fix."""
    interfaces = interfaces or {}
    problems, warnings = [], []
    devs = {}
    for peer, r in sorted(routes.items()):
        if r.get("dev") and r["dev"] != "lo":
            devs.setdefault(r["dev"], []).append(peer)
    if requested and requested != "auto":
        names = [n.strip() for n in str(requested).lstrip("^=").split(",") if n.strip()]
        missing = [n for n in names if interfaces and n not in interfaces and not any(
            i.startswith(n) for i in interfaces)]
        if missing:
            problems.append("%s has no interface %s (%s); it has %s. Set %s to one of them, or to auto (the "
                            "interface of the route to the other hosts: %s)"
                            % (host, ", ".join(missing), var, ", ".join(sorted(interfaces)) or "none", var,
                               ", ".join(sorted(devs)) or "none found"))
        elif devs and not any(d in names or any(d.startswith(n) for n in names) for d in devs):
            warnings.append("%s: %s is %s, but the routes to the other hosts leave through %s: NCCL's bootstrap "
                            "may not reach them over %s" % (host, var, requested, ", ".join(sorted(devs)), requested))
        return {"ifname": str(requested), "problems": problems, "warnings": warnings}
    if not devs:
        return {"ifname": None, "problems": problems, "warnings": warnings}
    if len(devs) > 1:
        problems.append("%s reaches the other hosts of the group through different interfaces (%s): NCCL needs "
                        "one; give the hosts one network for the group, or set %s (e.g. %s) to the interface "
                        "every host reaches the others through"
                        % (host, "; ".join("%s via %s" % (", ".join(p), d) for d, p in sorted(devs.items())), var,
                           sorted(devs)[0]))
        return {"ifname": None, "problems": problems, "warnings": warnings}
    ifname = next(iter(devs))
    state = (interfaces.get(ifname) or {}).get("operstate")
    if state and state.lower() not in ("up", "unknown"):
        problems.append("%s: interface %s (the route to the other hosts) is %s; bring it up (ip link set %s up) "
                        "or set %s to another interface" % (host, ifname, state, ifname, var))
    return {"ifname": ifname, "problems": problems, "warnings": warnings}


def mtu_problems(host_mtus):
    """MTU mismatches between the hosts of a group: ``host_mtus`` {host: {ifname, mtu}}.  Jumbo frames on one host
    and 1500 on another make large NCCL socket transfers stall (black-holed fragments), so each mismatch is named
    with both sides and the fix."""
    known = {h: v for h, v in host_mtus.items() if v and v.get("mtu")}
    values = {}
    for h, v in sorted(known.items()):
        values.setdefault(int(v["mtu"]), []).append("%s (%s)" % (h, v.get("ifname")))
    if len(values) < 2:
        return []
    largest = max(values)
    return ["MTU mismatch in the group: %s; set the same MTU on every host's interface (e.g. ip link set <ifname> "
            "mtu %d, and in the netplan / NetworkManager profile), and on the switch ports between them"
            % ("; ".join("%s MTU %d" % (", ".join(hs), m) for m, hs in sorted(values.items())), largest)]


def group_rdma_problems(host_rdma):
    """Hosts of one group that would take different data paths (one RDMA, one sockets): NCCL then uses sockets for
    the whole group.  ``host_rdma`` {host: rdma_facts}."""
    paths = {}
    for h, r in sorted(host_rdma.items()):
        paths.setdefault((r or {}).get("data_path", "socket"), []).append(h)
    if len(paths) < 2:
        return []
    return ["the hosts of the group do not share a data path (%s): NCCL uses TCP sockets between them all; give "
            "every host a working RDMA port (and nvidia_peermem) or accept socket bandwidth"
            % "; ".join("%s: %s" % (p, ", ".join(hs)) for p, hs in sorted(paths.items()))]


# ---------------------------------------------------------------------------------------------------------------
# The group: which ports each host must reach, and the problems only the whole group shows
# ---------------------------------------------------------------------------------------------------------------

def group_port_targets(hosts, me, addresses, leader_ports, probe_port=None):
    """What host ``me`` must reach in its group (``hosts`` in rank order, the first leads): every port of
    ``leader_ports`` (the master port the other ranks rendezvous on) on the leader, and ``probe_port`` on every
    other host (NCCL and vLLM's message queues open further TCP connections between all the hosts: one port
    tested both ways stands for the firewall letting the group's hosts talk).  ``addresses`` {host: address}."""
    hosts = [str(h) for h in hosts or []]
    me = str(me)
    if me not in hosts or len(hosts) < 2:
        return []
    leader = hosts[0]
    out = []
    if me != leader:
        for port in leader_ports or []:
            out.append({"host": leader, "address": str(addresses.get(leader) or leader), "port": int(port),
                        "kind": "master"})
    if probe_port:
        for h in hosts:
            if h != me:
                out.append({"host": h, "address": str(addresses.get(h) or h), "port": int(probe_port),
                            "kind": "probe"})
    return out


def listen_ports(hosts, me, leader_ports, probe_port=None):
    """The ports host ``me`` listens on during the reachability test, with the connections it should expect."""
    hosts = [str(h) for h in hosts or []]
    me = str(me)
    if me not in hosts or len(hosts) < 2:
        return []
    out = []
    if me == hosts[0]:
        out.extend({"port": int(p), "expect": len(hosts) - 1} for p in leader_ports or [])
    if probe_port:
        out.append({"port": int(probe_port), "expect": len(hosts) - 1})
    return out


def unreachable_message(me, target, failure, port_var="vllm_server_multinode_master_port",
                        probe_var="preflight_group_probe_port"):
    """One line for a port ``me`` could not reach: the host, the port, what it is for and the fix."""
    what = ("the master port vLLM's ranks rendezvous on (%s)" % port_var if target["kind"] == "master"
            else "the probe port standing for the TCP connections NCCL opens between the hosts (%s)" % probe_var)
    why = str(failure or "")
    if "refused" in why.lower():
        cause = "the connection was refused (a firewall rejects it, or something else answers there)"
    elif "timeout" in why.lower() or "timed out" in why.lower():
        cause = "no answer within the timeout (a firewall drops it, or the address is not the one %s listens on)" \
                % target["host"]
    else:
        cause = why or "it could not be reached"
    return ("%s cannot reach %s:%d on %s (%s): %s. Open TCP %d from %s to %s (e.g. `ufw allow from <%s's address> "
            "to any port %d proto tcp`, or `firewall-cmd --add-rich-rule` / a security-group rule), or give the "
            "group a network where its hosts reach each other on all TCP ports."
            % (me, target["address"], target["port"], target["host"], what, cause, target["port"], me,
               target["host"], me, target["port"]))


def group_network_problems(facts_by_host):
    """What only the whole group shows, from every host's network_facts ({host: network_facts}): ``problems``, the
    MTU mismatches on the interfaces the group's traffic takes; ``warnings``, hosts that would use different data
    paths (RDMA on one, TCP sockets on another: NCCL then uses sockets between them all)."""
    mtus = {h: {"ifname": f.get("nccl_socket_ifname"), "mtu": f.get("mtu")}
            for h, f in (facts_by_host or {}).items() if f}
    rdma = {h: f.get("rdma") for h, f in (facts_by_host or {}).items() if f}
    return {"problems": mtu_problems(mtus), "warnings": group_rdma_problems(rdma)}


def group_addresses(hosts, hostvars):
    """{host: the address the other hosts reach it at}: the one the group's ranks use (vllm_server_multinode_address,
    else the address of its default route from gathered facts, else an IP ansible_host: multinode.group_addresses),
    else its ansible_host, else its inventory name. The ranks connect to those addresses, so preflight checks the
    same ones (a name only the controller resolves, e.g. a container's, would fail here and not there)."""
    ranks = multinode.group_addresses(list(hosts or []), hostvars)
    out = {}
    for h in hosts or []:
        hv = hostvars[h] if h in hostvars else {}
        addr = ranks.get(str(h)) or (hv.get("ansible_host") if hasattr(hv, "get") else None)
        out[str(h)] = str(addr or h)
    return out
