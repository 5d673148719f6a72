"""The TLS overhead benchmark (tests/bench/tls_ttft.py): the plain twin of the edge it measures against."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import tls_ttft  # noqa: E402

EDGE = """global
    stats socket /run/llmfleet-edge/admin.sock mode 600 level admin
    ssl-default-bind-options ssl-min-ver TLSv1.2 no-tls-tickets

frontend llmfleet_edge_0
    bind 0.0.0.0:8000 ssl crt /etc/llmfleet/tls/edge.pem
    default_backend llmfleet_replica_0

backend llmfleet_replica_0
    server replica_0 127.0.0.1:18000

frontend llmfleet_edge_1
    bind [::]:8001 ssl crt /etc/llmfleet/tls/edge.pem
"""


def test_the_twin_is_the_same_edge_without_tls_on_other_ports_and_its_own_socket():
    twin = tls_ttft.plain_twin(EDGE, 1000, "/run/twin.pid")
    assert "    bind 0.0.0.0:9000\n" in twin and "    bind [::]:9001\n" in twin
    assert "ssl crt" not in twin
    assert "stats socket /run/twin.pid.sock mode 600" in twin
    # The replica behind it is the same one.
    assert "    server replica_0 127.0.0.1:18000\n" in twin
