"""The network a model group over several hosts needs (issue #30): RDMA / GPUDirect detection on captured sysfs-like
trees (tests/fixtures/network, test doubles for NICs that do not exist here), the NCCL socket interface, routes,
MTU mismatches, and what a container needs for RDMA."""
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks import network_facts as N

FIX = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "network"))


def facts(name):
    return N.rdma_facts(N.read_rdma_tree(os.path.join(FIX, name)))


def test_infiniband_with_gpudirect_rdma():
    r = facts("ib-gdr")
    assert r["data_path"] == "ib_gdr" and r["gpudirect_rdma"] and r["warnings"] == []
    assert [d["name"] for d in r["devices"]] == ["mlx5_0", "mlx5_1"]
    assert r["active_ports"] == ["mlx5_0/1", "mlx5_1/1"]
    assert r["link_layers"] == ["InfiniBand"]
    assert r["devices"][0]["ports"][0] == {"port": 1, "state": "ACTIVE", "phys_state": "LINKUP",
                                           "link_layer": "InfiniBand", "rate": "400 Gb/sec (4X NDR)"}
    assert r["devices"][0]["netdevs"] == ["ibp12s0"]
    assert r["uverbs_devices"] == ["uverbs0", "uverbs1"] and r["rdma_cm"] and r["peermem_module"] == "nvidia_peermem"
    assert N.container_rdma_options(r) == {
        "devices": ["/dev/infiniband/uverbs0", "/dev/infiniband/uverbs1", "/dev/infiniband/rdma_cm"],
        "cap_add": ["IPC_LOCK"], "ulimits": ["memlock:-1:-1"]}


def test_roce_without_the_peer_memory_module_warns_and_names_the_fix():
    r = facts("roce-no-peermem")
    assert r["data_path"] == "ib" and not r["gpudirect_rdma"] and r["link_layers"] == ["Ethernet"]
    assert len(r["warnings"]) == 1
    assert "nvidia_peermem module is not loaded" in r["warnings"][0]
    assert "modprobe nvidia_peermem" in r["warnings"][0] and "mlx5_0/1" in r["warnings"][0]
    assert N.container_rdma_options(r)["devices"] == ["/dev/infiniband/uverbs0", "/dev/infiniband/rdma_cm"]


def test_a_down_port_falls_back_to_sockets():
    r = facts("ib-port-down")
    assert r["data_path"] == "socket" and r["active_ports"] == []
    assert "no ACTIVE port (mlx5_0 port 1 DOWN)" in r["warnings"][0]
    assert "TCP sockets" in r["warnings"][0]
    assert N.container_rdma_options(r) == {"devices": [], "cap_add": [], "ulimits": []}


def test_no_rdma_device_at_all():
    r = facts("ethernet-only")
    assert r["data_path"] == "socket" and r["devices"] == [] and r["peermem_module"] is None
    assert "/sys/class/infiniband is empty" in r["warnings"][0]


def test_an_active_port_without_verbs_devices_is_still_sockets():
    tree = N.read_rdma_tree(os.path.join(FIX, "ib-gdr"))
    tree["dev_infiniband"] = []
    r = N.rdma_facts(tree)
    assert r["data_path"] == "socket" and "modprobe ib_uverbs" in r["warnings"][0]


def test_the_older_peer_memory_module_counts_from_proc_modules():
    tree = N.read_rdma_tree(os.path.join(FIX, "roce-no-peermem"))
    tree["proc_modules"] += "\nnv_peer_mem 16384 0 - Live 0x0000000000000000 (OE)"
    assert N.rdma_facts(tree)["data_path"] == "ib_gdr"


def test_interfaces_from_sysfs():
    ifs = N.read_interfaces(os.path.join(FIX, "ib-gdr"))
    assert ifs["eno1"] == {"mtu": 1500, "operstate": "up", "type": "1"}
    assert ifs["ibp12s0"]["type"] == N.ARPHRD_INFINIBAND and ifs["ibp12s0"]["mtu"] == 4092


def _read(name):
    with open(os.path.join(FIX, name)) as fh:
        return fh.read()


