"""The failure classifier: real log lines (tests/fixtures/logs, each with its public source) must get the
right diagnosis, and the fix must name the concrete values the caller knows."""
import glob
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent.diagnostics import (
    SIGNATURES,
    classify,
    format_report,
    validate_signatures,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "logs")


def _load_fixture(path):
    header, lines = {}, []
    with open(path, encoding="utf-8") as handle:
        for line in handle.read().splitlines():
            if line.startswith("# ") and ":" in line and not lines and line.split(":", 1)[0][2:] in ("source", "expect"):
                key, value = line[2:].split(":", 1)
                header[key.strip()] = value.strip()
            else:
                lines.append(line)
    return header, "\n".join(lines)


FIXTURE_FILES = sorted(glob.glob(os.path.join(FIXTURES, "*.log")))


def test_every_fixture_names_its_source_and_expectation():
    assert len(FIXTURE_FILES) >= 15
    for path in FIXTURE_FILES:
        header, body = _load_fixture(path)
        assert header.get("source"), path
        assert header.get("expect") in {s["id"] for s in SIGNATURES}, path
        assert body.strip(), path


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=[os.path.basename(p) for p in FIXTURE_FILES])
def test_real_log_lines_get_the_right_diagnosis_first(path):
    header, body = _load_fixture(path)
    findings = classify(body)
    assert findings, "no diagnosis for %s" % path
    assert findings[0]["id"] == header["expect"], [f["id"] for f in findings]
    # The evidence is a line of the log, not a paraphrase.
    assert findings[0]["evidence"] in [line.strip() for line in body.splitlines()]


def test_signature_data_is_well_formed():
    assert validate_signatures() == []
    assert len(SIGNATURES) >= 20


def test_validate_signatures_reports_bad_entries():
    bad = [{"id": "x", "confidence": 1, "patterns": ["("], "diagnosis": "d"}, {"id": "x"}]
    problems = validate_signatures(bad)
    assert any("lacks fix" in p for p in problems)
    assert any("bad pattern" in p for p in problems)
    assert any("duplicate id" in p for p in problems)


def test_adding_a_signature_is_adding_an_entry():
    extra = SIGNATURES + [{
        "id": "my_site_quota", "confidence": 99, "patterns": [r"quota exceeded for (?P<who>\w+)"],
        "diagnosis": "{who} is over quota", "fix": "ask for more",
    }]
    findings = classify("ERROR quota exceeded for alice", signatures=extra)
    assert findings[0]["id"] == "my_site_quota"
    assert findings[0]["diagnosis"] == "alice is over quota"


def test_kv_budget_fix_names_the_plans_values_first():
    line = ("ValueError: To serve at least one request with the model's max seq len (262144), (5.00 GiB KV cache "
            "is needed, which is larger than the available KV cache memory (0.71 GiB). Based on the available "
            "memory, the estimated maximum model length is 36864. Try increasing `gpu_memory_utilization`")
    plain = classify(line)[0]
    assert plain["id"] == "kv_cache_too_small_for_max_model_len"
    assert "262144" in plain["diagnosis"]
    assert "Lower max_model_len to 36864" in plain["fix"]
    planned = classify(line, {"suggested_max_model_len": 32768, "suggested_variant": "Qwen/Qwen3.5-35B-A3B-FP8"})[0]
    assert "Lower max_model_len to 32768" in planned["fix"]
    assert "36864 fits" in planned["fix"]
    assert "Qwen/Qwen3.5-35B-A3B-FP8" in planned["fix"]


def test_cuda_oom_fix_names_suggested_values_or_generic_wording():
    line = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    generic = classify(line)[0]["fix"]
    assert "a lower value" in generic and "{" not in generic
    concrete = classify(line, {"suggested_gpu_memory_utilization": 0.85, "suggested_max_model_len": 65536,
                               "suggested_max_num_seqs": 64})[0]["fix"]
    assert "0.85" in concrete and "65536" in concrete and "64" in concrete


