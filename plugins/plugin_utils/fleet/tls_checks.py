# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The checks of a certificate the user brings (llmfleet_tls_cert_file, _key_file, _ca_file), on the controller,
before anything changes (pure: PEM texts in, problems out).

  certificate_problems(files, names, now, renew_days)   what is wrong, one sentence each naming the variable and
                                                        the fix; [] when the certificate can be used
"""

from __future__ import annotations

import datetime
import fnmatch
import ipaddress

try:
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import serialization
except ImportError as exc:  # ansible-core requires cryptography; a bare environment (ansible-test's) may lack it
    CRYPTOGRAPHY_ERROR = exc
else:
    CRYPTOGRAPHY_ERROR = None

CERT, KEY, CA = "llmfleet_tls_cert_file", "llmfleet_tls_key_file", "llmfleet_tls_ca_file"


def _load(kind, text):
    data = str(text or "").encode()
    if kind == KEY:
        return serialization.load_pem_private_key(data, password=None)
    if kind == CA:
        # A bundle: old and new CA during a rotation's overlap (docs/SECURITY.md, "Transport").
        return x509.load_pem_x509_certificates(data)
    return x509.load_pem_x509_certificate(data)


def _parsed(files):
    """{variable: parsed object}, and a problem for each file that is missing or does not parse."""
    parsed, problems = {}, []
    for var in (CERT, KEY, CA):
        entry = files.get(var) or {}
        if not entry.get("exists"):
            problems.append("%s: %s does not exist on the controller; give the path of a PEM file." % (
                var, entry.get("path") or "(not set)"))
            continue
        try:
            parsed[var] = _load(var, entry.get("content"))
        except (ValueError, TypeError) as exc:
            problems.append("%s: %s is not a PEM %s without a passphrase (%s)." % (
                var, entry.get("path"), "private key" if var == KEY else "certificate", exc))
    return parsed, problems


def _public(key):
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _sans(cert):
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [], []
    return [n.lower() for n in ext.get_values_for_type(x509.DNSName)], ext.get_values_for_type(x509.IPAddress)


def _covered(name, dns, ips):
    text = str(name).strip().strip("[]")
    try:
        return ipaddress.ip_address(text) in ips
    except ValueError:
        return any(fnmatch.fnmatchcase(text.lower(), d) if d.startswith("*.") else text.lower() == d for d in dns)


def _cert_problems(parsed, names, now, renew_days):
    cert, path = parsed[CERT], CERT
    problems = []
    if KEY in parsed and _public(cert.public_key()) != _public(parsed[KEY].public_key()):
        problems.append("%s and %s: the key does not match the certificate (another key pair); give the key the "
                        "certificate was issued for." % (CERT, KEY))
    not_after = cert.not_valid_after_utc
    if not_after <= now:
        problems.append("%s: the certificate expired on %s; renew it." % (path, not_after.date()))
    elif not_after <= now + datetime.timedelta(days=int(renew_days)):
        problems.append("%s: the certificate expires on %s, within llmfleet_tls_renew_days (%s); renew it." % (
            path, not_after.date(), renew_days))
    dns, ips = _sans(cert)
    missing = [n for n in names if not _covered(n, dns, ips)]
    if missing:
        problems.append("%s: the certificate's subject alternative names (%s) do not cover %s, which clients use; "
                        "issue it with those names." % (path, ", ".join(dns + [str(i) for i in ips]) or "none",
                                                        ", ".join(missing)))
    if CA in parsed and not any(_signed_by(cert, ca) for ca in parsed[CA]):
        problems.append("%s: %s (%s) did not sign the certificate; give the CA that issued it." % (
            CA, " + ".join(ca.subject.rfc4514_string() for ca in parsed[CA]), "its issuer: " + cert.issuer.rfc4514_string()))
    return problems


def _signed_by(cert, ca):
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def certificate_problems(files, names, now, renew_days):
    """files: {variable: {path, exists, content, mode}} for the certificate, the key and the CA (read on the
    controller); names: what clients use to reach the host; now: an aware datetime; renew_days: how close to its
    end a certificate is refused. Returns one sentence per problem."""
    if CRYPTOGRAPHY_ERROR is not None:
        raise ImportError("checking a certificate needs the Python package cryptography on the controller (pip "
                          "install cryptography): %s" % CRYPTOGRAPHY_ERROR)
    parsed, problems = _parsed(files)
    mode = str((files.get(KEY) or {}).get("mode") or "")
    if mode and int(mode, 8) & 0o077:
        problems.append("%s: %s is mode %s, readable by others; chmod 0600 it." % (KEY, files[KEY]["path"], mode))
    if CERT in parsed:
        problems += _cert_problems(parsed, [str(n) for n in names or [] if str(n or "").strip()], now, renew_days)
    return problems
