"""The captures of the real vLLM CUDA engine (tests/device/run_vllm_engine.sh, tests/fixtures/gpu/vllm-h200-*):
the flags the collection renders are the CUDA build's flags, and the logs keep the format the planner's replay reads.

The planner arithmetic against these logs is tested elsewhere (the replay of every tests/fixtures/gpu/vllm-* log);
here: every rendered argv in a capture, and the planner's current rendering of the same cases, pass
llmfleet.vllm.vllm_flag_check's validation against that vLLM's own `vllm serve --help=all`."""
import glob
import json
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import planner as P
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.model_profiles import load_profiles
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_args import merge_vllm_args, render_vllm_args
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_flags import parse_help, validate_argv

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
CAPTURES = sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "gpu", "vllm-h200-*")))
LOGS = sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "gpu", "vllm-h200-*", "*_*.log")))
FACTS = os.path.join(ROOT, "tests", "fixtures", "gpu", "device-h200x1-2026-11-30", "gpu_facts_nvml.json")
# The cases of tests/device/render_vllm_argv.yml.
CASES = [("bf16_32768_prefix-on", "Qwen/Qwen3.5-35B-A3B", 32768, {}),
         ("bf16_32768_prefix-off", "Qwen/Qwen3.5-35B-A3B", 32768, {"prefix_caching": False}),
         ("bf16_262144_prefix-on", "Qwen/Qwen3.5-35B-A3B", 262144, {}),
         ("fp8_32768_prefix-on", "Qwen/Qwen3.5-35B-A3B-FP8", 32768, {})]


def _help_flags(capture):
    with open(os.path.join(capture, "vllm_serve_help_all.txt"), encoding="utf-8") as handle:
        return parse_help(handle.read())


def _header(path):
    with open(path, encoding="utf-8", errors="replace") as handle:
        first = handle.readline()
    assert first.startswith("HARNESS_JSON "), "%s: the first line must be the harness header" % path
    return json.loads(first[len("HARNESS_JSON "):])


def test_there_are_captures():
    assert CAPTURES and LOGS


@pytest.mark.parametrize("capture", CAPTURES, ids=os.path.basename)
def test_the_cuda_help_parses(capture):
    flags = _help_flags(capture)
    assert len(flags) > 300
    for flag in ("--enable-prefix-caching", "--no-enable-prefix-caching", "--language-model-only",
                 "--reasoning-parser", "--max-num-batched-tokens", "--gdn-prefill-backend", "--load-format"):
        assert flag in flags, flag


@pytest.mark.parametrize("log", LOGS, ids=lambda p: "/".join(p.split(os.sep)[-2:]))
def test_each_capture_ran_a_rendered_argv_the_cuda_build_accepts(log):
    head = _header(log)
    flags = _help_flags(os.path.dirname(log))
    assert head["rendered_argv"], head
    assert validate_argv(head["rendered_argv"], flags) == []
    if head["kind"] == "serve":
        command = head["command"]
        assert validate_argv(command[command.index("serve") + 2:], flags) == []
    with open(log, encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    # The lines the planner's replay reads.
    for needle in ("Available KV cache memory:", "GPU KV cache size:", "Maximum concurrency for"):
        assert needle in text, "%s lacks %r" % (log, needle)
    if head["kind"] == "serve":
        answers = [json.loads(line[len("CLIENT_JSON "):]) for line in text.splitlines()
                   if line.startswith("CLIENT_JSON ")]
        assert {a["step"]: a.get("status") for a in answers if "status" in a and a["step"] != "metrics"} == {
            "models": 200, "completions": 200, "chat_completions": 200}


@pytest.mark.parametrize("case,model,max_model_len,features", CASES, ids=[c[0] for c in CASES])
def test_the_planners_current_rendering_is_accepted_by_the_cuda_build(case, model, max_model_len, features):
    with open(FACTS, encoding="utf-8") as handle:
        facts = json.load(handle)["gpu_facts"]
    profiles = load_profiles(os.path.join(ROOT, "profiles"))
    plan = P.plan(facts, profiles[model], max_model_len=max_model_len, features=features)
    argv = render_vllm_args(merge_vllm_args(plan["vllm_args"], {}))
    for capture in CAPTURES:
        assert validate_argv(argv, _help_flags(capture)) == [], (case, argv)
