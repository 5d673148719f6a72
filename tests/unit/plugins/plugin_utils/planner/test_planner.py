# Unit tests for plugins/plugin_utils/planner/planner.py: the sizing formulas and the layout rules.
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import planner as P
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.units import MIB
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.layout_search import tp_allowed

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import capacity as CAP
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu import topology as T
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.model_profiles import load_profiles

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
FIX = os.path.join(ROOT, "tests", "fixtures", "gpu")
PROFILES = load_profiles(os.path.join(ROOT, "profiles"))
BF16 = PROFILES["Qwen/Qwen3.5-35B-A3B"]
FP8 = PROFILES["Qwen/Qwen3.5-35B-A3B-FP8"]
INT4 = PROFILES["Qwen/Qwen3.5-35B-A3B-GPTQ-Int4"]
TINY = PROFILES["llmfleet-test/tiny-qwen3-moe"]
ALL = list(PROFILES.values())


def facts_from_topo(name, memory_mib, gpu_name="GPU"):
    with open(os.path.join(FIX, name)) as fh:
        topo = T.parse_topo_matrix(fh.read())
    gpus = [{"index": g["index"], "name": gpu_name, "uuid": None, "memory_total_mib": memory_mib,
             "pci_bus_id": None, "numa_node": g["numa_node"], "mig_mode": "Disabled", "compute_capability": "9.0"}
            for g in topo["gpus"]]
    return T.build_gpu_facts(gpus, "x", topo["links"], "test")


def h200x2():
    d = os.path.join(FIX, "h200x2")
    return T.gpu_facts_from_smi(open(os.path.join(d, "query.csv")).read(), open(os.path.join(d, "topo-m.txt")).read())


# ------------------------------------------------------------------------------------------ formulas

def test_kv_per_token_counts_only_full_attention_layers_and_kv_heads():
    # 2 x 10 full-attention layers x 2 KV heads x 256 x 2 bytes = 20 KiB (MODEL_FACTS 1.1, derived)
    assert CAP.kv_bytes_per_token(BF16["arch"]) == 20480
    assert CAP.kv_bytes_per_token(TINY["arch"]) == 2 * 4 * 2 * 64 * 2
    assert CAP.kv_bytes_per_token(BF16["arch"], dtype_bytes=1) == 10240


def test_the_seed_formula_overestimates_qwen35_kv_about_38_times():
    # The seed: hidden 2048 x 48 layers x 4 x 2 bytes = 786,432 bytes/token (no GQA, no hybrid layers).
    seed = 2048 * 48 * 4 * 2
    ratio = seed / CAP.kv_bytes_per_token(BF16["arch"])
    assert 38 < ratio < 39


def test_kv_heads_are_split_by_tp_and_replicated_past_the_kv_head_count():
    a = BF16["arch"]
    assert CAP.kv_bytes_per_token(a, tp=2) == 10240
    assert CAP.kv_bytes_per_token(a, tp=4) == 10240  # 2 KV heads on 4 GPUs: one (replicated) head each
    assert CAP.kv_bytes_per_token(a, extra_layers=1) == 22528  # the MTP head's attention layer


def test_gated_deltanet_state_per_sequence():
    # 30 layers x (conv 8192 x 3 x 2 bytes + SSM 32 x 128 x 128 x 4 bytes) = ~61.4 MiB
    assert CAP.state_bytes_per_sequence(BF16["arch"]) == 30 * (8192 * 3 * 2 + 32 * 128 * 128 * 4)
    assert CAP.state_bytes_per_sequence(BF16["arch"], tp=2) == CAP.state_bytes_per_sequence(BF16["arch"]) // 2
    assert CAP.state_bytes_per_sequence(TINY["arch"]) == 0


def test_tp_must_divide_the_attention_heads():
    assert tp_allowed(BF16["arch"], 8)[0]
    ok, why = tp_allowed(TINY["arch"], 8)
    assert not ok and "4 attention heads" in why


# ------------------------------------------------------------------------------------------ layout rules

def test_throughput_prefers_replicas_when_one_gpu_holds_a_replica():
    p = P.plan(h200x2(), FP8, objective="throughput", max_model_len=32768)
    assert p["fits"] and p["tensor_parallel_size"] == 1 and p["data_parallel_size"] == 2
    assert p["replicas"] == [[0], [1]] and not p["enable_expert_parallel"]
    assert "data-parallel-size" not in p["vllm_args"]  # one container per replica
    assert p["vllm_args"]["tensor-parallel-size"] == 1
    assert any("one vLLM container per replica" in r for r in p["reasons"])


def test_latency_uses_tp_over_nvlink_with_expert_parallel():
    p = P.plan(h200x2(), FP8, objective="latency", max_model_len=32768)
    assert p["tensor_parallel_size"] == 2 and p["replicas"] == [[0, 1]] and p["enable_expert_parallel"]
    assert p["vllm_args"]["enable-expert-parallel"] is True and p["interconnect"] == "NVLink"


