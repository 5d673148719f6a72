"""Reading the GPUs through NVML (plugins/module_utils/gpu/gpu_nvml.py), with a test double for pynvml."""
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu import gpu_nvml as N


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


def test_nvml_pcie_pairs_come_from_topo_when_nvml_cannot_classify_them():
    links = {(0, 1): "PHB", (1, 0): "PHB"}
    f = N.read_nvml(FakeNvml(nvlink=False), smi_links=links)
    assert f["links"][0]["type"] == "PHB" and f["warnings"] == []
    f = N.read_nvml(FakeNvml(nvlink=False, ancestor=40))
    assert f["links"][0]["type"] == "NODE"
    f = N.read_nvml(FakeNvml(nvlink=False))  # nothing knows: conservative SYS with a warning
    assert f["links"][0]["type"] == "SYS" and f["warnings"]
    assert f["nvlink_domains"] == [[0], [1]]
