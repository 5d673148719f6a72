"""plugins/filter/tls.py: the TLS parts of the HAProxy configurations, a host certificate's SANs and the checks of a
certificate the user brings, as the loadbalancer role calls them."""
import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.filter.tls import FilterModule

F = FilterModule().filters()


def test_haproxy_tls_refuses_settings_it_cannot_print():
    with pytest.raises(AnsibleFilterError, match="enabled, pem, ca_file"):
        F["haproxy_tls"]([], {"enabled": True, "pem": "/p.pem"})
    with pytest.raises(AnsibleFilterError, match="list of dicts with address"):
        F["haproxy_tls"]([{"host": "h"}], {"enabled": False})
    assert F["haproxy_tls"]([], {"enabled": False})["bind"] == ""


def test_sans_take_names_and_addresses():
    assert F["tls_subject_alt_names"](["gpu1"], ["10.0.0.5", ""]) == ["DNS:gpu1", "IP:10.0.0.5"]


def test_the_certificate_checks_take_the_three_files_as_a_list(local_pki):
    def entry(var, path, **extra):
        with open(path) as fh:
            return dict({"var": var, "path": path, "exists": True, "content": fh.read()}, **extra)
    files = [entry("llmfleet_tls_cert_file", local_pki["cert"]),
             entry("llmfleet_tls_key_file", local_pki["key"], mode="0600"),
             entry("llmfleet_tls_ca_file", local_pki["ca"])]
    assert F["tls_certificate_problems"](files, ["localhost", "127.0.0.1"], 14) == []
    assert "do not cover gpu9" in F["tls_certificate_problems"](files, ["gpu9"], 14)[0]
    with pytest.raises(AnsibleFilterError, match=r"\[\{var, path, exists, content, mode\}\]"):
        F["tls_certificate_problems"]({"llmfleet_tls_cert_file": {}}, [], 14)


def test_without_cryptography_on_the_controller_the_check_says_what_to_install(monkeypatch):
    from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import tls_checks
    monkeypatch.setattr(tls_checks, "CRYPTOGRAPHY_ERROR", ImportError("No module named 'cryptography'"))
    with pytest.raises(AnsibleFilterError, match="needs the Python package cryptography on the controller"):
        F["tls_certificate_problems"]([{"var": "llmfleet_tls_cert_file"}], [], 14)