def test_never_tp_across_pcie_when_a_replica_fits_an_nvlink_domain():
    facts = facts_from_topo("synthetic-4x-nv4-pairs-mlx5.txt", 81559)
    p = P.plan(facts, BF16, max_model_len=262144)  # BF16 at full context needs 2 x 80 GB
    assert p["fits"] and p["tensor_parallel_size"] == 2
    assert p["replicas"] == [[0, 1], [2, 3]]  # the NVLink pairs, never 0+2
    assert p["enable_expert_parallel"]
    with pytest.raises(PlanError, match="NVLink"):
        P.plan(facts_from_topo("aws-g6e12xl-4x-l40s-pcie-node.txt", 46068), INT4, max_model_len=8192,
               tensor_parallel_size=2)


def test_pcie_tp_only_when_nothing_else_fits_and_then_no_expert_parallel():
    p = P.plan(T.gpu_facts_from_spec("2x RTX 4090 PCIe"), FP8, max_model_len=32768)
    assert p["fits"] and p["tensor_parallel_size"] == 2 and p["interconnect"] == "PHB"
    assert not p["enable_expert_parallel"] and p["vllm_args"]["enable-expert-parallel"] is None
    assert any("crosses PCIe" in r for r in p["reasons"])
    with pytest.raises(PlanError, match="NVLink domain"):
        P.plan(T.gpu_facts_from_spec("2x RTX 4090 PCIe"), FP8, max_model_len=32768, enable_expert_parallel=True)


def test_hgx_captures_plan_tp2_replicas_for_bf16_at_full_context():
    facts = facts_from_topo("hgx-h20-8gpu-nv18-8nic-mlx5.txt", 81559)
    p = P.plan(facts, BF16, max_model_len=262144)
    assert p["fits"] and p["layout"] == "4 x TP2 EP NVLink"
    assert p["replicas"] == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_the_real_h200_host_plans_each_variant():
    for prof in (BF16, FP8, INT4):
        for obj in ("throughput", "latency"):
            p = P.plan(h200x2(), prof, objective=obj)
            assert p["fits"], (prof["id"], obj, p["reasons"])
            assert p["max_model_len"] == 262144 and p["kv_cache_tokens"] >= 262144


def test_mig_gpus_are_left_out():
    f = h200x2()
    f["gpus"][1]["mig_mode"] = "Enabled"
    p = P.plan(f, FP8, max_model_len=32768)
    assert p["replicas"] == [[0]] and any("MIG" in r for r in p["reasons"])


# ------------------------------------------------------------------------------------------ sizing