def test_seed_pin_v0_10_with_qwen35_names_the_minimum_version():
    line = ("ValueError: Model architectures ['Qwen3_5MoeForConditionalGeneration'] are not supported for now. "
            "Supported architectures: ['AquilaModel', 'LlamaForCausalLM']")
    finding = classify(line, {"vllm_version": "0.10.0", "image": "vllm/vllm-openai:v0.10.0"})[0]
    assert finding["id"] == "architecture_unsupported"
    assert "Qwen3_5MoeForConditionalGeneration" in finding["diagnosis"]
    assert "0.10.0" in finding["diagnosis"]
    assert ">= 0.17.0" in finding["fix"]
    assert "vllm/vllm-openai:v0.17.0" in finding["fix"]


def test_profile_min_version_overrides_the_builtin_table():
    line = "Model architectures ['Qwen3_5MoeForConditionalGeneration'] are not supported for now."
    finding = classify(line, {"min_vllm_version": "0.19.1"})[0]
    assert ">= 0.19.1" in finding["fix"]


def test_unknown_architecture_without_known_minimum_still_reads_as_a_sentence():
    finding = classify("Model architectures ['TotallyNewForCausalLM'] are not supported for now.")[0]
    assert "TotallyNewForCausalLM" in finding["diagnosis"]
    assert "{" not in finding["fix"] and "lists this architecture" in finding["fix"]


def test_transformers_unknown_model_type_is_an_architecture_problem():
    line = ("ValueError: The checkpoint you are trying to load has model type `qwen3_5_moe` but Transformers "
            "does not recognize this architecture.")
    finding = classify(line)[0]
    assert finding["id"] == "architecture_unsupported"
    assert ">= 0.17.0" in finding["fix"]


def test_seed_prefix_caching_env_var_names_the_real_flag():
    line = "WARNING 11-30 12:00:00 [interface.py:1458] Unknown vLLM environment variable detected: VLLM_ENABLE_PREFIX_CACHING"
    finding = classify(line)[0]
    assert finding["id"] == "unknown_vllm_env_var"
    assert "VLLM_ENABLE_PREFIX_CACHING" in finding["diagnosis"]
    assert "--enable-prefix-caching" in finding["fix"]


def test_each_unknown_env_var_is_its_own_finding():
    text = "\n".join("Unknown vLLM environment variable detected: %s" % v for v in ("VLLM_A", "VLLM_B", "VLLM_A"))
    findings = classify(text)
    assert sorted(f["diagnosis"].split()[5].rstrip(":") for f in findings) == ["VLLM_A", "VLLM_B"]
    assert {f["count"] for f in findings} == {1, 2}


def test_driver_fix_names_the_minimum_driver_for_cuda_13():
    finding = classify("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.0, please update")[0]
    assert "580.65.06" in finding["fix"] and "CUDA 13.0" in finding["fix"]


def test_port_fix_names_the_port_from_context():
    finding = classify("OSError: [Errno 98] Address already in use", {"port": 8001})[0]
    assert finding["id"] == "port_in_use"
    assert "sport = :8001" in finding["fix"]


def test_served_name_mismatch_names_both_names():
    body = '{"error":{"message":"The model `qwen35-a3b` does not exist.","type":"NotFoundError","param":"model","code":404}}'
    finding = classify(body, {"served_model_name": "qwen3.5-35b-a3b"})[0]
    assert finding["id"] == "served_model_name_mismatch"
    assert "qwen35-a3b" in finding["diagnosis"]
    assert "qwen3.5-35b-a3b" in finding["fix"]


def test_collector_evidence_lines_are_classified_too():
    findings = classify([
        "[llmfleet] container llmfleet-vllm-0 was OOM-killed (exit code 137)",
        "[llmfleet] model directory /srv/models/qwen has no tokenizer files (tokenizer.json, tokenizer_config.json)",
    ])
    assert {f["id"] for f in findings} == {"container_oom_killed", "tokenizer_missing"}


