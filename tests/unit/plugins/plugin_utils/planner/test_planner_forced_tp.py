"""A forced tensor-parallel size that cannot work is refused with the reason that names the fix."""
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import planner as P
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu import topology as T
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.model_profiles import load_profiles

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
PROFILES = load_profiles(os.path.join(ROOT, "profiles"))
FP8 = PROFILES["Qwen/Qwen3.5-35B-A3B-FP8"]


def hgx8():
    with open(os.path.join(ROOT, "tests", "fixtures", "gpu", "hgx-h20-8gpu-nv18-8nic-mlx5.txt")) as fh:
        topo = T.parse_topo_matrix(fh.read())
    gpus = [{"index": g["index"], "name": "GPU", "uuid": None, "memory_total_mib": 97871, "pci_bus_id": None,
             "numa_node": g["numa_node"], "mig_mode": "Disabled", "compute_capability": "9.0"} for g in topo["gpus"]]
    return T.build_gpu_facts(gpus, "x", topo["links"], "test")


def test_tp_that_does_not_divide_the_heads_says_so_even_with_enough_gpus():
    # Eight GPUs are enough for 3: the problem is the 16 attention heads, and the message must say that.
    with pytest.raises(PlanError, match=r"tensor_parallel_size 3 is not possible .*does not divide the 16 "
                                        r"attention heads; use one of 1, 2, 4, 8"):
        P.plan(hgx8(), FP8, max_model_len=32768, tensor_parallel_size=3)


def test_tp_zero_is_refused():
    with pytest.raises(PlanError, match="at least 1"):
        P.plan(hgx8(), FP8, max_model_len=32768, tensor_parallel_size=0)


def test_tp_larger_than_the_host_names_the_gpu_count():
    with pytest.raises(PlanError, match="tensor_parallel_size 16 needs 16 usable GPUs; this host has 8"):
        P.plan(hgx8(), FP8, max_model_len=32768, tensor_parallel_size=16)


def test_a_valid_forced_tp_still_plans():
    p = P.plan(hgx8(), FP8, max_model_len=32768, tensor_parallel_size=4)
    assert p["fits"] and p["tensor_parallel_size"] == 4