def test_routes_in_both_of_iproute2s_formats():
    assert N.parse_route_get(_read("ip_route_get.json")) == {"dev": "ens1f0np0", "src": "10.20.0.11", "gateway": None}
    via_gateway = {"dev": "eno1", "src": "10.20.0.11", "gateway": "10.20.0.1"}
    assert N.parse_route_get(_read("ip_route_get_gw.json")) == via_gateway
    assert N.parse_route_get(_read("ip_route_get.txt")) == via_gateway
    with pytest.raises(N.NetworkFactsError, match="Network is unreachable"):
        N.parse_route_get("RTNETLINK answers: Network is unreachable")


IFS = N.read_interfaces(os.path.join(FIX, "roce-no-peermem"))


def test_auto_chooses_the_interface_of_the_route_to_the_other_hosts():
    routes = {"gpu-b": {"dev": "ens1f0np0", "src": "10.20.0.11"}, "gpu-c": {"dev": "ens1f0np0", "src": "10.20.0.11"}}
    c = N.choose_socket_ifname(routes, "auto", IFS, "gpu-a")
    assert c == {"ifname": "ens1f0np0", "problems": [], "warnings": []}


def test_routes_through_two_interfaces_are_a_problem_naming_both():
    routes = {"gpu-b": {"dev": "ens1f0np0"}, "gpu-c": {"dev": "eno1"}}
    c = N.choose_socket_ifname(routes, "auto", IFS, "gpu-a")
    assert c["ifname"] is None
    assert "gpu-a reaches the other hosts of the group through different interfaces" in c["problems"][0]
    assert "gpu-c via eno1" in c["problems"][0] and "gpu-b via ens1f0np0" in c["problems"][0]
    assert "llmfleet_nccl_socket_ifname" in c["problems"][0]


def test_a_given_interface_is_checked():
    routes = {"gpu-b": {"dev": "ens1f0np0"}}
    assert N.choose_socket_ifname(routes, "ens1f0np0", IFS, "gpu-a")["problems"] == []
    assert N.choose_socket_ifname(routes, "ens1", IFS, "gpu-a")["problems"] == []     # NCCL's prefix match
    bad = N.choose_socket_ifname(routes, "ib0", IFS, "gpu-a", var="vllm_server_nccl_socket_ifname")
    assert "gpu-a has no interface ib0 (vllm_server_nccl_socket_ifname); it has ens1f0np0, lo" in bad["problems"][0]
    other = N.choose_socket_ifname(routes, "lo", IFS, "gpu-a")
    assert other["problems"] == [] and "leave through ens1f0np0" in other["warnings"][0]


def test_a_down_route_interface_is_a_problem():
    ifs = dict(IFS, ens1f0np0=dict(IFS["ens1f0np0"], operstate="down"))
    c = N.choose_socket_ifname({"gpu-b": {"dev": "ens1f0np0"}}, "auto", ifs, "gpu-a")
    assert "interface ens1f0np0 (the route to the other hosts) is down" in c["problems"][0]


def test_mtu_mismatch_names_every_host_and_the_fix():
    assert N.mtu_problems({"a": {"ifname": "ens1", "mtu": 9000}, "b": {"ifname": "ens1", "mtu": 9000}}) == []
    p = N.mtu_problems({"a": {"ifname": "ens1", "mtu": 9000}, "b": {"ifname": "eth0", "mtu": 1500}})
    assert len(p) == 1
    assert "b (eth0) MTU 1500; a (ens1) MTU 9000" in p[0] and "mtu 9000" in p[0]


def test_hosts_on_different_data_paths():
    assert N.group_rdma_problems({"a": facts("ib-gdr"), "b": facts("ib-gdr")}) == []
    p = N.group_rdma_problems({"a": facts("ib-gdr"), "b": facts("ethernet-only")})
    assert "ib_gdr: a; socket: b" in p[0]


# --- the group: ports, listeners, messages, group-wide problems ---------------------------------------------------

GROUP = ["gpu-a", "gpu-b", "gpu-c"]
ADDR = {"gpu-a": "10.20.0.11", "gpu-b": "10.20.0.12", "gpu-c": "10.20.0.13"}


