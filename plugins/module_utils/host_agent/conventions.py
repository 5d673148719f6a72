# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's conventions, in one place: what its units and containers are called, which addresses mean
"this host only" or "every address", which files make a model directory, the accelerator a play serves on
when none is set, the replicas' first port when none is set. Constants and small pure functions, no I/O; modules, filters and (through the filters) roles
take them from here.

  replica_unit(name) / replica_container(name)   the systemd unit and the container of one replica
  tls_pem(name)                                  the certificate + key file one HAProxy presents
  address_scope(address)                         loopback, wildcard, private, public or name
  reach_address(bind)                            where this host reaches a service bound to bind
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress

# ---- names on the host ---------------------------------------------------------------------------------------
UNIT_PREFIX = "llmfleet-"
REPLICA_UNIT_PREFIX = "llmfleet-vllm@"
REPLICA_CONTAINER_PREFIX = "llmfleet-vllm-"
EDGE_UNIT = "llmfleet-edge.service"
WATCHDOG_UNIT = "llmfleet-watchdog.service"
WATCHDOG_TIMER = "llmfleet-watchdog.timer"
# The labels of a replica's container (replica_state reads the manifest and image labels back).
REPLICA_LABEL = "llmfleet.vllm.replica"
SERVED_MODEL_LABEL = "llmfleet.vllm.served-model-name"
MANIFEST_LABEL = "llmfleet.vllm.model-manifest"
IMAGE_LABEL = "llmfleet.vllm.image-id"
# TLS on a host: the CA clients verify against (public), and one certificate + key per HAProxy (0600, root).
TLS_DIR = "/etc/llmfleet/tls"
TLS_CA_FILE = TLS_DIR + "/ca.crt"

# ---- address scopes -------------------------------------------------------------------------------------------
# Every spelling of "this host only" and of "every address" (an empty bind address binds every address too).
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
WILDCARD = ("0.0.0.0", "::", "[::]", "0:0:0:0:0:0:0:0", "")
# Where this host reaches a service bound to a wildcard address.
LOCAL_REACH = "127.0.0.1"

# ---- model directories ----------------------------------------------------------------------------------------
CONFIG_FILE = "config.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
# One of these (or a *.tiktoken file) is the tokenizer itself.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")
SAFETENSORS_INDEX = "model.safetensors.index.json"

# ---- ports ---------------------------------------------------------------------------------------------------
# The first replica's port (and, with the edge, the host's one client port) when vllm_server_port_base is not set;
# the roles that reach a replica without the vllm_server role's defaults (benchmark, loadbalancer) read it too.
REPLICA_PORT_BASE = 8000

# ---- profiles -------------------------------------------------------------------------------------------------
# llmfleet_accelerator when the inventory does not set it (the roles' defaults read llmfleet_accelerator_default).
DEFAULT_ACCELERATOR = "gpu"
ACCELERATORS = ("gpu", "cpu")


def replica_unit(name):
    """The systemd unit of replica name (an instance of llmfleet-vllm@.service)."""
    return "%s%s.service" % (REPLICA_UNIT_PREFIX, name)


def replica_container(name):
    """The container the unit of replica name runs."""
    return "%s%s" % (REPLICA_CONTAINER_PREFIX, name)


def tls_pem(name):
    """The certificate and key (one PEM file) HAProxy named name (edge, balancer) presents."""
    return "%s/%s.pem" % (TLS_DIR, name)


def address_scope(address):
    """Who can reach a listening address: 'loopback', 'private', 'wildcard', 'public', or 'name' (a host name).

    private covers RFC 1918, carrier-grade NAT, IPv6 unique-local and link-local: networks a site keeps to itself.
    """
    text = str(address or "").strip().strip("[]")
    if text in WILDCARD or text == "*":
        return "wildcard"
    if text == "localhost":
        return "loopback"
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return "name"
    if ip.is_unspecified:
        return "wildcard"
    if ip.is_loopback:
        return "loopback"
    if ip.is_private or ip.is_link_local or ip in ipaddress.ip_network("100.64.0.0/10"):
        return "private"
    return "public"


def reach_address(bind):
    """The address this host dials for a service bound to bind: loopback for a wildcard, else bind itself."""
    return LOCAL_REACH if address_scope(bind) == "wildcard" else bind
