"""Make `ansible_collections.llmfleet.vllm` importable from this checkout (collections/ links back here)."""
import os
import sys

import pytest

COLLECTIONS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)


def install_host_package(libexec, docker=None):
    """What the vllm_server role installs on a serving host: the launchers (roles/vllm_server/files) and the
    host package beside them (host_package.package_files, the lookup's list). docker: a path that replaces
    /usr/bin/docker in the installed copy (for a TEST DOUBLE). Returns libexec."""
    import shutil

    from ansible_collections.llmfleet.vllm.plugins.plugin_utils.host_package import package_files

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    os.makedirs(os.path.join(str(libexec), "llmfleet_host"), exist_ok=True)
    for name in ("llmfleet-watchdog", "wait-healthy", "follow-container"):
        shutil.copy(os.path.join(root, "roles", "vllm_server", "files", name), os.path.join(str(libexec), name))
        os.chmod(os.path.join(str(libexec), name), 0o755)
    for entry in package_files(str(libexec)):
        content = entry["content"]
        if docker:
            content = content.replace('DOCKER = "/usr/bin/docker"', "DOCKER = %r" % str(docker))
        with open(entry["path"], "w") as fh:
            fh.write(content)
    return libexec


@pytest.fixture
def host_install():
    """install_host_package, for tests of the host tools as the role installs them."""
    return install_host_package


@pytest.fixture(scope="session")
def local_pki(tmp_path_factory):
    """A CA and a server certificate for 127.0.0.1 and localhost signed by it, made with cryptography as the
    collection's CA makes them: {dir, ca (ca.crt), cert, key, other_ca (a CA that signed nothing here)}."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    out = tmp_path_factory.mktemp("pki")

    def cert(key, signer, issuer, name, ca, sans=()):
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer or subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
        return builder.sign(signer, hashes.SHA256())

    def write(name, *objs):
        text = b"".join(o.public_bytes(serialization.Encoding.PEM) if isinstance(o, x509.Certificate) else
                        o.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()) for o in objs)
        (out / name).write_bytes(text)
        return str(out / name)

    ca_key, other_key, server_key = (ec.generate_private_key(ec.SECP256R1()) for _key in range(3))
    ca = cert(ca_key, ca_key, None, "test CA", True)
    server = cert(server_key, ca_key, ca.subject, "localhost", False,
                  [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    return {"dir": str(out), "ca": write("ca.crt", ca), "cert": write("server.crt", server),
            "key": write("server.key", server_key),
            "other_ca": write("other-ca.crt", cert(other_key, other_key, None, "test CA", True))}
