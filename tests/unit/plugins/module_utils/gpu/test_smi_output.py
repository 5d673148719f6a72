"""What nvidia-smi prints, parsed (plugins/module_utils/gpu/smi_output.py), over every GPU capture in
tests/fixtures/gpu."""
import glob
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu import gpu_links as L
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu import gpu_nvml as N
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu import smi_output as S

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "gpu")
H200 = os.path.join(FIX, "h200x2")


def read(*parts):
    with open(os.path.join(FIX, *parts)) as fh:
        return fh.read()


REAL_TOPO = sorted(glob.glob(os.path.join(FIX, "*.txt"))) + [os.path.join(H200, "topo-m.txt")]


REAL_TOPO = [p for p in REAL_TOPO if "synthetic-bad" not in p]


@pytest.mark.parametrize("path", REAL_TOPO, ids=os.path.basename)
def test_every_capture_parses_into_a_consistent_matrix(path):
    with open(path) as fh:
        topo = S.parse_topo_matrix(fh.read())
    idx = [g["index"] for g in topo["gpus"]]
    assert idx == list(range(len(idx)))
    # every ordered pair is present, symmetric, and a known link type
    for a in idx:
        for b in idx:
            if a != b:
                assert topo["links"][(a, b)] == topo["links"][(b, a)]
                assert L.normalize_link(topo["links"][(a, b)]) not in (None, "X")
    domains = L.nvlink_domains(idx, topo["links"])
    assert sorted(g for d in domains for g in d) == idx  # every GPU in exactly one domain
    for d in domains:
        for a in d:
            for b in d:
                if a != b:
                    assert L.nvlink_count(topo["links"][(a, b)]) > 0


