# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""TLS on the edge and the balancer; the logic lives in plugins/plugin_utils/fleet/tls.py and tls_checks.py."""

from __future__ import annotations

import datetime

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import tls as TLS
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import tls_checks as TC

# Each filter's documentation: plugins/filter/<filter name>.yml.


def haproxy_tls(backends, settings):
    if not isinstance(settings, dict) or (settings.get("enabled") and not all(k in settings for k in ("pem", "ca_file"))):
        raise AnsibleFilterError("haproxy_tls expects settings {enabled, pem, ca_file}, got %r" % (settings,))
    if not isinstance(backends, list) or not all(isinstance(b, dict) and "address" in b for b in backends):
        raise AnsibleFilterError("haproxy_tls expects a list of dicts with address, got %r" % (backends,))
    return TLS.haproxy_tls(backends, settings)


def tls_subject_alt_names(names, addresses=None):
    return TLS.subject_alt_names(list(names or []), list(addresses or []))


def tls_certificate_problems(files, names, renew_days):
    if not isinstance(files, list) or not all(isinstance(f, dict) and "var" in f for f in files):
        raise AnsibleFilterError("tls_certificate_problems expects [{var, path, exists, content, mode}], got %r" % (files,))
    by_var = dict((f["var"], f) for f in files)
    try:
        return TC.certificate_problems(by_var, list(names or []), datetime.datetime.now(datetime.timezone.utc),
                                       renew_days)
    except ImportError as exc:
        raise AnsibleFilterError(str(exc))


def tls_ca_rotation(phase, present):
    if not isinstance(present, dict):
        raise AnsibleFilterError("tls_ca_rotation expects present {next, previous}, got %r" % (present,))
    try:
        return TLS.ca_rotation(str(phase or ""), present)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {"haproxy_tls": haproxy_tls, "tls_subject_alt_names": tls_subject_alt_names,
                "tls_certificate_problems": tls_certificate_problems, "tls_ca_rotation": tls_ca_rotation}
