#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: replica_state
short_description: Read what each vLLM replica runs now, whether it must be restarted, and who holds its port
description:
  - Read-only. For each replica reads its unit (C(systemctl show)), its container (C(docker inspect)), the
    modification times of its configuration files and the TCP ports in LISTEN state (C(/proc/net/tcp), C(tcp6)).
  - A replica needs a restart when its container is older than its configuration files, its unit failed or waits
    in auto-restart, or its unit is up without a running container; O(changed) adds replicas whose files the
    caller rewrote. The decision does not depend on the unit being C(running).
  - For each replica's desired ports says who holds them now - nobody, its own container, another replica's
    container, one of the collection's units (the edge), or another process - so a port change is refused before
    anything is stopped. With O(edge), a replica has two ports - the edge's (its port, on O(edge_bind_address)) and
    vLLM's own behind it (its port + O(port_offset), on O(bind_address)).
  - With O(model_dir), also lists what that directory lacks for vLLM (config.json, tokenizer files, shards).
  - With O(health_base), asks each replica whose container runs for C(/health) once (no retries), so that a caller
    need not wait again for a replica it leaves alone.
  - Hosts without systemd units or Docker yet (a fresh host in preflight) report no unit and no container.
version_added: "1.0.0"
options:
  replicas:
    description: The replicas as the serve role renders them, each with C(name) and C(port).
    type: list
    elements: dict
    required: true
  changed:
    description: Names of replicas whose configuration files the caller rewrote in this run.
    type: list
    elements: str
    default: []
  config_dir:
    description: Where the per-replica files live (C(vllm-<name>.run), C(.env), C(.unit.conf)).
    type: path
    default: /etc/llmfleet
  unit_file:
    description: The replica unit template; a newer one marks every replica stale.
    type: path
    default: /etc/systemd/system/llmfleet-vllm@.service
  unit_prefix:
    description: Unit instance prefix.
    type: str
    default: llmfleet-vllm@
  container_prefix:
    description: Container name prefix.
    type: str
    default: llmfleet-vllm-
  docker_bin:
    description: The docker CLI (a host without it reports no containers).
    type: str
    default: docker
  bind_address:
    description: The address the replicas' containers publish on (a listener on another specific address is no conflict).
    type: str
    default: 0.0.0.0
  port_offset:
    description: The container's host port is the replica's port plus this (the edge holds the replica's port).
    type: int
    default: 0
  edge:
    description: An edge (the unit O(edge_unit)) listens on each replica's port in front of the container.
    type: bool
    default: false
  edge_bind_address:
    description: The address the edge listens on.
    type: str
    default: 0.0.0.0
  edge_config:
    description:
      - The edge's HAProxy configuration. While O(edge_unit) runs, the ports it binds are the edge's own
        (used where the socket's process cannot be read from C(/proc)).
    type: path
    default: /etc/llmfleet/edge.cfg
  edge_unit:
    description:
      - The edge's systemd unit (the C(vllm_server) role passes C(llmfleet-edge.service)). A port held by a process
        of this unit (with or without O(edge), so one left from an earlier deployment too), or bound in O(edge_config)
        while it runs and O(edge) is set, is the edge's. Empty - no edge unit is looked at.
    type: str
    default: ""
  model_dir:
    description: A model directory on the host to check for completeness (config, tokenizer files, every shard).
    type: path
  model_dirs:
    description:
      - More model directories (the other models of a host that serves several), each checked like O(model_dir);
        the digest of what each holds is in RV(model_manifests).
    type: list
    elements: path
    default: []
    version_added: 1.1.0
  check_tokenizer:
    description: Require tokenizer files in O(model_dir) (off when C(--tokenizer) points elsewhere).
    type: bool
    default: true
  units:
    description: Other systemd units whose state to report (RV(units)), for example the edge's and the watchdog's.
    type: list
    elements: str
    default: []
  health_base:
    description:
      - Where this host reaches each replica's vLLM, up to the port (for example C(http://127.0.0.1:)); its
        C(/health) is at this, the replica's container port and C(/health). Empty - do not ask.
    type: str
    default: ""
  health_timeout:
    description: Seconds to wait for each C(/health) answer.
    type: int
    default: 3
  read_files:
    description:
      - Small state files to return the content of (RV(files)).
      - It exists so that the C(vllm_server) role reads its engine-cache record (C(.llmfleet-images) in the engine
        cache directory) in the call it already makes, not in one more remote call. To read files in general, use
        M(llmfleet.vllm.host_state) (its O(llmfleet.vllm.host_state#module:files) option).
    type: list
    elements: path
    default: []
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
- name: Read the replicas' state before changing anything
  llmfleet.vllm.replica_state:
    replicas: [{name: "0", port: 8000}]
  register: state
"""

RETURN = r"""
replicas:
  description: One entry per replica, in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: Replica name., type: str}
    port: {description: Desired port., type: int}
    unit:
      description: "LoadState, ActiveState, SubState, UnitFileState, NeedDaemonReload of its unit ({} without systemd)."
      type: dict
    up: {description: "Its unit is active, running and enabled (see the C(llmfleet.vllm.unit_up) filter).", type: bool}
    health:
      description: The HTTP status of its C(/health) (null when not asked, its container is not running, or no answer).
      type: int
    container:
      description:
        - "exists, running, created (epoch), ports (published host ports), model_manifest (the manifest digest its
          C(llmfleet.vllm.model-manifest) label says it serves; null for a container started without one)."
      type: dict
    config_mtime: {description: Newest modification time of its files and the unit template (null when none)., type: float}
    action: {description: "C(restarted) when it must be restarted now, else C(started).", type: str}
    reasons: {description: Why it must be restarted (empty when not)., type: list, elements: str}
    port_holder:
      description:
        - C(other) when another process holds one of its ports.
        - Else who holds the container port, null (free), self, or another container's name.
      type: str
    container_port: {description: The container's host port (port + port_offset)., type: int}
    ports: {description: "Each port checked: port, address, role (container or edge), holder.", type: list, elements: dict}
units:
  description: For each unit of O(units), the same properties as RV(replicas[].unit) ({} without systemd).
  returned: always
  type: dict
  sample: {llmfleet-edge.service: {ActiveState: active, SubState: running, UnitFileState: enabled}}
files:
  description: The content of each file of O(read_files) (null when it does not exist or cannot be read).
  returned: always
  type: dict
restart:
  description: Names of the replicas whose action is C(restarted).
  returned: always
  type: list
  elements: str
listening_ports:
  description: TCP ports in LISTEN state on the host.
  returned: always
  type: list
  elements: int
model_problems:
  description: What O(model_dir) lacks (empty when complete or not asked).
  returned: always
  type: list
  elements: str
model_manifest:
  description:
    - What O(model_dir) holds - the digest of the manifest the weights role verified (names, sizes, sha256), else of
      its files' names, sizes and modification times; null without O(model_dir) or when it holds no file.
    - The serve role writes it into each replica's run command (a container label), so new weights in the same
      directory restart the replicas.
  returned: always
  type: str
  sample: "sha256:9b1d..."
model_manifests:
  description: "What each directory of O(model_dirs) holds, C({directory: digest}) (as RV(model_manifest))."
  returned: always
  type: dict
  version_added: 1.1.0
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six.moves.http_client import HTTPException
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.urls import open_url

from ansible_collections.llmfleet.vllm.plugins.module_utils.serving.restart_verdicts import (
    config_bind_ports,
    docker_time,
    listening_entries,
    port_holder,
    published_ports,
    replica_verdict,
    unit_of_cgroup,
    unit_up,
)
from ansible_collections.llmfleet.vllm.plugins.module_utils.serving.host_files import model_dir_digest, read_text
from ansible_collections.llmfleet.vllm.plugins.module_utils.serving.host_state import UNIT_PROPERTIES, unit_properties
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.input_checks import model_dir_problems
from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent.conventions import MANIFEST_LABEL

INSPECT_FORMAT = ("{{json .Name}}\t{{json .Created}}\t{{json .State.Running}}\t{{json .NetworkSettings.Ports}}"
                  "\t{{json .Config.Labels}}\t{{json .HostConfig.NetworkMode}}")


def _mtime(path):
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def _unit_active(module, unit):
    systemctl = module.get_bin_path("systemctl")
    if not systemctl:
        return False
    rc, out, _err = module.run_command([systemctl, "is-active", unit])
    return rc == 0 and out.strip() == "active"


def _socket_owners(inodes, units_prefixes):
    """{inode: unit} for listening sockets held by a process of one of the units named or prefixed by
    units_prefixes (read from /proc)."""
    owners, wanted = {}, set(i for i in inodes if i and i != "0")
    if not wanted:
        return owners
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        fd_dir = os.path.join("/proc", pid, "fd")
        try:
            links = [os.readlink(os.path.join(fd_dir, fd)) for fd in os.listdir(fd_dir)]
        except OSError:
            continue
        held = set(link[8:-1] for link in links if link.startswith("socket:[")) & wanted
        if not held:
            continue
        unit = unit_of_cgroup(read_text(os.path.join("/proc", pid, "cgroup")) or "", units_prefixes)
        if unit:
            for inode in held:
                owners[inode] = unit
    return owners


def _health(url, timeout):
    """The HTTP status GET url answers with, or None when nothing answers in time."""
    try:
        return open_url(url, method="GET", timeout=timeout, use_proxy=False).getcode()
    except HTTPError as exc:
        # What the replica answered all the same (e.g. 503 while its engine is down).
        return exc.code
    except (URLError, OSError, ValueError, HTTPException):
        return None


def _list_dir(path):
    names = []
    for root, dirs, files in os.walk(path):
        for name in files:
            names.append(os.path.relpath(os.path.join(root, name), path))
    return names


def _unit_show(module, systemctl, unit):
    if not systemctl:
        return {}
    rc, out, _err = module.run_command([systemctl, "show", unit, "--property=" + UNIT_PROPERTIES])
    return unit_properties(out) if rc == 0 else {}


def _listening_owners(module, p):
    """(listening entries, {inode: unit}): the host's listening sockets and which of our units hold them."""
    listening = listening_entries((read_text("/proc/net/tcp") or "") + "\n" + (read_text("/proc/net/tcp6") or ""))
    prefixes = tuple(x for x in (p["edge_unit"], p["unit_prefix"]) if x)
    owners = _socket_owners([inode for _unused, _unused, inode in listening], prefixes)
    # Where /proc/<pid>/fd of the edge's worker cannot be read (it drops to user haproxy and turns undumpable;
    # without CAP_SYS_PTRACE, e.g. in a container, root cannot look), the edge's own configuration says which
    # ports are its own while its unit runs.
    if p["edge"] and p["edge_unit"] and _unit_active(module, p["edge_unit"]):
        edge_ports = config_bind_ports(read_text(p["edge_config"]) or "")
        for _unused, port, inode in listening:
            if port in edge_ports and inode not in owners:
                owners[inode] = p["edge_unit"]
    return listening, owners


def _containers(module, p):
    """{name: {exists, running, created, ports, model_manifest, host_network}} of the containers named
    container_prefix*."""
    containers = {}
    docker = module.get_bin_path(p["docker_bin"])
    if not docker:
        return containers
    rc, out, err = module.run_command([docker, "ps", "--all", "--no-trunc", "--filter",
                                       "name=^" + p["container_prefix"], "--format", "{{.Names}}"])
    names = [n.strip() for n in out.splitlines() if n.strip().startswith(p["container_prefix"])] if rc == 0 else []
    if not names:
        return containers
    rc, out, err = module.run_command([docker, "inspect", "--format", INSPECT_FORMAT] + names)
    for line in out.splitlines():
        cols = line.split("\t")
        if len(cols) != 6:
            continue
        try:
            name, created, running, ports, labels, network_mode = [json.loads(c) for c in cols]
        except ValueError:
            continue
        name = name.lstrip("/")
        containers[name] = {"exists": True, "running": bool(running), "created": docker_time(created),
                            "ports": sorted(published_ports(ports)) if running else [],
                            "model_manifest": (labels or {}).get(MANIFEST_LABEL),
                            "host_network": network_mode == "host"}
    _host_network_ports(containers, p)
    return containers


def _host_network_ports(containers, p):
    """A rank of a model served over several hosts runs on the host's network (no published port): the port its
    vLLM listens on is its own."""
    for replica in p["replicas"]:
        held = containers.get(p["container_prefix"] + str(replica.get("name")))
        if held and held["running"] and held.get("host_network"):
            try:
                held["ports"] = sorted(set(held["ports"]) | {int(replica.get("port")) + p["port_offset"]})
            except (TypeError, ValueError):
                pass


def _replica(module, p, replica, seen):
    """The state of one replica: unit, container, config age, verdict, the holders of its ports, health.
    seen: {systemctl, containers, ours, listening, owners, template_mtime} read once for all replicas."""
    name = str(replica.get("name"))
    try:
        port = int(replica.get("port"))
    except (TypeError, ValueError):
        module.fail_json(msg="replica %s has no valid port: %r" % (name, replica.get("port")))
    unit = _unit_show(module, seen["systemctl"], p["unit_prefix"] + name + ".service")
    container = seen["containers"].get(p["container_prefix"] + name, {"exists": False, "running": False,
                                                                      "created": None, "ports": []})
    times = [t for t in [_mtime(os.path.join(p["config_dir"], "vllm-%s.%s" % (name, ext)))
                         for ext in ("run", "env", "unit.conf")] + [seen["template_mtime"]] if t is not None]
    config_mtime = max(times) if times else None
    verdict = replica_verdict(unit, container, config_mtime, changed=name in p["changed"])
    container_port = port + p["port_offset"]
    wanted = [(container_port, p["bind_address"], "container")] + ([(port, p["edge_bind_address"], "edge")]
                                                                   if p["edge"] else [])
    checked = [{"port": number, "address": address, "role": role,
                "holder": port_holder(number, name, seen["listening"], seen["ours"], p["container_prefix"],
                                      address, seen["owners"])}
               for number, address, role in wanted]
    holders = [c["holder"] for c in checked]
    health = None
    if p["health_base"] and container.get("running"):
        health = _health("%s%d/health" % (p["health_base"], container_port), p["health_timeout"])
    return {
        "name": name, "port": port, "container_port": container_port, "ports": checked,
        "unit": unit, "up": unit_up(unit, running=True), "health": health,
        "container": container, "config_mtime": config_mtime,
        "action": verdict["action"], "reasons": verdict["reasons"], "stale": verdict["stale"],
        "port_holder": "other" if "other" in holders else holders[0],
    }


def _model_problems(model_dir, check_tokenizer):
    """What the model directory lacks (config, tokenizer files, shards of its index), [] when complete."""
    if not model_dir:
        return []
    if not os.path.isdir(model_dir):
        return ["the model directory %s does not exist on this host" % model_dir]
    names = _list_dir(model_dir)
    index = None
    if "model.safetensors.index.json" in names:
        try:
            index = json.loads(read_text(os.path.join(model_dir, "model.safetensors.index.json")) or "")
        except ValueError:
            index = {}
    return model_dir_problems(names, index, where="the model directory %s" % model_dir,
                              check_tokenizer=check_tokenizer)


ARGUMENT_SPEC = dict(
    replicas=dict(type="list", elements="dict", required=True),
    changed=dict(type="list", elements="str", default=[]),
    config_dir=dict(type="path", default="/etc/llmfleet"),
    unit_file=dict(type="path", default="/etc/systemd/system/llmfleet-vllm@.service"),
    unit_prefix=dict(type="str", default="llmfleet-vllm@"),
    container_prefix=dict(type="str", default="llmfleet-vllm-"),
    docker_bin=dict(type="str", default="docker"),
    bind_address=dict(type="str", default="0.0.0.0"),
    port_offset=dict(type="int", default=0),
    edge=dict(type="bool", default=False),
    edge_bind_address=dict(type="str", default="0.0.0.0"),
    edge_config=dict(type="path", default="/etc/llmfleet/edge.cfg"),
    edge_unit=dict(type="str", default=""),
    model_dir=dict(type="path"),
    model_dirs=dict(type="list", elements="path", default=[]),
    check_tokenizer=dict(type="bool", default=True),
    units=dict(type="list", elements="str", default=[]),
    health_base=dict(type="str", default=""),
    health_timeout=dict(type="int", default=3),
    read_files=dict(type="list", elements="path", default=[]),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    p = module.params
    listening, owners = _listening_owners(module, p)
    containers = _containers(module, p)
    seen = {"systemctl": module.get_bin_path("systemctl"), "containers": containers, "listening": listening,
            "owners": owners, "template_mtime": _mtime(p["unit_file"]),
            "ours": dict((name, set(c["ports"])) for name, c in containers.items())}
    result_replicas = [_replica(module, p, replica, seen) for replica in p["replicas"]]
    restart = [r["name"] for r in result_replicas if r["action"] == "restarted"]
    units = dict((unit, _unit_show(module, seen["systemctl"], unit)) for unit in p["units"])
    files = dict((path, read_text(path)) for path in p["read_files"])
    module.exit_json(changed=False, replicas=result_replicas, restart=restart, units=units, files=files,
                     listening_ports=sorted(set(port for _unused, port, _unused in listening)),
                     model_problems=[m for d in _model_dirs(p) for m in _model_problems(d, p["check_tokenizer"])],
                     model_manifest=model_dir_digest(p["model_dir"]) if p["model_dir"] else None,
                     model_manifests=dict((d, model_dir_digest(d)) for d in p["model_dirs"]))


def _model_dirs(p):
    """model_dir, then the other model_dirs, each once."""
    dirs = [p["model_dir"]] if p["model_dir"] else []
    return dirs + [d for d in p["model_dirs"] if d not in dirs]


if __name__ == "__main__":
    main()
