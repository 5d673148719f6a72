"""Described hardware (plugins/module_utils/gpu/topology.py): the GPU catalogue's presets as gpu_facts."""
import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu import topology as T


def test_described_hardware_presets():
    f = T.gpu_facts_from_spec("8x H100 HGX")
    assert f["gpu_count"] == 8 and f["nvlink_domains"] == [list(range(8))] and f["nvswitch"]
    f = T.gpu_facts_from_spec("2x RTX 4090 PCIe")
    assert f["nvlink_domains"] == [[0], [1]]
    with pytest.raises(ValueError, match="unknown GPU 'Voodoo'.*knows: .*L40S"):
        T.gpu_facts_from_spec("3x Voodoo")
    with pytest.raises(ValueError, match="link"):
        T.gpu_facts_from_spec({"count": 2, "memory_mib": 1000, "link": "QPI"})
