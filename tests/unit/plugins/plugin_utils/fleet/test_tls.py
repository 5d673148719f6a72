"""TLS on the edge and the balancer, as data (plugin_utils/fleet/tls.py)."""
import pytest

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.tls import haproxy_tls, subject_alt_names

ON = {"enabled": True, "pem": "/etc/llmfleet/tls/balancer.pem", "ca_file": "/etc/llmfleet/tls/ca.crt"}


def test_every_ssl_bind_and_server_gets_tls_1_2_at_least_and_only_aead_ciphers():
    tls = haproxy_tls([], ON)
    options = [line for line in tls["global"] if "-options " in line]
    assert options == ["ssl-default-bind-options ssl-min-ver TLSv1.2 no-tls-tickets",
                       "ssl-default-server-options ssl-min-ver TLSv1.2 no-tls-tickets"]
    prefixes = ("ssl-default-bind-ciphers ", "ssl-default-server-ciphers ")
    ciphers = [line.split()[1] for line in tls["global"] if line.startswith(prefixes)]
    assert len(ciphers) == 2
    for suite in ciphers[0].split(":"):
        assert suite.startswith("ECDHE-") and ("GCM" in suite or "CHACHA20" in suite), suite
    assert tls["bind"] == " ssl crt /etc/llmfleet/tls/balancer.pem"


def test_the_balancer_verifies_each_edge_against_the_ca_and_its_name_where_it_has_one():
    ca = " ssl verify required ca-file /etc/llmfleet/tls/ca.crt"
    tls = haproxy_tls([{"name": "gpu1-0", "host": "gpu1", "address": "10.0.0.1", "port": 8000},
                       {"name": "gpu1-1", "host": "gpu1", "address": "10.0.0.1", "port": 8001, "edge_port": 8000},
                       {"name": "10.0.0.2-0", "host": "10.0.0.2", "address": "10.0.0.2", "port": 8000},
                       {"name": "v6-0", "host": "v6", "address": "fd00::3", "port": 8000},
                       {"name": "bare-0", "host": "bare", "address": "10.0.0.4", "port": 8000, "tls": False}], ON)
    # By the address:port a server line dials: the replica's port, or the edge's when the balancer routes by model.
    assert tls["servers"] == {
        "10.0.0.1:8000": ca + " verifyhost gpu1", "10.0.0.1:8001": ca + " verifyhost gpu1",
        # HAProxy matches verifyhost against DNS names only: an address gets the chain check.
        "10.0.0.2:8000": ca, "[fd00::3]:8000": ca + " verifyhost v6",
        # A host without an edge (its replicas speak plain HTTP): no TLS to it.
        "10.0.0.4:8000": ""}
    # A server the backends do not name (loadbalancer_backends without a host): the chain check.
    assert tls["server"] == ca


def test_with_tls_off_the_configuration_is_plain_http_as_before():
    assert haproxy_tls([{"name": "a", "host": "h", "address": "10.0.0.1", "port": 8000}], {"enabled": False}) == {
        "enabled": False, "global": [], "bind": "", "server": "", "servers": {}, "client_gate": []}


def test_mutual_tls_the_balancer_presents_its_certificate_to_each_edge_it_dials_over_tls():
    tls = haproxy_tls([{"name": "gpu1-0", "host": "gpu1", "address": "10.0.0.1", "port": 8000},
                       {"name": "bare-0", "host": "bare", "address": "10.0.0.4", "port": 8000, "tls": False}],
                      dict(ON, client_pem="/etc/llmfleet/tls/balancer.pem"))
    assert tls["servers"]["10.0.0.1:8000"].endswith(" verifyhost gpu1 crt /etc/llmfleet/tls/balancer.pem")
    assert tls["server"].endswith(" crt /etc/llmfleet/tls/balancer.pem")
    # A plain member gets no certificate either.
    assert tls["servers"]["10.0.0.4:8000"] == ""
    # The balancer's own bind asks its clients for none.
    assert "verify" not in tls["bind"] and tls["client_gate"] == []


