"""Reading the GPUs (plugins/module_utils/gpu/gpu_probe.py): NVML where it can, nvidia-smi otherwise, replayed
from the real h200x2 captures (no GPU on this machine)."""
import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu import gpu_probe as P
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu import smi_output as S

from .test_gpu_nvml import FakeNvml
from .test_smi_output import read


def replay(rcs=None):
    """A command runner that answers with the real h200x2 captures (test double: no GPU on this machine)."""
    outputs = {
        "topo -m": read("h200x2", "topo-m.txt"),
        "--query-gpu=" + P.QUERY_FIELDS + " --format=csv": read("h200x2", "query.csv"),
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
    facts, raw = P.collect_gpu_facts(run, "/usr/local/nvidia/bin/nvidia-smi", "auto", no_nvml, [])
    assert facts["source"] == "nvidia-smi" and facts["nvlink_domains"] == [[0, 1]]
    assert any("NVML unavailable" in w for w in facts["warnings"])
    assert "topo -m" in raw


def test_optional_queries_may_fail_required_ones_may_not():
    run, _unused = replay({"-q -x": 9, "nvlink -s": 3})
    facts, _unused = P.collect_gpu_facts(run, "/usr/bin/nvidia-smi", "false", None, [])
    assert facts["gpu_count"] == 2 and len(facts["warnings"]) == 2
    run, _unused = replay({"--query-gpu=" + P.QUERY_FIELDS + " --format=csv": 9})
    with pytest.raises(P.GpuFactsError, match="query-gpu"):
        P.collect_gpu_facts(run, "/usr/bin/nvidia-smi", "false", None, [])


def test_use_nvml_true_fails_when_nvml_cannot_be_used():
    run, _unused = replay()
    with pytest.raises(P.GpuFactsError, match="use_nvml: true"):
        P.collect_gpu_facts(run, "/usr/bin/nvidia-smi", "true", no_nvml, [])


def test_no_nvml_and_no_nvidia_smi_says_what_to_do():
    with pytest.raises(P.GpuFactsError, match="nvidia_smi_path"):
        P.collect_gpu_facts(lambda argv: (0, "", ""), None, "auto", no_nvml, [])


def test_find_nvidia_smi_searches_path_first_then_nvidia_dirs():
    exe = {"/usr/local/nvidia/bin/nvidia-smi", "/usr/bin/nvidia-smi", "/opt/x/nvidia-smi"}
    assert P.find_nvidia_smi("/opt/x:/bin", is_exe=exe.__contains__) == "/opt/x/nvidia-smi"
    assert P.find_nvidia_smi("/bin", is_exe=exe.__contains__) == "/usr/local/nvidia/bin/nvidia-smi"
    assert P.find_nvidia_smi("/bin", is_exe=set().__contains__) is None
    with pytest.raises(P.GpuFactsError):
        P.find_nvidia_smi("/bin", explicit="/nope/nvidia-smi", is_exe=exe.__contains__)


def test_nvml_path_counts_nvlinks_behind_a_switch():
    fake = FakeNvml()
    run, _unused = replay()
    facts, _unused = P.collect_gpu_facts(run, "/usr/local/nvidia/bin/nvidia-smi", "true", lambda: fake, [],
                                         read_numa=lambda bus: 0)
    assert facts["source"] == "nvml" and fake.shutdown
    assert facts["links"] == [{"gpus": [0, 1], "type": "NV18", "nvlinks": 18}]
    assert facts["gpus"][1]["memory_total_mib"] == 143771 and facts["gpus"][1]["compute_capability"] == "9.0"
    assert facts["gpus"][0]["numa_node"] == 0 and facts["gpus"][0]["mig_mode"] == "Disabled"
    assert facts["cuda_version"] == "13.0"
    # Same bus id spelling as the nvidia-smi path (query.csv prints the 8-digit domain).
    smi = S.gpu_facts_from_smi(read("h200x2", "query.csv"), read("h200x2", "topo-m.txt"), nvswitch_devices=[])
    assert [g["pci_bus_id"] for g in facts["gpus"]] == [g["pci_bus_id"] for g in smi["gpus"]]


def test_sysfs_path_uses_the_four_digit_domain():
    assert P.sysfs_pci_path("00000000:00:06.0") == "/sys/bus/pci/devices/0000:00:06.0"
