# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet in front of the replicas: balancer backends, scrape targets, HAProxy state (pure functions, no I/O).

Input is what each serving host's vllm_server role wrote to /etc/llmfleet/serving.json, one "member" per
host: {"host": inventory name, "address": the host's private address, "serving": <serving.json>}.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import csv
import json
import re

from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent import conventions as CV
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.model_routing import BACKEND_PREFIX

# The address scopes are the collection's conventions (plugins/module_utils/host_agent/conventions.py).
LOOPBACK = CV.LOOPBACK
WILDCARD = CV.WILDCARD
address_scope = CV.address_scope
_NAME_BAD = re.compile(r"[^A-Za-z0-9_.:-]")
_URL = re.compile(r"^(?P<scheme>https?)://(?P<host>\[[0-9A-Fa-f:]+\]|[^/:]+)(?::(?P<port>\d+))?(?P<path>/.*)?$")


class FleetError(ValueError):
    """A fleet description that cannot be balanced; the message says what is wrong and how to fix it."""


def server_name(host, replica):
    """HAProxy server name (and Prometheus 'instance' label) of one replica: <host>-<replica>, safe characters only."""
    return _NAME_BAD.sub("_", "%s-%s" % (host, replica))


def parse_url(url):
    """Split http(s)://host:port/path into (host, port or None, path). Raises FleetError on anything else."""
    match = _URL.match(url or "")
    if not match:
        raise FleetError("not an http(s) URL: %r" % (url,))
    port = match.group("port")
    return match.group("host"), (int(port) if port else None), match.group("path") or "/"


def _replica_address(member, index, replica):
    """The address the balancer dials for one replica (see fleet_backends)."""
    serving = member["serving"]
    bind = serving.get("bind_address")
    urls = serving.get("base_urls") or []
    url_host = parse_url(urls[index])[0] if index < len(urls) else ""
    if bind in LOOPBACK:
        raise FleetError(
            "%s: replica %s listens on loopback only (%s), so no balancer can reach it. Set %s to the host's "
            "private address (e.g. \"{{ ansible_default_ipv4.address }}\") and re-run playbooks/serve.yml."
            % (member["host"], replica.get("name"), bind,
               "vllm_server_edge_bind_address" if serving.get("edge") else "vllm_server_bind_address"))
    if bind and bind not in WILDCARD:
        return bind
    if bind is None and url_host and url_host not in LOOPBACK and url_host not in WILDCARD:
        return url_host
    # Bound to every address (or a serving.json without bind_address whose URL is loopback): the host's address.
    address = member.get("address") or ""
    if not address:
        raise FleetError(
            "%s: replica %s has no address other hosts can reach: set vllm_server_bind_address to the "
            "host's private address, or llmfleet_fleet_address for the host." % (member["host"], replica.get("name")))
    return address


def _exposed(serving, index):
    """True when the replica answers on every address of its host (clients can go around the balancer).

    A replica behind its host's authenticating edge (serving.json "edge": true) is not exposed: what listens
    on its port is the edge, which checks the key and lets only the API routes through.
    """
    if serving.get("edge"):
        return False
    bind = serving.get("bind_address")
    if bind is not None:
        return bind in WILDCARD
    urls = serving.get("base_urls") or []
    return index < len(urls) and parse_url(urls[index])[0] in LOOPBACK


def replica_models(serving):
    """[(replica, model)]: each replica of a host of several models (serving.json's `models`) with the entry of the
    model it serves, in serving.json's order; [] for a host of one model (its replicas serve the top-level model)."""
    return [(replica, model) for model in (serving or {}).get("models") or [] for replica in model.get("replicas") or []]


def _replica_model_fields(serving):
    """{replica name: {model, adapters, runner, edge_port}} from serving.json's models (many models); {} without."""
    out = {}
    for replica, model in replica_models(serving):
        urls = model.get("base_urls") or []
        # With many models a host's edge has one client port, the one its models' URLs name.
        edge_port = parse_url(urls[0])[1] if urls else None
        out[str(replica.get("name"))] = {
            "model": str(model.get("name") or ""), "adapters": [str(a) for a in model.get("adapters") or []],
            "runner": str(model.get("runner") or "generate"), "edge_port": edge_port or int(replica["port"])}
    return out


def fleet_backends(members, by_model=False):
    """Every replica of every serving host, in inventory order, as the balancer and Prometheus see them.

    Each result: {name, host, replica, address, port, served_model_name, exposed, tls, runner}; exposed is True when the
    replica answers on every address of its host (bound to 0.0.0.0), i.e. clients can go around the balancer.
    A headless rank of a model served over several hosts (serving.json's multinode.is_leader false) is no member:
    its group is one replica, the leader's.
    Raises FleetError when a host has not been served yet, a replica is reachable on loopback only, two
    replicas share an address:port, or (unless by_model: many models, routed by name) the hosts serve different
    model names (one balancer, one model). A host whose serving.json lists models gives each replica its model,
    adapters, runner and edge_port (its edge's one client port) too.
    """
    if not members:
        raise FleetError("no serving hosts: put the vLLM hosts in group gpu_nodes and run site.yml first.")
    backends = []
    seen = {}
    names = {}
    for member in members:
        host = member.get("host") or "?"
        serving = member.get("serving")
        # A headless rank of a model served over several hosts: its group's leader is the group's one member.
        if isinstance(serving, dict) and (serving.get("multinode") or {}).get("is_leader") is False:
            continue
        if not isinstance(serving, dict) or not serving.get("replicas"):
            raise FleetError(
                "%s: no replicas described (its /etc/llmfleet/serving.json is missing or empty): run "
                "playbooks/serve.yml on it first." % host)
        name = serving.get("served_model_name") or ""
        names.setdefault(name, []).append(host)
        models = _replica_model_fields(serving)
        # every model's replicas (serving.json's top-level replicas are its first model's only)
        replicas = [replica for replica, _model in replica_models(serving)] or serving["replicas"]
        for index, replica in enumerate(replicas):
            address = _replica_address(member, index, replica)
            port = int(replica["port"])
            key = (address, port)
            if key in seen:
                raise FleetError("%s and %s both claim %s:%d: give each host its own llmfleet_fleet_address."
                                 % (seen[key], host, address, port))
            seen[key] = host
            backends.append({
                "name": server_name(host, replica.get("name", index)),
                "host": host,
                "replica": str(replica.get("name", index)),
                "address": address,
                "port": port,
                "served_model_name": name,
                "exposed": _exposed(serving, index),
                # Its edge speaks TLS (the host's URLs are https://): the balancer dials it with TLS too.
                "tls": any(str(u).startswith("https://") for u in serving.get("base_urls") or []),
                # a host serving the one-model shorthand (a fleet on its way to routing by model) serves a generator
                "runner": "generate",
            })
            backends[-1].update(models.get(str(replica.get("name", index))) or {})
    if len(names) > 1 and not by_model:
        raise FleetError(
            "the serving hosts serve different model names (%s): one balancer routes one model. Give every "
            "host in gpu_nodes the same llmfleet_served_model_name." % "; ".join(
                "%r on %s" % (n, ", ".join(h)) for n, h in sorted(names.items())))
    return backends


def drain_targets(serving, host, backend, by_model=False, models=None):
    """What a drain takes out of each balancer for one serving host: [{backend, server}]. One model: each replica in
    backend (its server <host>-<replica>). Routing by model: in each of the host's models' backends
    (llmfleet_model_<name>), the host's edge (server <host>-<model>), as balancer_config names them; models (a
    roll of some models, upgrade_models): only theirs, the others keep serving."""
    serving = serving or {}
    if not by_model:
        return [{"backend": backend, "server": server_name(host, r.get("name"))} for r in serving.get("replicas") or []]
    names = [str(m.get("name")) for m in serving.get("models") or []] or [str(serving.get("served_model_name") or "")]
    return [{"backend": BACKEND_PREFIX + n, "server": server_name(host, n)} for n in names
            if n and (not models or n in models)]


def drain_replicas(serving, models=None):
    """Every replica of a serving.json whose in-flight requests a drain waits for: the top-level ones and, with many
    models, each model's, each once; models (a roll of some models): only theirs."""
    serving = serving or {}
    if models and serving.get("models"):
        serving = {"models": [m for m in serving["models"] if m.get("name") in models]}
    out = []
    for replica in list(serving.get("replicas") or []) + [
            r for m in serving.get("models") or [] for r in m.get("replicas") or []]:
        if replica.get("name") not in [r.get("name") for r in out]:
            out.append(replica)
    return out


def address_port(address, port):
    """host:port with IPv6 addresses in brackets."""
    if ":" in address and not address.startswith("["):
        address = "[%s]" % address
    return "%s:%d" % (address, int(port))


def prometheus_vllm_targets(backends):
    """Prometheus static_configs for the replicas' /metrics: one group per replica, labelled host, replica, server.

    No model label: vLLM's own series carry model_name already (a target label of that name would rename it).
    """
    return [{
        "targets": [address_port(b["address"], b["port"])],
        "labels": {"host": b["host"], "replica": b["replica"], "server": b["name"]},
    } for b in backends]


def haproxy_stat(text):
    """Parse HAProxy's `show stat` CSV (header line '# pxname,svname,...') into a list of dicts."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if not lines or not lines[0].startswith("# "):
        raise FleetError("not HAProxy 'show stat' CSV output (no '# pxname,...' header)")
    header = lines[0][2:].split(",")
    rows = []
    for record in csv.reader(lines[1:]):
        rows.append(dict(zip(header, record)))
    return rows


def haproxy_servers(text, backend):
    """{server name: {status, scur, check_status, backend}} of one backend (or a list of backends: a balancer routing
    by model has one per model, with distinct server names; a name ending in * is a prefix) in a `show stat` CSV."""
    backends = [backend] if isinstance(backend, str) else list(backend or [])
    prefixes = tuple(b[:-1] for b in backends if b.endswith("*"))
    result = {}
    for row in haproxy_stat(text):
        name = row.get("pxname") or ""
        if (name in backends or (prefixes and name.startswith(prefixes))) and row.get("svname") not in ("FRONTEND", "BACKEND"):
            result[row["svname"]] = {"status": row.get("status", ""), "scur": int(row.get("scur") or 0),
                                     "check_status": row.get("check_status", ""), "backend": row["pxname"]}
    return result


# ---- who the serving hosts are, from what the balancer / monitoring play read of them --------------------------

def host_address(host_vars, host, fallback=False):
    """The address other hosts reach host by: llmfleet_fleet_address when set, else the fact default_ipv4.address;
    else, with fallback, ansible_host or the inventory name (else ''). host_vars: that host's variables."""
    host_vars = host_vars or {}
    if "llmfleet_fleet_address" in host_vars:
        return host_vars["llmfleet_fleet_address"]
    facts = host_vars.get("ansible_facts") or {}
    address = (facts.get("default_ipv4") or {}).get("address") if isinstance(facts, dict) else None
    if address is not None:
        return address
    if not fallback:
        return ""
    return host_vars["ansible_host"] if "ansible_host" in host_vars else host


def _serving_text(result):
    """serving.json's text from one host's read: a host_state result (its one file) or a slurp result (base64);
    None when it could not be read."""
    files = result.get("files")
    if isinstance(files, dict) and files:
        return next(iter(files.values()))
    content = result.get("content")
    return base64.b64decode(content).decode("utf-8") if content is not None else None


def serving_members(results, addresses):
    """[{host, address, serving}] from the results of reading each serving host's serving.json (results: a looped
    host_state's, or slurp's, results, item = the host; a host whose file could not be read serves nothing, {}).
    addresses: {host: address}."""
    members = []
    for result in results or []:
        host = result.get("item")
        text = _serving_text(result)
        serving = json.loads(text) if text is not None else {}
        members.append({"host": host, "address": (addresses or {}).get(host, ""), "serving": serving})
    return members
