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


def _server_options(backend, ca_file):
    """A balancer server's TLS: verified against the CA, and (where the member's host is a name) that the
    certificate names it. HAProxy matches verifyhost against DNS names only, so an address gets the chain check."""
    options = " ssl verify required ca-file %s" % ca_file
    host = str(backend.get("host") or "")
    if host and not _is_address(host):
        options += " verifyhost %s" % host
    return options


def _server_addresses(backend):
    """Where the balancer dials a backend's host: its replica's port, or its edge's when it routes by model."""
    ports = [backend.get("port"), backend.get("edge_port")]
    return [address_port(backend["address"], p) for p in ports if p not in (None, "")]


def haproxy_tls(backends, settings):
    """The TLS parts of one HAProxy configuration. settings: enabled (bool), pem (the certificate + key it
    presents), ca_file (what it verifies its servers against). backends: the balancer's [{name, address, port,
    edge_port?, host?, tls?}] ([] for the edge). servers: each server's options by the address:port it dials (the server
    lines of both balancer layouts have it), server: the options of one the backends do not name. With TLS off
    every part is empty, so the templates print plain HTTP as before."""
    if not settings.get("enabled"):
        return {"enabled": False, "global": [], "bind": "", "server": "", "servers": {}}
    ca_file = str(settings["ca_file"])
    servers = {}
    for backend in backends or []:
        # A host whose replicas listen without an edge (fleet_backends' tls false) is dialled as it speaks: plain.
        options = "" if backend.get("tls") is False else _server_options(backend, ca_file)
        for address in _server_addresses(backend):
            servers.setdefault(address, options)
    return {"enabled": True, "global": _global_lines(), "bind": " ssl crt %s" % settings["pem"],
            "server": _server_options({}, ca_file), "servers": servers}


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
