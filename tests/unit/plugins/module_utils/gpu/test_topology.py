# Unit tests for plugins/module_utils/gpu/topology.py over every GPU capture in tests/fixtures/gpu.
import glob
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu import topology as T

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
        topo = T.parse_topo_matrix(fh.read())
    idx = [g["index"] for g in topo["gpus"]]
    assert idx == list(range(len(idx)))
    # every ordered pair is present, symmetric, and a known link type
    for a in idx:
        for b in idx:
            if a != b:
                assert topo["links"][(a, b)] == topo["links"][(b, a)]
                assert T.normalize_link(topo["links"][(a, b)]) not in (None, "X")
    domains = T.nvlink_domains(idx, topo["links"])
    assert sorted(g for d in domains for g in d) == idx  # every GPU in exactly one domain
    for d in domains:
        for a in d:
            for b in d:
                if a != b:
                    assert T.nvlink_count(topo["links"][(a, b)]) > 0


def test_hgx_h20_nic_rows_and_legend():
    topo = T.parse_topo_matrix(read("hgx-h20-8gpu-nv18-8nic-mlx5.txt"))
    assert len(topo["gpus"]) == 8
    assert set(topo["links"].values()) == {"NV18"}
    assert [n["device"] for n in topo["nics"]] == ["mlx5_%d" % i for i in range(8)]
    assert topo["nics"][0]["links"][0] == "PIX" and topo["nics"][0]["links"][4] == "SYS"
    assert [g["numa_node"] for g in topo["gpus"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert topo["gpus"][4]["cpus"][0] == 48 and topo["gpus"][0]["cpu_affinity"] == "0-47,96-143"
    assert T.nvlink_domains(range(8), topo["links"]) == [list(range(8))]


def test_p4d_nv12_two_numa_nodes():
    topo = T.parse_topo_matrix(read("aws-p4d24xl-8x-a100-nv12-numa.txt"))
    assert set(topo["links"].values()) == {"NV12"}
    assert topo["gpus"][7]["numa_node"] == 1 and topo["gpus"][7]["gpu_numa_id"] is None


def test_pcie_only_hosts_have_singleton_domains():
    l40s = T.parse_topo_matrix(read("aws-g6e12xl-4x-l40s-pcie-node.txt"))
    assert set(l40s["links"].values()) == {"NODE"}
    assert T.nvlink_domains(range(4), l40s["links"]) == [[0], [1], [2], [3]]
    dual = T.parse_topo_matrix(read("dual-5090-pcie-phb.txt"))  # tabs, padded X, empty cell, p2p block after
    assert dual["links"][(0, 1)] == "PHB"
    assert [g["numa_node"] for g in dual["gpus"]] == [0, 0]


def test_single_gpu_matrix():
    topo = T.parse_topo_matrix(read("single-rtx4090.txt"))
    assert topo["gpus"][0]["numa_node"] == 0 and topo["links"] == {}
    assert T.nvlink_domains([0], topo["links"]) == [[0]]


def test_h200_capture_with_ansi_underline_header():
    text = read("h200x2", "topo-m.txt")
    assert "\x1b[4m" in text
    topo = T.parse_topo_matrix(text)
    assert topo["links"][(0, 1)] == "NV18"


def test_nvlink_pairs_bridged_over_pcie_and_old_nic_column():
    topo = T.parse_topo_matrix(read("synthetic-4x-nv4-pairs-mlx5.txt"))
    assert T.nvlink_domains(range(4), topo["links"]) == [[0, 1], [2, 3]]
    assert topo["nics"][0]["device"] == "mlx5_0"
    assert topo["gpus"][2]["numa_node"] == 1


def test_non_clique_nvlink_component_is_split_into_cliques():
    # 0-1-2 chain: 0 and 2 have no NVLink between them, so they cannot share a domain.
    links = {(0, 1): "NV2", (1, 2): "NV2", (0, 2): "SYS"}
    links.update({(b, a): t for (a, b), t in list(links.items())})
    doms = T.nvlink_domains([0, 1, 2], links)
    assert sorted(len(d) for d in doms) == [1, 2]
    assert [0, 2] not in doms


def test_unknown_cell_fails_naming_the_line():
    with pytest.raises(T.TopologyParseError, match=r"line 4: unknown link type 'QPI'"):
        T.parse_topo_matrix(read("synthetic-bad-cell.txt"))


@pytest.mark.parametrize("text,match", [
    ("GPU0 GPU1 Bogus Column\nGPU0 X PHB\n", r"line 1: unknown header column 'Bogus'"),
    ("        GPU0    GPU1\nGPU0     X      PHB\nGPU7    PHB      X\n", r"line 3: row 'GPU7'"),
    ("        GPU0    GPU1\nGPU0     X\n", r"line 2: expected 2 link cells"),
    ("        GPU0    GPU1   CPU Affinity\nGPU0  X  PHB  0-3  9  9\nGPU1 PHB X 0-3\n", r"line 2: expected 1 affinity"),
    ("        GPU0    GPU1\nGPU0    PHB     X\nGPU1    X    PHB\n", r"diagonal"),
    ("no matrix here\n", r"no header line"),
])
def test_unknown_shapes_fail_with_a_message(text, match):
    with pytest.raises(T.TopologyParseError, match=match):
        T.parse_topo_matrix(text)


def test_query_csv_real_capture_and_na_values():
    gpus, driver = T.parse_query_csv(read("h200x2", "query.csv"))
    assert driver == "580.159.04"
    assert gpus[1] == {"index": 1, "name": "NVIDIA H200", "uuid": "GPU-803e456b-865b-010c-063b-dcebba954682",
                       "memory_total_mib": 143771, "pci_bus_id": "00000000:00:07.0", "compute_capability": "9.0",
                       "mig_mode": "Disabled"}
    gpus, _unused = T.parse_query_csv("index, name, memory.total [MiB], mig.mode.current\n0, NVIDIA GeForce RTX 4090, "
                                      "24564 MiB, [N/A]\n")
    assert gpus[0]["mig_mode"] is None and gpus[0]["memory_total_mib"] == 24564


def test_query_csv_without_header_or_with_short_rows_fails():
    with pytest.raises(T.TopologyParseError, match="no 'index' column"):
        T.parse_query_csv("0, NVIDIA H200, 143771 MiB\n")
    with pytest.raises(T.TopologyParseError, match="line 2"):
        T.parse_query_csv("index, name\n0\n")


def test_xml_and_nvlink_status_of_the_h200_capture():
    x = T.parse_smi_xml(read("h200x2", "q.xml"))
    assert x["driver_version"] == "580.159.04" and x["cuda_version"] == "13.0"
    assert [g["fabric_state"] for g in x["gpus"]] == ["Completed", "Completed"]
    assert x["gpus"][0]["memory_total_mib"] == 143771 and x["gpus"][0]["mig_mode"] == "Disabled"
    nv = T.parse_nvlink_status(read("h200x2", "nvlink-s.txt"))
    assert nv == {0: {"links": 18, "gbps_per_link": 26.562}, 1: {"links": 18, "gbps_per_link": 26.562}}
    inactive = T.parse_nvlink_status("GPU 0: X (UUID: a)\n\t Link 0: <inactive>\n")
    assert inactive == {0: {"links": 0, "gbps_per_link": None}}


def test_gpu_facts_from_the_h200_captures():
    f = T.gpu_facts_from_smi(read("h200x2", "query.csv"), read("h200x2", "topo-m.txt"), read("h200x2", "q.xml"),
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
    assert T.gpu_facts_from_smi(read("h200x2", "query.csv"), read("h200x2", "topo-m.txt"),
                                nvswitch_devices=["0000:05:00.0"])["nvswitch"] is True


def test_query_and_topo_disagreeing_on_gpus_fails():
    with pytest.raises(T.TopologyParseError, match="lists GPUs"):
        T.gpu_facts_from_smi(read("h200x2", "query.csv"), read("single-rtx4090.txt"))


# ---------------------------------------------------------------- orchestration with replayed captures

def replay(rcs=None):
    """A command runner that answers with the real h200x2 captures (test double: no GPU on this machine)."""
    outputs = {
        "topo -m": read("h200x2", "topo-m.txt"),
        "--query-gpu=" + T.QUERY_FIELDS + " --format=csv": read("h200x2", "query.csv"),
        "-q -x": read("h200x2", "q.xml"),
        "nvlink -s": read("h200x2", "nvlink-s.txt"),
    }
    calls = []

    def run(argv):
        key = " ".join(argv[1:])
        calls.append(key)
        rc = (rcs or {}).get(key, 0)
        return (rc, outputs[key] if rc == 0 else "", "" if rc == 0 else "Failed to initialize NVML")
    return run, calls


def no_nvml():
    raise ImportError("No module named 'pynvml'")


def test_nvidia_smi_path_when_nvml_is_missing():
    run, calls = replay()
    facts, raw = T.collect_gpu_facts(run, "/usr/local/nvidia/bin/nvidia-smi", "auto", no_nvml, [])
    assert facts["source"] == "nvidia-smi" and facts["nvlink_domains"] == [[0, 1]]
    assert any("NVML unavailable" in w for w in facts["warnings"])
    assert "topo -m" in raw


def test_optional_queries_may_fail_required_ones_may_not():
    run, _unused = replay({"-q -x": 9, "nvlink -s": 3})
    facts, _unused = T.collect_gpu_facts(run, "/usr/bin/nvidia-smi", "false", None, [])
    assert facts["gpu_count"] == 2 and len(facts["warnings"]) == 2
    run, _unused = replay({"--query-gpu=" + T.QUERY_FIELDS + " --format=csv": 9})
    with pytest.raises(T.GpuFactsError, match="query-gpu"):
        T.collect_gpu_facts(run, "/usr/bin/nvidia-smi", "false", None, [])


def test_use_nvml_true_fails_when_nvml_cannot_be_used():
    run, _unused = replay()
    with pytest.raises(T.GpuFactsError, match="use_nvml: true"):
        T.collect_gpu_facts(run, "/usr/bin/nvidia-smi", "true", no_nvml, [])


def test_no_nvml_and_no_nvidia_smi_says_what_to_do():
    with pytest.raises(T.GpuFactsError, match="nvidia_smi_path"):
        T.collect_gpu_facts(lambda argv: (0, "", ""), None, "auto", no_nvml, [])


def test_find_nvidia_smi_searches_path_first_then_nvidia_dirs():
    exe = {"/usr/local/nvidia/bin/nvidia-smi", "/usr/bin/nvidia-smi", "/opt/x/nvidia-smi"}
    assert T.find_nvidia_smi("/opt/x:/bin", is_exe=exe.__contains__) == "/opt/x/nvidia-smi"
    assert T.find_nvidia_smi("/bin", is_exe=exe.__contains__) == "/usr/local/nvidia/bin/nvidia-smi"
    assert T.find_nvidia_smi("/bin", is_exe=set().__contains__) is None
    with pytest.raises(T.GpuFactsError):
        T.find_nvidia_smi("/bin", explicit="/nope/nvidia-smi", is_exe=exe.__contains__)


class FakeNvml:
    """Test double for pynvml (no GPU here), modelled on the two H200 test host: NVLink P2P OK, 18 active links
    whose remote end is not the peer GPU, and nvmlDeviceGetTopologyCommonAncestor answering NotSupported."""

    NVML_P2P_CAPS_INDEX_NVLINK = 6
    NVML_P2P_STATUS_OK = 0
    NVML_FEATURE_ENABLED = 1
    NVML_NVLINK_MAX_LINKS = 18

    class NVMLError(Exception):
        pass

    def __init__(self, nvlink=True, ancestor=None):
        self.nvlink = nvlink
        self.ancestor = ancestor
        self.shutdown = False

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        self.shutdown = True

    def nvmlSystemGetDriverVersion(self):
        return "580.159.04"

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return 13000

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetPciInfo(self, h):
        class P:  # what pynvml returns on the H200 host: both spellings
            busId = b"00000000:00:0%d.0" % (6 + h)
            busIdLegacy = b"0000:00:0%d.0" % (6 + h)
        return P()

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return (9, 0)

    def nvmlDeviceGetMigMode(self, h):
        return (0, 0)

    def nvmlDeviceGetNumaNodeId(self, h):
        raise self.NVMLError("Not Supported")

    def nvmlDeviceGetName(self, h):
        return "NVIDIA H200"

    def nvmlDeviceGetUUID(self, h):
        return "GPU-%d" % h

    def nvmlDeviceGetMemoryInfo(self, h):
        class M:
            total = 143771 * 1024 * 1024
        return M()

    def nvmlDeviceGetNvLinkState(self, h, link):
        if not self.nvlink:
            raise self.NVMLError("Not Supported")
        return 1

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h, link):
        class P:
            busId = "00000000:99:00.0"  # an NVSwitch-side endpoint, not the peer GPU
        return P()

    def nvmlDeviceGetP2PStatus(self, a, b, idx):
        return 0 if self.nvlink else 4

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        if self.ancestor is None:
            raise self.NVMLError("Not Supported")
        return self.ancestor


def test_nvml_path_counts_nvlinks_behind_a_switch():
    fake = FakeNvml()
    run, _unused = replay()
    facts, _unused = T.collect_gpu_facts(run, "/usr/local/nvidia/bin/nvidia-smi", "true", lambda: fake, [],
                                         read_numa=lambda bus: 0)
    assert facts["source"] == "nvml" and fake.shutdown
    assert facts["links"] == [{"gpus": [0, 1], "type": "NV18", "nvlinks": 18}]
    assert facts["gpus"][1]["memory_total_mib"] == 143771 and facts["gpus"][1]["compute_capability"] == "9.0"
    assert facts["gpus"][0]["numa_node"] == 0 and facts["gpus"][0]["mig_mode"] == "Disabled"
    assert facts["cuda_version"] == "13.0"
    # Same bus id spelling as the nvidia-smi path (query.csv prints the 8-digit domain).
    smi = T.gpu_facts_from_smi(read("h200x2", "query.csv"), read("h200x2", "topo-m.txt"), nvswitch_devices=[])
    assert [g["pci_bus_id"] for g in facts["gpus"]] == [g["pci_bus_id"] for g in smi["gpus"]]


def test_nvml_pcie_pairs_come_from_topo_when_nvml_cannot_classify_them():
    links = {(0, 1): "PHB", (1, 0): "PHB"}
    f = T.read_nvml(FakeNvml(nvlink=False), smi_links=links)
    assert f["links"][0]["type"] == "PHB" and f["warnings"] == []
    f = T.read_nvml(FakeNvml(nvlink=False, ancestor=40))
    assert f["links"][0]["type"] == "NODE"
    f = T.read_nvml(FakeNvml(nvlink=False))  # nothing knows: conservative SYS with a warning
    assert f["links"][0]["type"] == "SYS" and f["warnings"]
    assert f["nvlink_domains"] == [[0], [1]]


def test_described_hardware_presets():
    f = T.gpu_facts_from_spec("8x H100 HGX")
    assert f["gpu_count"] == 8 and f["nvlink_domains"] == [list(range(8))] and f["nvswitch"]
    f = T.gpu_facts_from_spec("2x RTX 4090 PCIe")
    assert f["nvlink_domains"] == [[0], [1]]
    with pytest.raises(ValueError, match="unknown GPU 'Voodoo'.*knows: .*L40S"):
        T.gpu_facts_from_spec("3x Voodoo")
    with pytest.raises(ValueError, match="link"):
        T.gpu_facts_from_spec({"count": 2, "memory_mib": 1000, "link": "QPI"})


def test_sysfs_path_uses_the_four_digit_domain():
    assert T.sysfs_pci_path("00000000:00:06.0") == "/sys/bus/pci/devices/0000:00:06.0"


def test_gpu_facts_module_end_to_end_with_a_replaying_nvidia_smi(tmp_path):
    """Runs the module through ansible-playbook.  nvidia-smi is a test double (no GPU here) that prints the real
    h200x2 captures; -q -x fails like it can on real hosts, which must only add a warning."""
    import json
    import subprocess
    import sys

    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
    smi = tmp_path / "nvidia-smi"
    smi.write_text("""#!/bin/sh
case "$*" in
  "topo -m") cat %(d)s/topo-m.txt ;;
  --query-gpu=*) cat %(d)s/query.csv ;;
  "nvlink -s") cat %(d)s/nvlink-s.txt ;;
  *) echo "Unable to determine the device handle" >&2; exit 15 ;;
esac
""" % {"d": H200})
    smi.chmod(0o755)
    pb = tmp_path / "pb.yml"
    pb.write_text("""
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - llmfleet.vllm.gpu_facts:
        use_nvml: "false"
        nvidia_smi_path: %s
        nvswitch_devices_path: %s
""" % (smi, tmp_path / "absent"))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(root, "collections"),
               ANSIBLE_CONFIG=os.path.join(root, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="json")
    r = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                        "-e", "ansible_python_interpreter=%s" % sys.executable, str(pb)],
                       cwd=root, env=env, capture_output=True, text=True, timeout=120, check=False)
    out = json.loads(r.stdout)
    res = out["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert not res.get("failed"), res
    f = res["gpu_facts"]
    assert f["source"] == "nvidia-smi" and f["nvlink_domains"] == [[0, 1]] and f["nvswitch"] is False
    assert f["gpus"][1]["nvlinks_active"] == 18
    assert any("-q -x" in w for w in f["warnings"])


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
    replay = T.gpu_facts_from_smi(text("query.csv"), text("topo-m.txt"), text("q.xml"), text("nvlink-s.txt"),
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
        assert T._same_bus(mine["pci_bus_id"], theirs["pci_bus_id"])
