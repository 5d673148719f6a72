"""The TLS overhead benchmark (tests/bench/tls_ttft.py): the twins of the edge it measures against, the check that
they differ from the edge in TLS only, and the arithmetic of its report."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import tls_ttft  # noqa: E402

EDGE = """global
    stats socket /run/llmfleet-edge/admin.sock mode 600 level admin
    ssl-default-bind-options ssl-min-ver TLSv1.2 no-tls-tickets

defaults
    mode http

frontend llmfleet_edge_0
    bind 0.0.0.0:8000 ssl crt /etc/llmfleet/tls/edge.pem
    default_backend llmfleet_replica_0

backend llmfleet_replica_0
    server replica_0 127.0.0.1:18000

frontend llmfleet_edge_1
    bind [::]:8001 ssl crt /etc/llmfleet/tls/edge.pem verify optional ca-file /etc/llmfleet/tls/ca.crt
    http-request deny deny_status 403 if !{ ssl_c_used } !{ src 127.0.0.0/8 ::1 }
"""


def test_the_plain_twin_is_the_same_edge_without_tls_on_other_ports_and_its_own_socket():
    twin = tls_ttft.edge_twin(EDGE, 1000, "/run/twin.pid")
    assert "    bind 0.0.0.0:9000\n" in twin and "    bind [::]:9001\n" in twin
    # Mutual TLS goes with TLS: the client verification and the rule that needs a client certificate.
    assert "ssl" not in twin.split("defaults", 1)[1]
    assert "stats socket /run/twin.pid.sock mode 600" in twin
    # The replica behind it is the same one, and nothing else changed.
    assert "    server replica_0 127.0.0.1:18000\n" in twin
    assert "http-no-delay" not in twin
    assert tls_ttft.twin_differences(EDGE, twin) == []


def test_the_no_delay_twins_differ_from_each_other_in_tls_only():
    with_tls = tls_ttft.edge_twin(EDGE, 2000, "/run/a.pid", tls=True, no_delay=True)
    plain = tls_ttft.edge_twin(EDGE, 3000, "/run/b.pid", no_delay=True)
    assert "defaults\n    option http-no-delay\n    mode http\n" in with_tls
    assert "    bind 0.0.0.0:10000 ssl crt /etc/llmfleet/tls/edge.pem\n" in with_tls
    assert "    bind 0.0.0.0:11000\n" in plain
    assert tls_ttft.twin_differences(with_tls, plain) == []
    # ... and from the edge by the option.
    assert tls_ttft.twin_differences(EDGE, plain) != []


def test_a_twin_that_changed_more_than_tls_is_caught():
    twin = tls_ttft.edge_twin(EDGE, 1000, "/run/twin.pid").replace("127.0.0.1:18000", "127.0.0.1:18001")
    assert tls_ttft.twin_differences(EDGE, twin) == [
        ("    server replica_0 127.0.0.1:18000", "    server replica_0 127.0.0.1:18001")]
    assert tls_ttft.twin_differences(EDGE, twin + "    timeout server 1s\n")[-1] == ("<16 lines>", "<17 lines>")


def _runs(connect, handshake, headers, ttfts):
    return [{"connect": connect, "handshake": handshake, "headers": headers, "ttft": t} for t in ttfts]


def test_the_report_gives_medians_quartiles_the_handshake_alone_and_the_overhead():
    samples = {"edge_https": _runs(0.2, 2.0, 9.0, [20, 22, 500, 21, 19]),
               "twin_http": _runs(0.2, 0.2, 30.0, [31, 30, 29, 400, 33])}
    medians = tls_ttft.summarize(samples)
    assert medians["edge_https"]["ttft"] == 21 and medians["twin_http"]["ttft"] == 31
    assert medians["edge_https"]["tls_handshake"] == pytest.approx(1.8)
    assert medians["twin_http"]["tls_handshake"] == 0
    assert medians["edge_https"]["headers"] == 9.0
    assert (medians["edge_https"]["ttft_q1"], medians["edge_https"]["ttft_q3"]) == (19.5, 261.0)
    # Paired within each round: -11, -8, 471, -379, -14.
    assert tls_ttft.overhead(medians, samples, "edge_https", "twin_http") == {
        "https": "edge_https", "http": "twin_http", "ttft_ms": -10, "ttft_paired_ms": -11,
        "handshake_ms": pytest.approx(1.8)}
