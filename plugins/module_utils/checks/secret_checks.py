# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Secrets set but empty, white space or unresolved, and a production endpoint without an API key. The caller
hands over what state each secret is in, never its value; no message holds one. Pure functions."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.input_checks import truthy

# What state each secret is in: {var, kind, set, defined, blank}
#   set      the variable is set somewhere (inventory, group_vars, extra vars)
#   defined  its value resolves (False: a template naming an undefined variable, e.g. a vault file not loaded)
#   blank    its value is empty or white space (kind keys: a list with such an entry, or no list at all)
# kind: key (an API key), keys (a list of API keys), token (a hub token), password (registry credentials).
_SECRET_FIX = {
    "key": "Set it to the key (keep it in Ansible Vault: ansible-vault encrypt_string --name {var}), or remove the "
           "variable.",
    "keys": "Remove the empty entries, or set each to a key (from Ansible Vault).",
    "token": "Set it to the token (from Ansible Vault), or remove the variable when the repository is public.",
    "password": "Set it (from Ansible Vault), or remove both vllm_image_registry_username and "
                "vllm_image_registry_password for an anonymous pull.",
}
_SECRET_RISK = {
    "key": "an empty key would serve the endpoint without authentication",
    "keys": "an empty key would let requests through without authentication",
    "token": "an empty token fails against a private or gated repository",
    "password": "an empty password fails at the registry",
}


def secret_problems(secrets, key_check=None):
    """Secrets that are set but empty, white space or unresolved; and a production endpoint without any key.

    key_check: {environment, key_var, key_set (bool: a non-empty key is in effect), address, address_var, scope
    (the address_scope of what clients reach), tls (bool: the listener speaks TLS), tls_var}: prod with no key, or
    with TLS off, on an address beyond loopback is refused, as the serve role refuses it. The value of a secret is
    never part of a message."""
    problems = []
    for item in secrets or []:
        var, kind = item.get("var"), item.get("kind", "key")
        if not truthy(item.get("set", False)):
            continue
        fix = _SECRET_FIX.get(kind, _SECRET_FIX["key"]).format(var=var)
        risk = _SECRET_RISK.get(kind, _SECRET_RISK["key"])
        if not truthy(item.get("defined", True)):
            problems.append("%s is set to a template that does not resolve (it names an undefined variable, e.g. a "
                            "vault variable whose file is not loaded): %s. %s" % (var, risk, fix))
        elif truthy(item.get("blank", False)):
            what = ("is not a list of keys or has an empty entry" if kind == "keys"
                    else "is set but empty (or only white space)")
            problems.append("%s %s (an unset vault or environment lookup?): %s. %s" % (var, what, risk, fix))
    kc = key_check or {}
    if (kc.get("environment") == "prod" and not truthy(kc.get("key_set", True))
            and kc.get("scope") not in (None, "", "loopback")):
        problems.append("llmfleet_environment is prod and no API key is set, so anyone who reaches %s (%s) can use "
                        "the model. Set %s (e.g. ansible-vault encrypt_string --name llmfleet_api_key), or keep the "
                        "endpoint on this host only (%s: 127.0.0.1)."
                        % (kc.get("address"), kc.get("scope"), kc.get("key_var") or "llmfleet_api_key",
                           kc.get("address_var") or "vllm_server_edge_bind_address"))
    if (kc.get("environment") == "prod" and not truthy(kc.get("tls", True))
            and kc.get("scope") not in (None, "", "loopback")):
        problems.append("llmfleet_environment is prod and %s is false, so the API key, every prompt and every "
                        "completion cross the network in clear to %s (%s). Keep TLS on (the default), or bind %s to "
                        "127.0.0.1 behind a TLS proxy of your own." % (
                            kc.get("tls_var") or "llmfleet_tls", kc.get("address"), kc.get("scope"),
                            kc.get("address_var") or "vllm_server_edge_bind_address"))
    return problems
