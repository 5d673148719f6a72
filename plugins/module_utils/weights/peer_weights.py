# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Weights once per fleet: who fetches a model from the hub, who takes it from whom over the LAN, in which round.

Pure functions (no I/O): the model_weights role calls schedule() through the weights_peer_schedule filter on the
controller, with one entry per host of the play; model_fetch (on the host) calls rsync_argv() for each peer it
tries. The transfer itself is rsync (a read-only rsync daemon module on the hosts that hold the files, bound to
their LAN address; `rsync --partial` on the hosts that pull); what a host accepts is decided by its own
verification against the hub's metadata, never by a peer.

Rounds: round 0 is the hub download of one seed per (peer group, model) that no host holds yet; in each later
round every host that holds the files serves at most `fanout` hosts that do not, so the number of holders grows
(1 -> 2 -> 4 ... with fanout 1) and no single host serves everyone. A host that already holds verified files is a
holder from the start (a partial fleet needs no hub download at all).
"""
from __future__ import absolute_import, division, print_function

import hashlib
import json
import re

__metaclass__ = type

MODULE_PREFIX = "llmfleet-weights-"
# Each puller tries at most this many peers (primary first) before it falls back to the hub.
MAX_PEERS = 4


class PeerPlanError(ValueError):
    pass


def model_key(identity):
    """A short stable key for what makes two hosts' model directories the same bytes (any JSON-able value)."""
    return hashlib.sha1(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def module_name(dest):
    """The rsync daemon module that serves the model directory dest: readable, unique per path, safe in rsyncd.conf."""
    dest = (dest or "").rstrip("/")
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", dest.rsplit("/", 1)[-1]).strip("-.") or "model"
    return "%s%s-%s" % (MODULE_PREFIX, base[:40], hashlib.sha1(dest.encode("utf-8")).hexdigest()[:8])


def peer_url(address, port, module):
    """rsync://address:port/module/ (IPv6 addresses in brackets)."""
    if ":" in address and not address.startswith("["):
        address = "[%s]" % address
    return "rsync://%s:%d/%s/" % (address, int(port), module)


def _peer_groups(hosts):
    """({host: its entry before any peer is planned}, {(peer group, model key): the hosts of it that take part})."""
    out, groups, seen = {}, {}, set()
    for h in hosts or []:
        if not h:
            continue
        name = h.get("host")
        if not name or name in seen:
            raise PeerPlanError("every host entry needs a unique host name, got %r" % (name,))
        seen.add(name)
        state = h.get("state")
        if state not in ("complete", "fetch", "off"):
            raise PeerPlanError("%s: state must be complete, fetch or off, got %r" % (name, state))
        out[name] = {"round": 0, "source": "hub" if state in ("fetch", "off") else "none", "peers": [],
                     "serve": False, "allow": []}
        if state == "off":
            continue  # fetched on its own, as without peer transfer
        groups.setdefault((str(h.get("group", "")), h.get("key")), []).append(h)
    return out, groups


def _check_addresses(members):
    for m in members:
        if not m.get("address"):
            raise PeerPlanError("%s has no LAN address for peer transfer: set model_weights_peer_address (the "
                                "address its peers reach it on), gather its network facts, or set "
                                "model_weights_peer_transfer: false for it" % m["host"])


def _seeded(holders, needers):
    """(holders, needers) once a group without holders has a seed: one host downloads from the hub (round 0), the
    one with the least left to fetch (an interrupted earlier run), the first in inventory order on a tie."""
    if holders:
        return holders, needers
    seed = min(needers, key=lambda m: (int(m.get("bytes_to_fetch") or 0), needers.index(m)))
    return [seed], [m for m in needers if m is not seed]


def _schedule_group(out, holders, needers, port, fanout, max_peers):
    """Plan the peer rounds of one group into out; returns the number of rounds."""
    available = list(holders)
    r = 0
    while needers:
        r += 1
        batch = needers[:len(available) * int(fanout)]
        needers = needers[len(batch):]
        # The newest holders serve first: the seed, busy in every round so far, serves only when there are
        # as many pullers as holders (3 hosts: the seed serves the second, the second the third).
        newest = available[::-1]
        for i, m in enumerate(batch):
            j = i % len(newest)
            order = newest[j:] + newest[:j]  # primary first, then the other holders, spread
            out[m["host"]].update(round=r, source="peers",
                                  peers=[{"host": o["host"], "url": peer_url(o["address"], port, o["module"])}
                                         for o in order[:max_peers]])
            for o in order[:max_peers]:
                out[o["host"]]["serve"] = True
        available.extend(batch)
    return r


def schedule(hosts, port=8873, fanout=1, max_peers=MAX_PEERS):
    """Plan who fetches from the hub and who pulls from which peers, in rounds.

    hosts: one dict per host of the play, in inventory order: host, group (peer group: hosts of one network
    segment), key (model_key of what the host needs), address (its LAN address), module (module_name of its
    model directory), state ("complete": holds verified files; "fetch": needs bytes; "off": peer transfer turned
    off for it, or nothing to share), bytes_to_fetch (optional: a seed is the host with the least left to fetch).
    Entries that are None (hosts not running the role) are ignored.

    Returns {"rounds": number of peer rounds (0 when nobody pulls from a peer), "hosts": {host: entry}} where
    entry = {round: 0 for the hub or nothing to do, r >= 1 for a peer pull in round r; source: hub | peers |
    none; peers: [{host, url}] in the order to try (the hub comes after them); serve: whether the host must run
    the rsync daemon (some host pulls from it); allow: the addresses that may connect to it}.
    """
    if int(fanout) < 1:
        raise PeerPlanError("model_weights_peer_fanout must be >= 1, got %s" % fanout)
    out, groups = _peer_groups(hosts)
    rounds = 0
    for (_group, _key), members in groups.items():
        holders = [m for m in members if m["state"] == "complete"]
        needers = [m for m in members if m["state"] == "fetch"]
        if not needers or len(members) < 2:
            continue
        _check_addresses(members)
        allow = sorted(set(m["address"] for m in members))
        holders, needers = _seeded(holders, needers)
        rounds = max(rounds, _schedule_group(out, holders, needers, port, fanout, max_peers))
        for m in members:
            if out[m["host"]]["serve"]:
                out[m["host"]]["allow"] = allow
    return {"rounds": rounds, "hosts": out}


def rsync_argv(url, dest, files_from, work_dir, timeout=30, contimeout=10, bwlimit_kib=0):
    """The rsync command that pulls the files listed in files_from (paths relative to the module) from a peer.

    Partial files are kept in work_dir/partial and used as the basis when the transfer is resumed (from this or
    another peer); files in flight are written under work_dir/tmp and renamed into place when complete, so a
    killed transfer never leaves a half-written file at its final name. No credentials: the peer's module is
    read-only and limited to the fleet's addresses.
    """
    argv = ["rsync", "--files-from=%s" % files_from, "--partial", "--partial-dir=%s/partial" % work_dir,
            "--temp-dir=%s/tmp" % work_dir, "--timeout=%d" % int(timeout), "--contimeout=%d" % int(contimeout),
            "--perms", "--chmod=D0755,F0644", "--times", "--no-motd", "--human-readable", "--stats"]
    if bwlimit_kib:
        argv.append("--bwlimit=%d" % int(bwlimit_kib))
    return argv + [url, dest.rstrip("/") + "/"]


# rsync's exit codes (man rsync, EXIT VALUES) a puller reports when a peer fails.
RSYNC_EXIT = {
    1: "syntax or usage error", 2: "protocol incompatibility", 3: "errors selecting input/output files",
    5: "error starting client-server protocol (the peer refused: module missing, address not allowed, "
       "or its model directory is not in place)",
    10: "error in socket I/O (the peer is unreachable or went away)", 11: "error in file I/O",
    12: "error in rsync protocol data stream (the peer went away mid-transfer)", 20: "interrupted",
    23: "partial transfer due to error (a file is missing on the peer)", 24: "some files vanished on the peer",
    30: "timeout in data send/receive (the peer stopped sending)", 35: "timeout waiting for the daemon connection",
}


def rsync_reason(rc):
    return RSYNC_EXIT.get(rc, "rsync exit code %s" % rc)


def remaining(sizes, present):
    """Paths (sorted) whose file is absent or not yet of the expected size. sizes: path -> bytes; present:
    path -> bytes on disk."""
    return sorted(p for p, s in sizes.items() if present.get(p) != s)