def test_hgx_h20_nic_rows_and_legend():
    topo = S.parse_topo_matrix(read("hgx-h20-8gpu-nv18-8nic-mlx5.txt"))
    assert len(topo["gpus"]) == 8
    assert set(topo["links"].values()) == {"NV18"}
    assert [n["device"] for n in topo["nics"]] == ["mlx5_%d" % i for i in range(8)]
    assert topo["nics"][0]["links"][0] == "PIX" and topo["nics"][0]["links"][4] == "SYS"
    assert [g["numa_node"] for g in topo["gpus"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert topo["gpus"][4]["cpus"][0] == 48 and topo["gpus"][0]["cpu_affinity"] == "0-47,96-143"
    assert L.nvlink_domains(range(8), topo["links"]) == [list(range(8))]


def test_p4d_nv12_two_numa_nodes():
    topo = S.parse_topo_matrix(read("aws-p4d24xl-8x-a100-nv12-numa.txt"))
    assert set(topo["links"].values()) == {"NV12"}
    assert topo["gpus"][7]["numa_node"] == 1 and topo["gpus"][7]["gpu_numa_id"] is None


def test_pcie_only_hosts_have_singleton_domains():
    l40s = S.parse_topo_matrix(read("aws-g6e12xl-4x-l40s-pcie-node.txt"))
    assert set(l40s["links"].values()) == {"NODE"}
    assert L.nvlink_domains(range(4), l40s["links"]) == [[0], [1], [2], [3]]
    dual = S.parse_topo_matrix(read("dual-5090-pcie-phb.txt"))  # tabs, padded X, empty cell, p2p block after
    assert dual["links"][(0, 1)] == "PHB"
    assert [g["numa_node"] for g in dual["gpus"]] == [0, 0]


def test_single_gpu_matrix():
    topo = S.parse_topo_matrix(read("single-rtx4090.txt"))
    assert topo["gpus"][0]["numa_node"] == 0 and topo["links"] == {}
    assert L.nvlink_domains([0], topo["links"]) == [[0]]


def test_h200_capture_with_ansi_underline_header():
    text = read("h200x2", "topo-m.txt")
    assert "\x1b[4m" in text
    topo = S.parse_topo_matrix(text)
    assert topo["links"][(0, 1)] == "NV18"


def test_nvlink_pairs_bridged_over_pcie_and_old_nic_column():
    topo = S.parse_topo_matrix(read("synthetic-4x-nv4-pairs-mlx5.txt"))
    assert L.nvlink_domains(range(4), topo["links"]) == [[0, 1], [2, 3]]
    assert topo["nics"][0]["device"] == "mlx5_0"
    assert topo["gpus"][2]["numa_node"] == 1


def test_non_clique_nvlink_component_is_split_into_cliques():
    # 0-1-2 chain: 0 and 2 have no NVLink between them, so they cannot share a domain.
    links = {(0, 1): "NV2", (1, 2): "NV2", (0, 2): "SYS"}
    links.update({(b, a): t for (a, b), t in list(links.items())})
    doms = L.nvlink_domains([0, 1, 2], links)
    assert sorted(len(d) for d in doms) == [1, 2]
    assert [0, 2] not in doms


def test_unknown_cell_fails_naming_the_line():
    with pytest.raises(L.TopologyParseError, match=r"line 4: unknown link type 'QPI'"):
        S.parse_topo_matrix(read("synthetic-bad-cell.txt"))


@pytest.mark.parametrize("text,match", [
    ("GPU0 GPU1 Bogus Column\nGPU0 X PHB\n", r"line 1: unknown header column 'Bogus'"),
    ("        GPU0    GPU1\nGPU0     X      PHB\nGPU7    PHB      X\n", r"line 3: row 'GPU7'"),
    ("        GPU0    GPU1\nGPU0     X\n", r"line 2: expected 2 link cells"),
    ("        GPU0    GPU1   CPU Affinity\nGPU0  X  PHB  0-3  9  9\nGPU1 PHB X 0-3\n", r"line 2: expected 1 affinity"),
    ("        GPU0    GPU1\nGPU0    PHB     X\nGPU1    X    PHB\n", r"diagonal"),
    ("no matrix here\n", r"no header line"),
])
def test_unknown_shapes_fail_with_a_message(text, match):
    with pytest.raises(L.TopologyParseError, match=match):
        S.parse_topo_matrix(text)


def test_query_csv_real_capture_and_na_values():
    gpus, driver = S.parse_query_csv(read("h200x2", "query.csv"))
    assert driver == "580.159.04"
    assert gpus[1] == {"index": 1, "name": "NVIDIA H200", "uuid": "GPU-803e456b-865b-010c-063b-dcebba954682",
                       "memory_total_mib": 143771, "pci_bus_id": "00000000:00:07.0", "compute_capability": "9.0",
                       "mig_mode": "Disabled"}
    gpus, _unused = S.parse_query_csv("index, name, memory.total [MiB], mig.mode.current\n0, NVIDIA GeForce RTX 4090, "
                                      "24564 MiB, [N/A]\n")
    assert gpus[0]["mig_mode"] is None and gpus[0]["memory_total_mib"] == 24564


def test_query_csv_without_header_or_with_short_rows_fails():
    with pytest.raises(L.TopologyParseError, match="no 'index' column"):
        S.parse_query_csv("0, NVIDIA H200, 143771 MiB\n")
    with pytest.raises(L.TopologyParseError, match="line 2"):
        S.parse_query_csv("index, name\n0\n")


def test_xml_and_nvlink_status_of_the_h200_capture():
    x = S.parse_smi_xml(read("h200x2", "q.xml"))
    assert x["driver_version"] == "580.159.04" and x["cuda_version"] == "13.0"
    assert [g["fabric_state"] for g in x["gpus"]] == ["Completed", "Completed"]
    assert x["gpus"][0]["memory_total_mib"] == 143771 and x["gpus"][0]["mig_mode"] == "Disabled"
    nv = S.parse_nvlink_status(read("h200x2", "nvlink-s.txt"))
    assert nv == {0: {"links": 18, "gbps_per_link": 26.562}, 1: {"links": 18, "gbps_per_link": 26.562}}
    inactive = S.parse_nvlink_status("GPU 0: X (UUID: a)\n\t Link 0: <inactive>\n")
    assert inactive == {0: {"links": 0, "gbps_per_link": None}}


def test_gpu_facts_from_the_h200_captures():
    f = S.gpu_facts_from_smi(read("h200x2", "query.csv"), read("h200x2", "topo-m.txt"), read("h200x2", "q.xml"),
                             read("h200x2", "nvlink-s.txt"), nvswitch_devices=[])
    assert f["gpu_count"] == 2 and f["driver_version"] == "580.159.04"
    assert f["links"] == [{"gpus": [0, 1], "type": "NV18", "nvlinks": 18}]
    assert f["nvlink_domains"] == [[0, 1]]
    assert f["nvswitch"] is False  # /proc/driver/nvidia-nvswitch/devices exists but is empty on these hosts
    g = f["gpus"][0]
    for key in ("index", "name", "uuid", "memory_total_mib", "pci_bus_id", "numa_node", "mig_mode",
                "compute_capability"):
        assert key in g
    assert g["numa_node"] == 0 and g["nvlinks_active"] == 18
    assert S.gpu_facts_from_smi(read("h200x2", "query.csv"), read("h200x2", "topo-m.txt"),
                                nvswitch_devices=["0000:05:00.0"])["nvswitch"] is True


def test_query_and_topo_disagreeing_on_gpus_fails():
    with pytest.raises(L.TopologyParseError, match="lists GPUs"):
        S.gpu_facts_from_smi(read("h200x2", "query.csv"), read("single-rtx4090.txt"))


DEVICE_RUNS = sorted(glob.glob(os.path.join(FIX, "device-*")))


@pytest.mark.parametrize("run", DEVICE_RUNS, ids=os.path.basename)
def test_device_captures_replay_to_what_nvml_returned_on_the_host(run):
    """The nvidia-smi-only path, replayed from a real host's captures, agrees with NVML read on that host."""
    import json

    def text(name):
        with open(os.path.join(run, name)) as fh:
            return fh.read()

    nvml = json.loads(text("gpu_facts_nvml.json"))
    nvml = nvml.get("gpu_facts", nvml)
    assert nvml["source"] == "nvml"
    replay = S.gpu_facts_from_smi(text("query.csv"), text("topo-m.txt"), text("q.xml"), text("nvlink-s.txt"),
                                  nvswitch_devices=[])
    assert replay["driver_version"] == nvml["driver_version"]
    assert replay["nvlink_domains"] == nvml["nvlink_domains"]
    assert replay["links"] == nvml["links"]
    assert replay["nvswitch"] is nvml["nvswitch"] is False
    for mine, theirs in zip(replay["gpus"], nvml["gpus"]):
        for key in ("index", "name", "uuid", "memory_total_mib", "compute_capability", "mig_mode"):
            assert mine[key] == theirs[key], key
        # These captures were recorded before the NVML reader switched to the 8-digit domain form; the
        # device is the same either way.
        assert N._same_bus(mine["pci_bus_id"], theirs["pci_bus_id"])
