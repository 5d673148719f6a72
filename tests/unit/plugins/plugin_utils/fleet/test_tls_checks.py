"""The checks of a certificate the user brings (plugin_utils/fleet/tls_checks.py), on real certificates made here."""
import datetime
import ipaddress

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.tls_checks import CA, CERT, KEY, certificate_problems

NOW = datetime.datetime(2026, 12, 5, tzinfo=datetime.timezone.utc)


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _pem(obj):
    if isinstance(obj, x509.Certificate):
        return obj.public_bytes(serialization.Encoding.PEM).decode()
    return obj.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _cert(key, issuer_key, issuer_name, name, sans=(), days=(-1, 90), ca=False):
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer_name or subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(NOW + datetime.timedelta(days=days[0]))
               .not_valid_after(NOW + datetime.timedelta(days=days[1])))
    if ca:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
    if sans:
        names = [x509.IPAddress(ipaddress.ip_address(s)) if s[0].isdigit() else x509.DNSName(s) for s in sans]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


@pytest.fixture(scope="module")
def pki():
    ca_key, other_ca_key, host_key = _key(), _key(), _key()
    ca = _cert(ca_key, ca_key, None, "fleet CA", ca=True, days=(-1, 3650))
    other_ca = _cert(other_ca_key, other_ca_key, None, "fleet CA", ca=True, days=(-1, 3650))
    return {"ca_key": ca_key, "ca": ca, "other_ca": other_ca, "host_key": host_key,
            "host": _cert(host_key, ca_key, ca.subject, "gpu1", ("gpu1", "10.0.0.5"))}


def _files(cert, key, ca, key_mode="0600"):
    return {CERT: {"path": "/c/gpu1.crt", "exists": True, "content": _pem(cert)},
            KEY: {"path": "/c/gpu1.key", "exists": True, "content": _pem(key), "mode": key_mode},
            CA: {"path": "/c/ca.crt", "exists": True, "content": _pem(ca)}}


def test_a_good_certificate_passes(pki):
    assert certificate_problems(_files(pki["host"], pki["host_key"], pki["ca"]), ["gpu1", "10.0.0.5"], NOW, 30) == []


def test_a_key_that_does_not_match_the_certificate_is_refused(pki):
    [problem] = certificate_problems(_files(pki["host"], _key(), pki["ca"]), ["gpu1"], NOW, 30)
    assert problem.startswith("llmfleet_tls_cert_file and llmfleet_tls_key_file: the key does not match")


def test_an_expired_or_expiring_certificate_is_refused(pki):
    expired = _cert(pki["host_key"], pki["ca_key"], pki["ca"].subject, "gpu1", ("gpu1",), days=(-90, -1))
    [problem] = certificate_problems(_files(expired, pki["host_key"], pki["ca"]), ["gpu1"], NOW, 30)
    assert "expired on 2026-12-04; renew it" in problem
    soon = _cert(pki["host_key"], pki["ca_key"], pki["ca"].subject, "gpu1", ("gpu1",), days=(-90, 10))
    [problem] = certificate_problems(_files(soon, pki["host_key"], pki["ca"]), ["gpu1"], NOW, 30)
    assert "expires on 2026-12-15, within llmfleet_tls_renew_days (30)" in problem


def test_a_name_clients_use_that_the_certificate_lacks_is_refused(pki):
    [problem] = certificate_problems(_files(pki["host"], pki["host_key"], pki["ca"]), ["gpu1", "10.0.0.6"], NOW, 30)
    assert problem.startswith("llmfleet_tls_cert_file:") and "do not cover 10.0.0.6" in problem
    wildcard = _cert(pki["host_key"], pki["ca_key"], pki["ca"].subject, "gpu1", ("*.fleet.example",))
    assert certificate_problems(_files(wildcard, pki["host_key"], pki["ca"]), ["gpu1.fleet.example"], NOW, 30) == []


def test_a_ca_that_did_not_sign_the_certificate_is_refused_even_with_the_same_name(pki):
    [problem] = certificate_problems(_files(pki["host"], pki["host_key"], pki["other_ca"]), ["gpu1"], NOW, 30)
    assert problem.startswith("llmfleet_tls_ca_file:") and "did not sign the certificate" in problem


def test_a_ca_bundle_passes_where_one_of_its_cas_signed_the_certificate(pki):
    """A rotation's overlap: the old and the new CA in one llmfleet_tls_ca_file, the certificate from either."""
    files = _files(pki["host"], pki["host_key"], pki["other_ca"])
    files[CA]["content"] = _pem(pki["other_ca"]) + _pem(pki["ca"])
    assert certificate_problems(files, ["gpu1"], NOW, 30) == []
    files[CA]["content"] = _pem(pki["other_ca"]) + _pem(pki["other_ca"])
    [problem] = certificate_problems(files, ["gpu1"], NOW, 30)
    assert "CN=fleet CA + CN=fleet CA (its issuer: CN=fleet CA) did not sign" in problem


def test_a_key_readable_by_others_is_refused(pki):
    [problem] = certificate_problems(_files(pki["host"], pki["host_key"], pki["ca"], "0644"), ["gpu1"], NOW, 30)
    assert problem == "llmfleet_tls_key_file: /c/gpu1.key is mode 0644, readable by others; chmod 0600 it."


def test_missing_and_unparsable_files_are_named(pki):
    files = _files(pki["host"], pki["host_key"], pki["ca"])
    files[CA] = {"path": "/c/none.crt", "exists": False}
    files[KEY]["content"] = "not a key"
    problems = certificate_problems(files, ["gpu1"], NOW, 30)
    assert problems[0].startswith("llmfleet_tls_key_file: /c/gpu1.key is not a PEM private key")
    assert problems[1].startswith("llmfleet_tls_ca_file: /c/none.crt does not exist on the controller")
    assert len(problems) == 2