def test_findings_are_ordered_by_confidence():
    text = "\n".join([
        "Unknown vLLM environment variable detected: VLLM_FOO",
        "torch.OutOfMemoryError: CUDA out of memory.",
        "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.9, please update",
    ])
    ids = [f["id"] for f in classify(text)]
    assert ids == ["driver_too_old_for_image_cuda", "cuda_out_of_memory", "unknown_vllm_env_var"]
    confidences = [f["confidence"] for f in classify(text)]
    assert confidences == sorted(confidences, reverse=True)


def test_stalled_loading_only_when_it_is_the_last_thing_logged_and_nothing_else_matched():
    loading = "INFO Loading safetensors checkpoint shards:  50% Completed | 7/14"
    assert [f["id"] for f in classify("INFO starting\n" + loading)] == ["weights_loading_stalled"]
    assert classify(loading + "\nINFO a\nINFO b\nINFO c") == []
    after_error = classify(loading + "\ntorch.OutOfMemoryError: CUDA out of memory.")
    assert [f["id"] for f in after_error] == ["cuda_out_of_memory"]


def test_healthy_log_has_no_findings():
    healthy = """INFO 11-30 10:00:01 [api_server.py:1000] vLLM API server version 0.32.0
INFO 11-30 10:00:20 [launcher.py:40] Route: /v1/chat/completions, Methods: POST
INFO:     Started server process [1]
INFO:     Application startup complete.
INFO:     127.0.0.1:50000 - "GET /health HTTP/1.1" 200 OK"""
    assert classify(healthy) == []


def test_ansi_colour_is_stripped_from_evidence():
    finding = classify("\x1b[1;31mERROR\x1b[0m No available memory for the cache blocks.")[0]
    assert finding["evidence"] == "ERROR No available memory for the cache blocks."


def test_report_puts_diagnosis_and_fix_above_the_raw_lines():
    raw = ["line %d" % i for i in range(100)] + ["OSError: [Errno 98] Address already in use"]
    findings = classify(raw, {"port": 8000})
    report = format_report(findings, title="llmfleet-vllm@0", raw_lines=raw, raw_limit=5)
    assert report[0] == "llmfleet-vllm@0"
    assert report[1].startswith("DIAGNOSIS 1/1 [port_in_use]")
    assert report[2].startswith("  fix: ")
    assert report.index("--- last 5 log lines ---") > 2
    assert report[-1] == "OSError: [Errno 98] Address already in use"
    assert "No known failure signature matched" in format_report([], raw_lines=["x"])[0]


def test_a_pull_that_succeeded_is_not_a_diagnosis():
    log = ("Unable to find image 'vllm/vllm-openai:v0.17.0' locally\nv0.17.0: Pulling from vllm/vllm-openai\n"
           "Status: Downloaded newer image for vllm/vllm-openai:v0.17.0\n")
    assert classify(log) == []
    denied = classify("docker: Error response from daemon: pull access denied for llmfleet/vllm, repository does "
                      "not exist or may require 'docker login'")
    assert denied[0]["id"] == "image_not_available" and "llmfleet/vllm" in denied[0]["diagnosis"]


def test_vllm_log_line_of_a_404_names_the_valid_aliases():
    # Logged by the vLLM CPU engine 0.32.0 for a request naming the wrong model (provoked in the test bed).
    line = ("(APIServer pid=1) ERROR 11-30 15:08:43 [serving.py:274] Error with model error=ErrorInfo(message='The "
            "model `qwen35-a3b` does not exist. Valid aliases: tiny.', type='NotFoundError', param='model', code=404)")
    finding = classify(line)[0]
    assert finding["id"] == "served_model_name_mismatch"
    assert "Use the served name in requests (tiny)" in finding["fix"]
