# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One model instance over several hosts: the rank layout, each rank's vLLM flags, environment and unit.

Pure functions, no I/O. The hosts of the inventory group named by ``llmfleet_model_group`` form one
instance; the group's order is the rank order (the first host is rank 0, the leader: it serves the API
behind the edge, the others run ``--headless``). vLLM's native multiprocessing multi-node mode is used
(``--nnodes``, ``--node-rank``, ``--master-addr``, ``--master-port``, ``--distributed-executor-backend mp``),
read from vLLM 0.32.0's ``vllm serve --help=all``. Ray (``vllm_server_multinode_backend: ray``) is the alternative:
the leader's container starts a Ray head and then ``vllm serve --distributed-executor-backend ray``; every other
host's container runs a Ray worker (``ray start --block``) in the same image.

  group_layout(hosts, hostname, addresses, ...)  -> {nnodes, node_rank, leader, is_leader, master_addr, ...}
  rank_args(layout, master_port, ...)            -> vLLM flag dict for this rank (merged over the plan's)
  rank_env(layout, interface)                    -> environment for this rank's container
  rank_unit(replica_name, layout)                -> systemd unit and container names of this rank
  group_problems(...)                            -> input errors, each naming the variable and the fix
  restart_order(layout)                          -> the order a group is (re)started in: headless ranks, then the leader
  ray_commands(layout, backend, ray_port)        -> the Ray alternative: the leader's head start, a worker's argv
  ray_problems(image, probe_rc, ...)             -> why this host cannot run the Ray alternative
"""

from __future__ import annotations

import ipaddress
import re

# Flags this module owns for a multi-host instance: set in the inventory they would contradict the group.
OWNED_FLAGS = ("nnodes", "node-rank", "master-addr", "master-port", "headless",
               "distributed-executor-backend", "pipeline-parallel-size", "data-parallel-size",
               "data-parallel-address", "data-parallel-rpc-port", "data-parallel-start-rank",
               "data-parallel-size-local")

# vLLM's CPU engine skips its warm-up forward pass in eager mode (compilation mode NONE), and that pass is what
# allocates the buffers a later pipeline stage receives the previous stage's activations into (vLLM 0.32.0,
# gpu_model_runner.sync_and_gather_intermediate_tensors: "assert self.intermediate_tensors is not None" on the
# first request of rank 1). So a CPU pipeline runs with the cheapest compilation that is not NONE: Dynamo's
# stock torch.compile with the "eager" backend (no Inductor code generation).
CPU_PIPELINE_ARGS = {"enforce-eager": None, "compilation-config": {"mode": 1, "backend": "eager"}}

_IFNAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")


class MultinodeError(ValueError):
    """An input that cannot form a group; the message names the variable and the fix."""


def _norm(name):
    return str(name).replace("_", "-")


def group_layout(hosts, hostname, addresses, group_name="", leader_address=None):
    """Where ``hostname`` stands in its group.

    ``hosts``: the group's inventory hostnames in rank order. ``addresses``: {hostname: address other hosts
    reach it on}. Returns nnodes, node_rank, leader (hostname), is_leader, master_addr (the leader's address),
    host_ip (this host's), hosts.
    """
    hosts = [str(h) for h in (hosts or [])]
    if not hosts:
        raise MultinodeError("llmfleet_model_group is %r but that inventory group has no hosts. Put the hosts that "
                             "form one model instance in it (the first one leads), or unset llmfleet_model_group."
                             % (group_name,))
    if len(set(hosts)) != len(hosts):
        raise MultinodeError("inventory group %r lists a host twice: %s" % (group_name, ", ".join(hosts)))
    if hostname not in hosts:
        raise MultinodeError("%s has llmfleet_model_group=%r but is not in that inventory group (%s). Set "
                             "llmfleet_model_group only on the group's hosts." % (hostname, group_name, ", ".join(hosts)))
    addresses = addresses or {}
    missing = [h for h in hosts if not str(addresses.get(h) or "").strip()]
    if missing:
        raise MultinodeError("no address for %s in group %r: set vllm_server_multinode_address on each host (the "
                             "address the other hosts of the group reach it on)." % (", ".join(missing), group_name))
    for host in hosts:
        try:
            ipaddress.ip_address(str(addresses[host]).strip())
        except ValueError:
            raise MultinodeError("vllm_server_multinode_address of %s is %r: give an IP address (torch.distributed "
                                 "and vLLM's VLLM_HOST_IP need one), e.g. 10.0.0.11." % (host, addresses[host]))
    rank = hosts.index(hostname)
    leader = hosts[0]
    return {
        "group": group_name,
        "hosts": hosts,
        "nnodes": len(hosts),
        "node_rank": rank,
        "leader": leader,
        "is_leader": rank == 0,
        "master_addr": str(leader_address or addresses[leader]).strip(),
        "host_ip": str(addresses[hostname]).strip(),
    }


def group_addresses(hosts, hostvars):
    """{host: address} of a group from each host's variables: vllm_server_multinode_address, else the address of
    its default route (gathered facts), else ansible_host when it is an IP address; '' when none is known."""
    out = {}
    for host in hosts or []:
        hv = hostvars.get(host) or {}
        address = hv.get("vllm_server_multinode_address") or ""
        if not address:
            facts = hv.get("ansible_facts") or {}
            address = ((facts.get("default_ipv4") or {}).get("address")) or ""
        if not address:
            candidate = str(hv.get("ansible_host") or "")
            try:
                ipaddress.ip_address(candidate)
                address = candidate
            except ValueError:
                address = ""
        out[str(host)] = str(address)
    return out


def single_layout(hostname):
    """The layout of a host that is not part of a group (every other function treats it as a no-op)."""
    return {"group": "", "hosts": [hostname], "nnodes": 1, "node_rank": 0, "leader": hostname,
            "is_leader": True, "master_addr": "", "host_ip": ""}


def rank_args(layout, master_port=29500, accelerator="gpu", tensor_parallel_size=None,
              pipeline_parallel_size=None, backend="mp"):
    """vLLM flags (a dict for vllm_args_merge) for this host's rank; {} for a single host.

    Native mode: every rank runs ``vllm serve`` with the same model flags plus nnodes / node-rank /
    master-addr / master-port; the ranks other than 0 add ``--headless`` (no API server). Pipeline parallel
    is the number of hosts unless the plan says otherwise (tensor parallel stays inside a host).
    Ray (``backend='ray'``): only the leader runs vLLM (``--distributed-executor-backend ray``); the other
    hosts run a Ray worker, so their flags are {} and ``ray_worker_argv`` gives their command.
    """
    nnodes = int(layout.get("nnodes", 1))
    if nnodes <= 1:
        return {}
    pp = int(pipeline_parallel_size) if pipeline_parallel_size else nnodes
    args = {"pipeline-parallel-size": pp}
    if tensor_parallel_size:
        args["tensor-parallel-size"] = int(tensor_parallel_size)
    if backend == "ray":
        if not layout["is_leader"]:
            return {}
        args["distributed-executor-backend"] = "ray"
    elif backend == "mp":
        args.update({
            "distributed-executor-backend": "mp",
            "nnodes": nnodes,
            "node-rank": int(layout["node_rank"]),
            "master-addr": layout["master_addr"],
            "master-port": int(master_port),
        })
        if not layout["is_leader"]:
            args["headless"] = True
    else:
        raise MultinodeError("vllm_server_multinode_backend must be 'mp' (vLLM's own multi-node mode) or 'ray', got %r"
                             % (backend,))
    if accelerator == "cpu" and pp > 1:
        args.update(CPU_PIPELINE_ARGS)
    return args


def ray_worker_argv(layout, ray_port=6379):
    """The Ray alternative's ``ray start`` command of this host's rank container (checked against ``ray start --help``
    of ray 2.60.0, tests/fixtures/ray/ray-start-help.txt). The leader starts the head in its container without
    ``--block`` (Ray's processes run on beside vLLM, which the container then runs as its main process); a worker
    host's container runs ``ray start --block`` as its main process (it exits, and systemd restarts it, when its
    Ray processes end, e.g. when the head is gone)."""
    common = ["--node-ip-address", layout["host_ip"], "--disable-usage-stats"]
    if layout["is_leader"]:
        return ["ray", "start", "--head", "--port", str(int(ray_port)), "--include-dashboard", "false"] + common
    return ["ray", "start", "--block", "--address", "%s:%d" % (layout["master_addr"], int(ray_port))] + common


_SHELL_SAFE = re.compile(r"^[A-Za-z0-9_.:@/=-]+$")


def ray_commands(layout, backend="mp", ray_port=6379):
    """What this host's rank container runs with ``backend='ray'`` (all empty for ``mp`` or a single host):
    ``head``: shell text the leader's container runs before vLLM (its Ray head); ``worker``: the argv a worker host's
    container runs instead of vLLM. Every word is checked to need no shell quoting (addresses, ports, flags)."""
    out = {"head": "", "worker": []}
    if backend != "ray" or int(layout.get("nnodes", 1)) <= 1:
        return out
    try:
        port = int(str(ray_port).strip())
        if not 1 <= port <= 65535:
            raise ValueError
    except ValueError:
        raise MultinodeError("vllm_server_multinode_ray_port is %r: give the TCP port of the Ray head on the leader "
                             "(1-65535, open between the group's hosts), e.g. 6379." % (ray_port,))
    argv = ray_worker_argv(layout, port)
    unsafe = [w for w in argv if not _SHELL_SAFE.match(w)]
    if unsafe:
        host = layout["hosts"][layout["node_rank"]]
        raise MultinodeError("the Ray command of %s would carry %r: give vllm_server_multinode_address an IP address "
                             "and vllm_server_multinode_ray_port a port number." % (host, unsafe))
    if layout["is_leader"]:
        out["head"] = " ".join(argv)
    else:
        out["worker"] = argv
    return out


def ray_problems(image, probe_rc, probe_stderr="", accelerator="gpu"):
    """Why this host cannot run the Ray alternative (empty when it can): the pinned image must import ``ray`` (vLLM's
    images no longer install it; ``probe_rc`` / ``probe_stderr`` of ``python3 -c 'import ray'`` run in the image), and
    vLLM's CPU platform has no Ray device (vLLM 0.32.0, vllm/v1/executor/ray_utils.py: an empty ``ray_device_key``
    raises "current platform cpu does not support ray"). Each names vllm_server_multinode_backend and the fix."""
    problems = []
    if int(probe_rc) != 0:
        last = [line.strip() for line in str(probe_stderr or "").splitlines() if line.strip()][-1:]
        problems.append("vllm_server_multinode_backend is ray, but the pinned image %s has no Ray (python3 -c 'import "
                        "ray' in it: %s). Set vllm_server_multinode_backend: mp (vLLM's own multi-node mode, the "
                        "default; it needs nothing but vLLM), or pin an image that has Ray (vllm_image_ref; e.g. one "
                        "built FROM this image with pip install ray)." % (image, last[0] if last else "exit %s" % probe_rc))
    if accelerator == "cpu":
        problems.append("vllm_server_multinode_backend is ray, but vLLM's CPU engine has no Ray device (vLLM refuses "
                        "with 'current platform cpu does not support ray'). Set vllm_server_multinode_backend: mp for "
                        "the cpu accelerator.")
    return problems


def rank_env(layout, interface="", accelerator="gpu"):
    """Environment of this rank's container: the address vLLM advertises and the interface gloo / NCCL use.
    On the cpu accelerator the engine core runs in its own process again (the cpu profile's
    VLLM_ENABLE_V1_MULTIPROCESSING=0 is for one host; the group was proven with vLLM's default)."""
    if int(layout.get("nnodes", 1)) <= 1:
        return {}
    env = {"VLLM_HOST_IP": layout["host_ip"]}
    if accelerator == "cpu":
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1"
    if interface:
        env["GLOO_SOCKET_IFNAME"] = interface
        env["NCCL_SOCKET_IFNAME"] = interface
    return env


def plan_sizes(layout, plan):
    """(tensor_parallel_size, pipeline_parallel_size) from the plan when it was made for this many hosts
    (its ``nodes``), else (None, None): the host count is then the pipeline size."""
    plan = plan or {}
    try:
        nodes = int(plan.get("nodes") or 0)
    except (TypeError, ValueError):
        nodes = 0
    if nodes != int(layout.get("nnodes", 1)):
        return None, None
    return plan.get("tensor_parallel_size"), plan.get("pipeline_parallel_size")


def group_problems(layout, replicas, user_args=None, interface="", accelerator="gpu", master_port=29500,
                   group_var="llmfleet_model_group", plan=None, play_batch=None):
    """Every input error for a group at once (empty for a single host). ``play_batch``: the hosts of this play's
    batch (ansible_play_batch); a group must restart as a whole, so a batch that holds only part of it is refused."""
    if int(layout.get("nnodes", 1)) <= 1:
        return []
    problems = []
    if play_batch is not None:
        outside = [h for h in layout["hosts"] if h not in set(play_batch)]
        if outside:
            problems.append("the hosts of %s %r serve one model and must (re)start together, but this play's batch "
                            "leaves out %s (a play with serial, or --limit). Run playbooks/upgrade.yml (it rolls a group as "
                            "one batch) or playbooks/serve.yml --limit %s for the group (take its leader %s out of the "
                            "balancer first), or a play without serial." % (group_var, layout["group"],
                                                                            ", ".join(outside), layout["group"],
                                                                            layout["leader"]))
    # The CPU engine's plan is one host's (nodes 1): its pipeline over the group takes the host count.
    nodes = (plan or {}).get("nodes") if accelerator != "cpu" else None
    if nodes and int(nodes) != int(layout["nnodes"]):
        problems.append("llmfleet_plan was made for %s host(s) but %s %r has %d (%s). Plan with hosts: %d "
                        "(llmfleet.vllm.vllm_plan / playbooks/plan.yml), or change the group."
                        % (nodes, group_var, layout["group"], layout["nnodes"], ", ".join(layout["hosts"]),
                           layout["nnodes"]))
    if len(replicas or []) != 1:
        problems.append("%s groups hosts into one model instance, so each host runs exactly one rank; got %d replicas "
                        "(%s) on %s. Leave vllm_server_replicas to the plan (one GPU group per host), or unset %s."
                        % (group_var, len(replicas or []), ", ".join(str(r.get("name")) for r in replicas or []),
                           layout["hosts"][layout["node_rank"]], group_var))
    owned = sorted(set(_norm(k) for k in (user_args or {})) & set(OWNED_FLAGS))
    if owned:
        problems.append("vllm_server_args_extra sets %s, which the collection derives from %s (the group's hosts and "
                        "their order); remove %s from vllm_server_args_extra."
                        % (", ".join("--" + f for f in owned), group_var, "them" if len(owned) > 1 else "it"))
    if interface and not _IFNAME.match(str(interface)):
        problems.append("vllm_server_multinode_interface is %r: give a network interface name (e.g. eth0, ens5, "
                        "ib0) or leave it empty." % (interface,))
    try:
        port = int(master_port)
        if not 1 <= port <= 65535:
            raise ValueError
    except (TypeError, ValueError):
        problems.append("vllm_server_multinode_master_port is %r: give a TCP port (1-65535) that every host of the "
                        "group reaches on the leader, e.g. 29500." % (master_port,))
    return problems


# --- The group watch: one rank that dies must bring the whole group back --------------------------------------
# vLLM 0.32.0 (measured on the test bed, docs/OPERATIONS.md "More than one host"): after kill -9 of a headless
# rank the leader keeps answering /health 200 and every request hangs (its worker logs "Connection closed by
# peer"); a headless rank whose leader dies exits by itself, with status 0, about 40 s later. So the leader cannot
# be left to notice: every host of a group runs llmfleet-group-watch, which looks at the TCP connections between
# this host and the others (the ranks hold gloo / NCCL and message-queue connections to each other while the group
# is formed) and restarts its own rank when the group is broken. The ranks then form the group again: the headless
# ones wait for the leader's store, the leader's start gate passes once every rank has joined.

_TCP_ESTABLISHED = "01"


def _hex_ipv4(text):
    """'0100007F' (little-endian, /proc/net/tcp) -> '127.0.0.1'."""
    raw = bytes.fromhex(text)
    return ".".join(str(b) for b in reversed(raw))


def _hex_ipv6(text):
    raw = bytes.fromhex(text)
    # /proc/net/tcp6 prints four 32-bit words, each in host (little-endian) order.
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    addr = ipaddress.IPv6Address(words)
    return str(addr.ipv4_mapped) if addr.ipv4_mapped else str(addr)


def established_peers(proc_net_tcp, peers):
    """The addresses among ``peers`` this host has at least one ESTABLISHED TCP connection with, read from the text
    of /proc/net/tcp and /proc/net/tcp6 (concatenated)."""
    wanted = set(str(p) for p in peers or [])
    found = set()
    for line in (proc_net_tcp or "").splitlines():
        fields = line.split()
        if len(fields) < 4 or ":" not in fields[2] or fields[3] != _TCP_ESTABLISHED:
            continue
        remote = fields[2].rsplit(":", 1)[0]
        try:
            address = _hex_ipv4(remote) if len(remote) == 8 else _hex_ipv6(remote)
        except ValueError:
            continue
        if address in wanted:
            found.add(address)
    return found


def watch_verdict(config, connected, unit_active_s, leader_healthy, missing_since=None, now=0.0):
    """What llmfleet-group-watch does about this host's rank: {'action': 'ok' | 'wait' | 'restart', 'reason',
    'missing_since'}.

    ``config``: {is_leader, peers: {hostname: address} of the other hosts, master_addr, grace (s), settle (s)}.
    ``connected``: addresses with an established connection. The leader is judged only once its API is healthy
    (the group had formed): a peer without any connection for ``settle`` seconds is a dead rank. A headless rank
    is judged once it has run for ``grace`` seconds (vLLM's own start and the leader's): no connection with the
    leader for ``settle`` seconds means the leader it joined is gone.
    """
    settle = float(config.get("settle", 10))
    if config.get("is_leader"):
        if not leader_healthy:
            return {"action": "ok", "reason": "the leader is starting (its API is not healthy yet)", "missing_since": None}
        missing = sorted(h for h, a in (config.get("peers") or {}).items() if a not in connected)
        what = "no connection with the rank%s on %s" % ("s" if len(missing) > 1 else "", ", ".join(missing))
    else:
        if unit_active_s < float(config.get("grace", 300)):
            return {"action": "ok", "reason": "the rank is starting", "missing_since": None}
        missing = [] if config.get("master_addr") in connected else ["leader"]
        what = "no connection with the leader (%s)" % config.get("master_addr")
    if not missing:
        return {"action": "ok", "reason": "every rank is connected", "missing_since": None}
    since = missing_since if missing_since is not None else now
    if now - since < settle:
        return {"action": "wait", "reason": what, "missing_since": since}
    return {"action": "restart", "missing_since": None,
            "reason": "%s for %d s: the group is broken; restarting this host's rank so that the group forms again"
                      % (what, int(now - since))}
