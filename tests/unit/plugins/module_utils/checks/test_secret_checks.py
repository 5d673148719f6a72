"""Secrets set but empty or unresolved, and prod without a key (module_utils.checks.secret_checks)."""
import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks import secret_checks as S


def _secret(var, kind="key", set=True, defined=True, blank=False):
    return {"var": var, "kind": kind, "set": set, "defined": defined, "blank": blank}


@pytest.mark.parametrize("item,fragment", [
    (_secret("llmfleet_api_key", blank=True), "llmfleet_api_key is set but empty (or only white space)"),
    (_secret("llmfleet_api_key", defined=False), "llmfleet_api_key is set to a template that does not resolve"),
    (_secret("loadbalancer_api_keys", kind="keys", blank=True), "loadbalancer_api_keys is not a list of keys or has an empty entry"),
    (_secret("model_weights_token", kind="token", blank="True"), "remove the variable when the repository is public"),
    (_secret("vllm_image_registry_password", kind="password", blank=True), "anonymous pull"),
])
def test_a_secret_set_but_empty_or_unresolved_is_refused(item, fragment):
    [problem] = S.secret_problems([item])
    assert fragment in problem and "\n" not in problem


def test_secrets_that_are_unset_or_have_a_value_pass():
    assert S.secret_problems([_secret("llmfleet_api_key", set=False, defined=False, blank=True),
                              _secret("model_weights_token", kind="token"),
                              _secret("vllm_server_api_key", set="false", blank=True)]) == []


@pytest.mark.parametrize("check,refused", [
    ({"environment": "prod", "key_set": False, "scope": "wildcard", "address": "0.0.0.0"}, True),
    ({"environment": "prod", "key_set": "False", "scope": "public", "address": "203.0.113.5"}, True),
    ({"environment": "prod", "key_set": False, "scope": "loopback", "address": "127.0.0.1"}, False),
    ({"environment": "prod", "key_set": True, "scope": "wildcard", "address": "0.0.0.0"}, False),
    ({"environment": "dev", "key_set": False, "scope": "wildcard", "address": "0.0.0.0"}, False),
])
def test_production_without_a_key_is_refused_unless_the_endpoint_stays_on_the_host(check, refused):
    problems = S.secret_problems([], dict(check, address_var="vllm_server_edge_bind_address"))
    assert bool(problems) == refused
    if refused:
        assert "llmfleet_environment is prod and no API key is set" in problems[0]
        assert "vllm_server_edge_bind_address: 127.0.0.1" in problems[0]


@pytest.mark.parametrize("check,refused", [
    ({"environment": "prod", "tls": False, "scope": "wildcard", "address": "0.0.0.0"}, True),
    ({"environment": "prod", "tls": "false", "scope": "private", "address": "10.0.0.5"}, True),
    ({"environment": "prod", "tls": False, "scope": "loopback", "address": "127.0.0.1"}, False),
    ({"environment": "prod", "tls": True, "scope": "wildcard", "address": "0.0.0.0"}, False),
    ({"environment": "prod", "scope": "wildcard", "address": "0.0.0.0"}, False),
    ({"environment": "dev", "tls": False, "scope": "wildcard", "address": "0.0.0.0"}, False),
])
def test_production_with_tls_off_is_refused_unless_the_listener_stays_on_the_host(check, refused):
    problems = S.secret_problems([], dict(check, key_set=True, address_var="vllm_server_edge_bind_address"))
    assert bool(problems) == refused
    if refused:
        assert problems == ["llmfleet_environment is prod and llmfleet_tls is false, so the API key, every prompt and "
                            "every completion cross the network in clear to %s (%s). Keep TLS on (the default), or "
                            "bind vllm_server_edge_bind_address to 127.0.0.1 behind a TLS proxy of your own."
                            % (check["address"], check["scope"])]
