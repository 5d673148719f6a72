"""plugins/lookup/conventions.py: the names roles and templates take from module_utils/host_agent/conventions.py."""
import fnmatch
import re

from ansible_collections.llmfleet.vllm.plugins.lookup.conventions import LookupModule
from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent import conventions as CV


def test_the_lookup_returns_one_dict_of_the_shared_names():
    [names] = LookupModule().run([], variables={})
    assert names["edge_unit"] == CV.EDGE_UNIT
    assert names["watchdog_unit"] == CV.WATCHDOG_UNIT and names["watchdog_timer"] == CV.WATCHDOG_TIMER
    # The template unit, a glob that matches every instance of it, and a pattern that matches every container.
    assert names["replica_unit_template"] == CV.replica_unit("")
    assert names["replica_unit_prefix"] + "0.service" == CV.replica_unit("0")
    assert re.fullmatch(fnmatch.translate(names["replica_units_glob"]), CV.replica_unit("gpu-01"))
    assert re.match(names["replica_containers_regex"], CV.replica_container("0"))
    assert not re.match(names["replica_containers_regex"], "llmfleet-bench-0")


def test_the_tls_files_of_a_host_sit_in_one_directory():
    [names] = LookupModule().run([], variables={})
    assert names["tls_ca_file"] == CV.TLS_CA_FILE == "/etc/llmfleet/tls/ca.crt"
    assert (names["tls_edge_pem"], names["tls_balancer_pem"]) == (CV.tls_pem("edge"), CV.tls_pem("balancer"))
    assert all(names[k].startswith(names["tls_dir"] + "/") for k in ("tls_ca_file", "tls_edge_pem", "tls_balancer_pem"))


def test_the_replicas_default_port_is_the_conventions_one():
    [names] = LookupModule().run([], variables={})
    assert names["replica_port_base"] == CV.REPLICA_PORT_BASE == 8000