def test_kv_tokens_follow_vllms_memory_profile_and_block_pool():
    # vLLM's determine_available_memory, then its hybrid block pool (see planner.py's docstring).
    facts = T.gpu_facts_from_spec("1x A100 80GB")
    p = P.plan(facts, FP8, max_model_len=32768, max_num_seqs=64)
    requested = int(CAP.cuda_total_bytes(facts["gpus"][0]) * 0.9)
    weights = FP8["weights_bytes"] - FP8["vision_weights_bytes"] - FP8["mtp_weights_bytes"]
    avail = requested - weights - CAP.overhead_bytes(FP8["arch"], 1, 64, 8192)
    assert p["available_kv_cache_memory_bytes"] == avail
    blocks = avail // (1056 * 2048) // 10  # 1056-token blocks of 2 KiB/token/layer, 10 layers per group
    assert p["kv_cache_blocks"] == blocks
    per_request = 32 + 3 * 2  # ceil(32768 / 1056) attention blocks + 2 state blocks x 3 GDN groups ('align')
    assert p["max_concurrency"] == round(blocks / per_request, 2)
    assert p["kv_cache_tokens"] == int(blocks / per_request * 32768)
    assert p["weights_bytes"] == weights
    assert p["max_concurrency_at_max_model_len"] == min(64, blocks // per_request)


def test_max_num_seqs_is_bounded_by_the_block_pool_not_reserved_up_front():
    small = {"count": 1, "memory_mib": 49152, "link": "PHB"}  # 48 GiB
    auto = P.plan(T.gpu_facts_from_spec(small), FP8, max_model_len=32768)
    assert auto["fits"] and auto["max_num_seqs"] < 256
    # 1 attention block + 2 state blocks x 3 groups per short sequence
    assert auto["max_num_seqs"] <= auto["kv_cache_blocks"] // 7
    too_many = P.plan(T.gpu_facts_from_spec(small), FP8, max_model_len=32768, max_num_seqs=auto["kv_cache_blocks"] + 8)
    assert not too_many["fits"] and any("refuses to capture CUDA graphs" in r for r in too_many["reasons"])
    assert any("max_num_seqs" in s["set"] for s in too_many["suggestions"])
    # More than fit at once but fewer than the blocks: vLLM starts, the plan warns.
    some = P.plan(T.gpu_facts_from_spec(small), FP8, max_model_len=32768,
                  max_num_seqs=auto["kv_cache_blocks"] // 7 + 10)
    assert some["fits"] and any(r.startswith("Warning: max_num_seqs") for r in some["reasons"])


def test_suggestions_are_changes_that_really_fit():
    facts = T.gpu_facts_from_spec("1x A100 80GB")
    p = P.plan(facts, BF16, max_model_len=262144, alternatives=ALL)
    assert not p["fits"] and p["suggestions"]
    for s in p["suggestions"]:
        kw = dict(max_model_len=262144)
        prof = BF16
        if "gpus" in s["set"]:
            continue
        for k, v in s["set"].items():
            if k == "model":
                prof = PROFILES[v]
            else:
                kw[k] = v
        assert P.plan(facts, prof, **kw)["fits"], s


def test_too_long_context_and_old_vllm_are_refused():
    with pytest.raises(PlanError, match="262144"):
        P.plan(h200x2(), FP8, max_model_len=300000)
    p = P.plan(h200x2(), FP8, max_model_len=8192, vllm_version="0.15.0")
    assert not p["fits"] and p["suggestions"][0]["set"] == {"vllm_version": "0.17.0"}
    assert P.plan(h200x2(), FP8, max_model_len=8192, vllm_version="0.17.1")["fits"]


def test_no_gpus_without_cpu_accelerator_is_an_error():
    with pytest.raises(PlanError, match="accelerator: cpu"):
        P.plan({"gpus": []}, TINY)


# ------------------------------------------------------------------------------------------ CPU engine

def test_cpu_engine_plan_for_the_tiny_model():
    p = P.plan(None, TINY, accelerator="cpu", kv_cache_memory_bytes=64 * MIB, max_model_len=512)
    assert p["fits"] and p["kv_cache_tokens"] == 64 * MIB // 2048
    assert p["replicas"] == [[]] and p["data_parallel_size"] == 1
    args = {k: v for k, v in p["vllm_args"].items() if v is not None}
    assert args == {"kv-cache-memory-bytes": 64 * MIB, "max-model-len": 512, "max-num-seqs": 256,
                    "enable-prefix-caching": True}
    with pytest.raises(PlanError, match="kv_cache_memory_bytes"):
        P.plan(None, TINY, accelerator="cpu")
    small = P.plan(None, TINY, accelerator="cpu", kv_cache_memory_bytes=512 * 1024, max_model_len=4096)
    assert not small["fits"]
    budget = [s["set"]["kv_cache_memory_bytes"] for s in small["suggestions"] if "kv_cache_memory_bytes" in s["set"]]
    assert budget and budget[0] >= 4096 * 2048
    assert P.plan(None, TINY, accelerator="cpu", kv_cache_memory_bytes=budget[0], max_model_len=4096)["fits"]


# ------------------------------------------------------------------------------------------ the action plugin

def _playbook(tmp_path, body):
    pb = tmp_path / "pb.yml"
    pb.write_text(body)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_LOCALHOST_WARNING="0")
    bin_dir = os.path.dirname(sys.executable)
    r = subprocess.run([os.path.join(bin_dir, "ansible-playbook"), "-i", "localhost,", str(pb)], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=120, check=False)
    return r, json.loads(r.stdout) if r.stdout.strip().startswith("{") else None


def test_plan_playbook_prints_a_table_for_described_hardware(tmp_path):
    report = tmp_path / "plan.md"
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    r = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "playbooks/plan.yml",
                        "-e", "plan_report_path=%s" % report], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=120, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = report.read_text().splitlines()
    assert rows[0].startswith("| hardware |") and len(rows) == 2 + 10 * 3
    assert "| 2x H200 NVLink | Qwen/Qwen3.5-35B-A3B-FP8 | yes | 2 x TP1 |" in report.read_text()
    assert "| 1x RTX 4090 | Qwen/Qwen3.5-35B-A3B | no" in report.read_text()


def test_action_plugin_reads_a_model_directory_and_gpu_facts_file(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    cfg = dict(TINY["config"])
    (model / "config.json").write_text(json.dumps(cfg))
    (model / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 3419392}}))
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({"gpu_facts": h200x2()}))
    r, out = _playbook(tmp_path, """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - llmfleet.vllm.vllm_plan:
        model: %s
        gpu_facts_file: %s
        max_model_len: 4096
      register: p
    - llmfleet.vllm.vllm_plan:
        model: Qwen/Qwen3.5-35B-A3B
        hardware: 1x RTX 4090
        fail_if_not_fits: true
""" % (model, facts))
    assert out is not None, r.stderr
    tasks = out["plays"][0]["tasks"]
    plan = tasks[0]["hosts"]["localhost"]["plan"]
    assert plan["fits"] and plan["weights_bytes"] == 3419392 and plan["kv_cache_bytes_per_token"] == 2048
    assert plan["layout"] == "2 x TP1"
    failed = tasks[1]["hosts"]["localhost"]
    assert failed.get("failed") and "does not fit" in failed["msg"]
