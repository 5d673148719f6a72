"""plugins/plugin_utils/planner/vllm_bootlog.py: vLLM's boot log -> numbers, and planned vs actual."""
import os

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import vllm_bootlog as B

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
FIX = os.path.join(ROOT, "tests", "fixtures", "gpu", "vllm-h200x1-0.22.0")


def read(name):
    with open(os.path.join(FIX, name)) as fh:
        return fh.read()


def test_parse_the_real_022_log():
    b = B.parse_boot_log(read("a_bf16_32768_planner_args.log"))
    assert b["complete"] and b["vllm_version"] == "0.22.0"
    assert (b["available_kv_cache_gib"], b["kv_cache_tokens"], b["max_concurrency"]) == (58.81, 2517099, 76.82)
    assert b["max_concurrency_len"] == 32768 == b["max_model_len"]
    assert b["available_kv_cache_bytes"] == 63143770112  # exact, from the harness's probe
    assert (b["attention_block_size"], b["mamba_cache_mode"], b["model_loading_gib"]) == (1056, "align", 64.69)
    assert b["engine"]["tensor_parallel_size"] == 1 and b["engine"]["quantization"] is None
    assert b["engine"]["enable_prefix_caching"] is True and b["engine"]["dtype"] == "bfloat16"
    assert (b["max_num_seqs"], b["max_num_batched_tokens"], b["gpu_memory_utilization"]) == (256, 8192, 0.9)
    assert b["device_name"] == "NVIDIA H200"
    fp8 = B.parse_boot_log(read("d_fp8_32768.log"))
    assert fp8["engine"]["quantization"] == "fp8" and fp8["max_concurrency"] == 117.55


def test_parse_the_028_one_line_form_and_tp_ranks_and_the_cpu_engine():
    text = "\n".join([
        "(EngineCore pid=1) INFO 01-01 00:00:00 [core.py:1] Initializing a V1 LLM engine (v0.28.0) with config: "
        "model='Qwen/Qwen3.5-35B-A3B', speculative_config=None, tensor_parallel_size=2, quantization=None, "
        "enforce_eager=False, kv_cache_dtype=auto, max_seq_len=262144, enable_prefix_caching=True, dtype=torch.bfloat16",
        "(Worker_TP0 pid=2) INFO [gpu_worker.py:1] Available KV cache memory: 96.10 GiB",
        "(Worker_TP1 pid=3) INFO [gpu_worker.py:1] Available KV cache memory: 96.05 GiB",
        "(EngineCore pid=1) INFO [kv_cache_utils.py:1] GPU KV cache size: 9,404,936 tokens, Maximum concurrency "
        "for 262,144 tokens per request: 35.88x",
    ])
    b = B.parse_boot_log(text)
    assert b["complete"] and b["vllm_version"] == "0.28.0" and b["engine"]["tensor_parallel_size"] == 2
    assert b["available_kv_cache_gib"] == 96.05  # the smallest rank decides
    assert (b["kv_cache_tokens"], b["max_concurrency"], b["max_model_len"]) == (9404936, 35.88, 262144)
    cpu = B.parse_boot_log("INFO [kv_cache_utils.py:1] CPU KV cache size: 32,768 tokens\n"
                           "INFO Maximum concurrency for 512 tokens per request: 64.00x\n")
    assert cpu["complete"] and cpu["kv_cache_tokens"] == 32768


def test_an_unfinished_log_is_not_complete_and_compares_to_none():
    b = B.parse_boot_log("INFO Model loading took 64.69 GiB memory\n")
    assert not b["complete"] and "kv_cache_tokens" not in b
    c = B.compare_with_plan(b, {"kv_cache_tokens": 1, "max_concurrency": 1.0})
    assert c["ok"] is None and c["warnings"] == []


def test_compare_warns_with_both_numbers_when_the_gap_is_large():
    b = B.parse_boot_log(read("b_bf16_262144.log"))
    close = {"kv_cache_tokens": 2995637, "max_concurrency": 11.43, "available_kv_cache_memory_bytes": 63019190000,
             "kv_cache_block_size": 1056, "max_model_len": 262144}
    c = B.compare_with_plan(b, close)
    assert c["ok"] is True and not c["warnings"]
    assert "planned 2,995,637 tokens / 11.43x, vLLM 3,000,777 tokens / 11.45x" in c["summary"]
    old = dict(close, kv_cache_tokens=2097152, max_concurrency=8.0)  # the old planner's 8 vs vLLM's 11.45
    c = B.compare_with_plan(b, old)
    assert c["ok"] is False
    w = [x for x in c["warnings"] if x.startswith("max_concurrency")]
    assert w and "8.00" in w[0] and "11.45" in w[0] and "less" in w[0]
    c = B.compare_with_plan(b, dict(close, max_model_len=32768))
    assert any("not comparable" in x for x in c["warnings"])


def test_plan_inputs_from_the_seed_log():
    b = B.parse_boot_log(read("seed_bf16_eager_092.log"))
    i = B.plan_inputs_from_boot(b)
    assert i["quantization"] is None
    kw = i["kwargs"]
    assert (kw["gpu_memory_utilization"], kw["max_num_seqs"], kw["max_num_batched_tokens"]) == (0.92, 1024, 16384)
    assert kw["features"] == {"prefix_caching": False, "enforce_eager": True, "text_only": True, "mtp": False}