def test_the_leader_is_reached_on_its_master_port_and_every_host_on_the_probe_port():
    assert N.group_port_targets(GROUP, "gpu-b", ADDR, [29500], 29599) == [
        {"host": "gpu-a", "address": "10.20.0.11", "port": 29500, "kind": "master"},
        {"host": "gpu-a", "address": "10.20.0.11", "port": 29599, "kind": "probe"},
        {"host": "gpu-c", "address": "10.20.0.13", "port": 29599, "kind": "probe"}]
    leader = N.group_port_targets(GROUP, "gpu-a", ADDR, [29500], 0)
    assert leader == []                                   # the leader reaches no master port; probe skipped
    assert N.group_port_targets(["gpu-a"], "gpu-a", ADDR, [29500], 29599) == []
    assert N.group_port_targets(GROUP, "elsewhere", ADDR, [29500], 29599) == []


def test_who_listens_on_what_and_how_many_connections_it_waits_for():
    assert N.listen_ports(GROUP, "gpu-a", [29500], 29599) == [{"port": 29500, "expect": 2},
                                                              {"port": 29599, "expect": 2}]
    assert N.listen_ports(GROUP, "gpu-c", [29500], 29599) == [{"port": 29599, "expect": 2}]


def test_an_unreachable_port_names_both_hosts_the_port_and_the_fix():
    t = {"host": "gpu-a", "address": "10.20.0.11", "port": 29500, "kind": "master"}
    m = N.unreachable_message("gpu-b", t, "Timeout when waiting for 10.20.0.11:29500")
    assert m.startswith("gpu-b cannot reach 10.20.0.11:29500 on gpu-a (the master port")
    assert "vllm_server_multinode_master_port" in m and "a firewall drops it" in m and "Open TCP 29500" in m
    p = N.unreachable_message("gpu-b", dict(t, kind="probe", port=29599), "Connection refused")
    assert "preflight_group_probe_port" in p and "refused" in p


def test_group_problems_and_warnings():
    same = {"a": {"nccl_socket_ifname": "ens1", "mtu": 9000, "rdma": facts("ib-gdr")},
            "b": {"nccl_socket_ifname": "ens1", "mtu": 9000, "rdma": facts("ib-gdr")}}
    assert N.group_network_problems(same) == {"problems": [], "warnings": []}
    mixed = dict(same, b={"nccl_socket_ifname": "eth0", "mtu": 1500, "rdma": facts("ethernet-only")})
    r = N.group_network_problems(mixed)
    assert "b (eth0) MTU 1500; a (ens1) MTU 9000" in r["problems"][0]
    assert "ib_gdr: a; socket: b" in r["warnings"][0]


def test_addresses_are_ansible_host_else_the_inventory_name():
    hv = {"gpu-a": {"ansible_host": "10.20.0.11"}, "gpu-b": {}}
    assert N.group_addresses(["gpu-a", "gpu-b"], hv) == {"gpu-a": "10.20.0.11", "gpu-b": "gpu-b"}


def test_addresses_are_the_ones_the_ranks_use_before_a_name():
    """A container-named host (Molecule's docker connection: ansible_host is the container's name, which the other
    hosts cannot resolve) is checked at the address its rank advertises: its default route's, or the setting."""
    hv = {"node-a": {"ansible_host": "node-a", "ansible_facts": {"default_ipv4": {"address": "172.17.0.5"}}},
          "node-b": {"ansible_host": "node-b", "vllm_server_multinode_address": "10.0.0.12",
                     "ansible_facts": {"default_ipv4": {"address": "172.17.0.6"}}}}
    assert N.group_addresses(["node-a", "node-b"], hv) == {"node-a": "172.17.0.5", "node-b": "10.0.0.12"}


def test_the_filter_reads_wait_for_results_under_failed_when_false():
    from ansible_collections.llmfleet.vllm.plugins.filter.preflight_network import llmfleet_group_unreachable
    t = {"host": "gpu-a", "address": "10.20.0.11", "port": 29500, "kind": "master"}
    results = [{"item": t, "state": "started", "port": 29500, "elapsed": 0, "failed": False},
               {"item": dict(t, port=29599, kind="probe"), "msg": "Timeout when waiting for 10.20.0.11:29599",
                "elapsed": 5, "failed": False},
               {"item": t, "skipped": True}]
    out = llmfleet_group_unreachable(results, "gpu-b")
    assert len(out) == 1 and "10.20.0.11:29599" in out[0]
