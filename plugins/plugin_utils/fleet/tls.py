# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""TLS on the edge and the balancer, as data (pure functions, no I/O).

  haproxy_tls(backends, settings)        the TLS parts of an HAProxy configuration: global defaults, bind options,
                                         each server's options (balancer -> edge, verified against the CA)
  subject_alt_names(names, addresses)    a host certificate's SANs, as community.crypto takes them

The templates print these beside the parts haproxy_config.py gives (the bind and server lines only).
"""

from __future__ import annotations

import ipaddress

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.fleet import address_port

# Mozilla's "intermediate" configuration (TLS 1.2 and 1.3): ECDHE with AEAD ciphers only. Its DHE suites are left
# out: they need a Diffie-Hellman parameter file, and every client that speaks TLS 1.2 has ECDHE.
TLS12_CIPHERS = ":".join([
    "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305"])
TLS13_CIPHERSUITES = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
MIN_VERSION = "TLSv1.2"
LOOPBACK = ("127.0.0.0/8", "::1")


def _global_lines():
    """HAProxy's global defaults for every ssl bind and server: at least TLS 1.2, the intermediate ciphers."""
    lines = []
    for side in ("bind", "server"):
        lines += ["ssl-default-%s-ciphers %s" % (side, TLS12_CIPHERS),
                  "ssl-default-%s-ciphersuites %s" % (side, TLS13_CIPHERSUITES),
                  "ssl-default-%s-options ssl-min-ver %s no-tls-tickets" % (side, MIN_VERSION)]
    return lines


def _is_address(name):
    try:
        ipaddress.ip_address(str(name).strip("[]"))
    except ValueError:
        return False
    return True


def _server_options(backend, ca_file, client_pem):
    """A balancer server's TLS: verified against the CA, and (where the member's host is a name) that the
    certificate names it. HAProxy matches verifyhost against DNS names only, so an address gets the chain check.
    With mutual TLS the balancer presents its own certificate (client_pem) to the edge."""
    options = " ssl verify required ca-file %s" % ca_file
    host = str(backend.get("host") or "")
    if host and not _is_address(host):
        options += " verifyhost %s" % host
    if client_pem:
        options += " crt %s" % client_pem
    return options


def _client_gate(settings, ca_file):
    """Mutual TLS on an edge (settings.verify_clients): the bind asks for a client certificate signed by the CA (a
    certificate that does not verify fails the handshake), and a request from off the host without one is refused
    before its body is read. Loopback stays open to the host's own clients (the smoke test, the completion gate,
    the watchdog), which hold no client certificate: whoever can dial loopback is on the host already. So does the
    edge's own bind address (settings.local_addresses) where it is one address, not a wildcard: those clients dial it,
    and a connection from the host to its own address comes from that address."""
    if not settings.get("verify_clients"):
        return "", []
    own = [str(a).strip("[]") for a in settings.get("local_addresses") or [] if _is_address(a)]
    own = [a for a in own if not ipaddress.ip_address(a).is_unspecified and a not in LOOPBACK]
    return (" verify optional ca-file %s" % ca_file,
            ["http-request deny deny_status 403 if !{ ssl_c_used } !{ src %s }" % " ".join(LOOPBACK + tuple(own))])


def _server_addresses(backend):
    """Where the balancer dials a backend's host: its replica's port, or its edge's when it routes by model."""
    ports = [backend.get("port"), backend.get("edge_port")]
    return [address_port(backend["address"], p) for p in ports if p not in (None, "")]


def haproxy_tls(backends, settings):
    """The TLS parts of one HAProxy configuration. settings: enabled (bool), pem (the certificate + key it
    presents), ca_file (what it verifies its servers, and with verify_clients its clients, against), client_pem
    (mutual TLS on a balancer: the certificate it presents to the edges; '' for none), verify_clients (mutual TLS
    on an edge). backends: the balancer's [{name, address, port, edge_port?, host?, tls?}] ([] for the edge).
    servers: each server's options by the address:port it dials (the server lines of both balancer layouts have
    it), server: the options of one the backends do not name, client_gate: the lines that refuse a request without
    a client certificate. With TLS off every part is empty, so the templates print plain HTTP as before."""
    if not settings.get("enabled"):
        return {"enabled": False, "global": [], "bind": "", "server": "", "servers": {}, "client_gate": []}
    ca_file = str(settings["ca_file"])
    client_pem = str(settings.get("client_pem") or "")
    servers = {}
    for backend in backends or []:
        # A host whose replicas listen without an edge (fleet_backends' tls false) is dialled as it speaks: plain.
        options = "" if backend.get("tls") is False else _server_options(backend, ca_file, client_pem)
        for address in _server_addresses(backend):
            servers.setdefault(address, options)
    verify, client_gate = _client_gate(settings, ca_file)
    return {"enabled": True, "global": _global_lines(), "bind": " ssl crt %s%s" % (settings["pem"], verify),
            "server": _server_options({}, ca_file, client_pem), "servers": servers, "client_gate": client_gate}


def subject_alt_names(names, addresses):
    """SANs for a host certificate: DNS:<name> for each name, IP:<address> for each address (a name that is an
    address counts as one), in order, each once; blanks dropped."""
    sans = []
    for value in list(names or []) + list(addresses or []):
        text = str(value or "").strip().strip("[]")
        if not text:
            continue
        san = ("IP:%s" % ipaddress.ip_address(text)) if _is_address(text) else "DNS:%s" % text.lower()
        if san not in sans:
            sans.append(san)
    return sans


# The collection's CA rotation, in phases (docs/SECURITY.md, "Transport"): the CA that signs is ca.crt; next/ca.crt is
# trusted but signs nothing yet; previous/ca.crt is trusted while the certificates it signed are replaced.
CA_ROTATION_PHASES = ("", "start", "finish", "end")
CA_FILES = {"current": "ca.crt", "next": "next/ca.crt", "previous": "previous/ca.crt"}


def ca_rotation(phase, present):
    """What one run does to the CA directory, and what every host then trusts. phase: '' (nothing), 'start' (make
    the next CA, trusted beside the current one), 'finish' (the next CA becomes the one that signs; the old one
    stays trusted as previous and every host certificate is signed again), 'end' (the previous CA is trusted no
    more). present: {next, previous} (bool: which of those CAs the directory holds). Each phase is idempotent, so
    the edges' play and the balancer's play can both run it. Returns {make (the CA directories to make a CA in:
    '' for the current one), promote, drop_previous, bundle (the CA files every host trusts, in order)}."""
    if phase not in CA_ROTATION_PHASES:
        raise ValueError("llmfleet_tls_ca_rotation must be one of %s, got %r"
                         % (", ".join(repr(p) for p in CA_ROTATION_PHASES), phase))
    has_next = bool(present.get("next")) or phase == "start"
    promote = phase == "finish" and has_next
    has_previous = (bool(present.get("previous")) or promote) and phase != "end"
    has_next = has_next and not promote
    trusted = {"current": True, "next": has_next, "previous": has_previous}
    return {"make": [""] + (["next"] if has_next else []), "promote": promote,
            "drop_previous": phase == "end" and bool(present.get("previous")),
            "bundle": [CA_FILES[name] for name in ("current", "next", "previous") if trusted[name]]}