def test_mutual_tls_an_edge_refuses_a_client_off_the_host_without_a_certificate_the_ca_signed():
    tls = haproxy_tls([], dict(ON, verify_clients=True))
    assert tls["bind"] == " ssl crt /etc/llmfleet/tls/balancer.pem verify optional ca-file /etc/llmfleet/tls/ca.crt"
    # The host's own clients (loopback: the smoke test, the gate) hold no certificate and keep working.
    assert tls["client_gate"] == ["http-request deny deny_status 403 if !{ ssl_c_used } !{ src 127.0.0.0/8 ::1 }"]
    assert " crt " not in tls["server"]
    # An edge bound to one address: the host's own clients dial that address, from that address; a wildcard adds none.
    for bind, allowed in (("10.0.0.5", "127.0.0.0/8 ::1 10.0.0.5"), ("[fd00::5]", "127.0.0.0/8 ::1 fd00::5"),
                          ("0.0.0.0", "127.0.0.0/8 ::1"), ("::", "127.0.0.0/8 ::1")):
        gate = haproxy_tls([], dict(ON, verify_clients=True, local_addresses=[bind]))["client_gate"]
        assert gate == ["http-request deny deny_status 403 if !{ ssl_c_used } !{ src %s }" % allowed], bind


def test_without_mutual_tls_nothing_asks_for_or_presents_a_client_certificate():
    tls = haproxy_tls([{"name": "gpu1-0", "host": "gpu1", "address": "10.0.0.1", "port": 8000}],
                      dict(ON, client_pem="", verify_clients=False))
    assert "verify" not in tls["bind"] and " crt " not in tls["servers"]["10.0.0.1:8000"] and tls["client_gate"] == []


def test_sans_name_each_name_and_address_once_in_order():
    sans = subject_alt_names(["gpu1", "GPU1", "", "10.0.0.5", "localhost"], ["10.0.0.5", "127.0.0.1", "[::1]"])
    assert sans == ["DNS:gpu1", "IP:10.0.0.5", "DNS:localhost", "IP:127.0.0.1", "IP:::1"]


def test_a_ca_rotation_trusts_old_and_new_ca_through_the_overlap_and_each_phase_can_run_twice():
    from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.tls import ca_rotation
    present = {"next": False, "previous": False}
    seen = []
    for phase in ("", "start", "finish", "end", ""):
        for _run in range(2):  # the edges' play, then the balancer's: the second run changes nothing
            plan = ca_rotation(phase, present)
            present = {"next": "next" in plan["make"], "previous": "previous/ca.crt" in plan["bundle"]}
        seen.append((phase, plan["bundle"]))
    assert seen == [("", ["ca.crt"]),
                    # The next CA is trusted everywhere before it signs anything.
                    ("start", ["ca.crt", "next/ca.crt"]),
                    # It signs now (the old ca.crt moved to previous/), and the old one is still trusted.
                    ("finish", ["ca.crt", "previous/ca.crt"]),
                    ("end", ["ca.crt"]), ("", ["ca.crt"])]


def test_a_ca_rotation_promotes_only_a_next_ca_that_exists_and_refuses_an_unknown_phase():
    from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.tls import ca_rotation
    assert ca_rotation("finish", {"next": True, "previous": False})["promote"] is True
    # finish again (the balancer's play after the edges'): nothing left to promote, the overlap holds.
    again = ca_rotation("finish", {"next": False, "previous": True})
    assert again["promote"] is False and again["bundle"] == ["ca.crt", "previous/ca.crt"]
    assert ca_rotation("start", {})["make"] == ["", "next"]
    assert ca_rotation("end", {"next": False, "previous": True})["drop_previous"] is True
    with pytest.raises(ValueError, match="llmfleet_tls_ca_rotation must be one of"):
        ca_rotation("rotate", {})
