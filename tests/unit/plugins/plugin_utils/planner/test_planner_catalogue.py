"""The GPU catalogue (catalogue/gpus.yml): `hardware:` strings, nvidia-smi names, and its use by the planner."""
import os
import re

import pytest
import yaml

from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu import gpu_catalogue as C
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import planner as P
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.units import MIB
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import capacity as CAP
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu import topology as T
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.model_profiles import load_profiles

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
CAT = C.load_catalogue()
PROFILES = load_profiles(os.path.join(ROOT, "profiles"))
BF16 = PROFILES["Qwen/Qwen3.5-35B-A3B"]
FP8 = PROFILES["Qwen/Qwen3.5-35B-A3B-FP8"]


def test_the_catalogue_covers_what_people_deploy_this_model_on():
    want = ["L4", "L40S", "A10", "A100 40GB PCIe", "A100 80GB PCIe", "A100 40GB SXM", "A100 80GB SXM", "H100 PCIe",
            "H100 SXM", "H100 NVL", "H200", "H20", "B200", "RTX 4090", "RTX 5090", "RTX 6000 Ada", "RTX PRO 6000"]
    assert set(want) <= set(CAT)
    for name, e in CAT.items():
        assert e["memory_mib"] > 20000 and re.match(r"^\d+\.\d$", str(e["compute_capability"])), name
        assert e["fp8"] == (tuple(map(int, e["compute_capability"].split("."))) >= (8, 9)), name


def test_every_value_names_its_source():
    # Each memory value in the file carries a comment naming where it comes from.
    with open(C.CATALOGUE_PATH) as fh:
        lines = fh.read().splitlines()
    for line in lines:
        if re.match(r"^\s+(memory_mib|reserved_mib):", line):
            assert "#" in line, line


@pytest.mark.parametrize("text,count,name,nv", [
    ("4x L40S", 4, "L40S", False), ("8x H100 SXM", 8, "H100 SXM", True), ("2x RTX 4090 PCIe", 2, "RTX 4090", False),
    ("1x H200", 1, "H200", True), ("8x H20", 8, "H20", True), ("2x H200 NVLink", 2, "H200", True),
    ("8x H100 HGX", 8, "H100 SXM", True), ("1x A100 80GB", 1, "A100 80GB SXM", True),
    ("8x A100-80GB SXM", 8, "A100 80GB SXM", True), ("2x h100 nvl", 2, "H100 NVL", True),
    ("4x RTX PRO 6000", 4, "RTX PRO 6000", False), ("2x A100 80GB PCIe NVLink", 2, "A100 80GB PCIe", True),
    ("8x B200", 8, "B200", True), ("1x L4", 1, "L4", False), ("2X RTX 5090", 2, "RTX 5090", False),
])
def test_hardware_strings_parse(text, count, name, nv):
    s = C.parse_hardware(text, CAT)
    assert (s["count"], s["catalogue"]) == (count, name)
    f = T.gpu_facts_from_spec(text, CAT)
    assert f["gpu_count"] == count and f["gpus"][0]["memory_total_mib"] == CAT[name]["memory_mib"]
    has_nv = any(T.nvlink_count(link["type"]) for link in f["links"])
    assert has_nv == (nv and count > 1)


def test_bridged_pcie_cards_pair_up_and_switch_boards_connect_everything():
    f = T.gpu_facts_from_spec("4x A100 80GB PCIe NVLink", CAT)
    assert f["nvlink_domains"] == [[0, 1], [2, 3]]
    f = T.gpu_facts_from_spec("8x H100 SXM", CAT)
    assert f["nvlink_domains"] == [list(range(8))] and f["nvswitch"]
    assert not T.gpu_facts_from_spec("4x H100 SXM", CAT)["nvswitch"]  # 4-GPU HGX boards link directly


def test_unknown_names_list_the_catalogue_and_impossible_links_are_refused():
    with pytest.raises(C.CatalogueError, match=r"unknown GPU 'Voodoo 5'.*L40S.*RTX 4090"):
        C.parse_hardware("2x Voodoo 5", CAT)
    with pytest.raises(C.CatalogueError, match="no NVLink"):
        C.parse_hardware("2x L40S NVLink", CAT)
    with pytest.raises(C.CatalogueError, match="<count>x <GPU>"):
        C.parse_hardware("some GPUs", CAT)


def test_real_nvidia_smi_names_match_the_same_entries():
    assert C.match_smi_name("NVIDIA H100 80GB HBM3", CAT) == "H100 SXM"
    assert C.match_smi_name("NVIDIA H100 PCIe", CAT) == "H100 PCIe"
    assert C.match_smi_name("NVIDIA A100-SXM4-40GB", CAT) == "A100 40GB SXM"
    assert C.match_smi_name("NVIDIA GeForce RTX 4090", CAT) == "RTX 4090"
    assert C.match_smi_name("NVIDIA RTX PRO 6000 Blackwell Server Edition", CAT) == "RTX PRO 6000"
    assert C.match_smi_name("NVIDIA H200", CAT) == "H200"
    assert C.match_smi_name("Tesla T4", CAT) is None
    # The real H200 capture gets the catalogue's measured driver reserve, like a described "1x H200".
    d = os.path.join(ROOT, "tests", "fixtures", "gpu", "h200x2")
    real = T.gpu_facts_from_smi(open(os.path.join(d, "query.csv")).read(), open(os.path.join(d, "topo-m.txt")).read())
    real = C.annotate_gpu_facts(real, CAT)
    assert real["gpus"][0]["catalogue"] == "H200" and real["gpus"][0]["memory_reserved_mib"] == 616
    described = C.annotate_gpu_facts(T.gpu_facts_from_spec("2x H200 NVLink", CAT), CAT)
    a, b = P.plan(real, BF16, max_model_len=32768), P.plan(described, BF16, max_model_len=32768)
    assert (a["layout"], a["kv_cache_tokens"]) == (b["layout"], b["kv_cache_tokens"])


def test_the_catalogue_file_is_validated():
    with open(C.CATALOGUE_PATH) as fh:
        data = yaml.safe_load(fh)
    bad = {"gpus": {"X": dict(data["gpus"]["H200"], interconnect="infiniband")}}
    with pytest.raises(C.CatalogueError, match="interconnect"):
        C.validate_catalogue(bad)
    dup = {"gpus": {"X": dict(data["gpus"]["L4"]), "Y": dict(data["gpus"]["L4"], aliases=["x"])}}
    with pytest.raises(C.CatalogueError, match="also used"):
        C.validate_catalogue(dup)


def test_every_catalogue_gpu_plans_the_fp8_checkpoint_somewhere():
    for name in CAT:
        p = P.plan(T.gpu_facts_from_spec("8x %s" % name, CAT), FP8, max_model_len=32768)
        assert p["fits"], (name, p["reasons"][-1])


def test_nvidia_smi_xml_reserve_reaches_the_plan():
    d = os.path.join(ROOT, "tests", "fixtures", "gpu", "device-h200x1-2026-11-30")
    xml = open(os.path.join(d, "q.xml")).read()
    assert T.parse_smi_xml(xml)["gpus"][0]["memory_reserved_mib"] == 616
    g = {"memory_total_mib": 143771, "memory_reserved_mib": 616}
    assert CAP.cuda_total_bytes(g) == (143771 - 616) * MIB
    # Without a reserve, 1% of the total (rounded up to whole MiB) is assumed.
    assert CAP.cuda_total_bytes({"memory_total_mib": 100000}) == (100000 - 1000) * MIB
