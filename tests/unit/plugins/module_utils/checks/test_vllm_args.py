import json

import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_args import (
    VllmArgsError,
    merge_vllm_args,
    render_vllm_args,
)


def test_booleans_render_as_flag_and_negation():
    argv = render_vllm_args({"enable-expert-parallel": True, "enable_prefix_caching": False})
    assert argv == ["--enable-expert-parallel", "--no-enable-prefix-caching"]


def test_none_drops_the_flag():
    assert render_vllm_args({"max-num-seqs": None, "max-model-len": 4096}) == ["--max-model-len", "4096"]


def test_dict_becomes_one_json_argument():
    argv = render_vllm_args({"speculative-config": {"method": "mtp", "num_speculative_tokens": 1}})
    assert argv[0] == "--speculative-config"
    assert json.loads(argv[1]) == {"method": "mtp", "num_speculative_tokens": 1}
    assert len(argv) == 2


def test_list_repeats_the_flag():
    assert render_vllm_args({"middleware": ["a", "b"]}) == ["--middleware", "a", "--middleware", "b"]


def test_order_is_stable_whatever_the_dict_order():
    a = render_vllm_args({"tensor-parallel-size": 2, "max-model-len": 8192})
    b = render_vllm_args({"max-model-len": 8192, "tensor-parallel-size": 2})
    assert a == b == ["--max-model-len", "8192", "--tensor-parallel-size", "2"]


@pytest.mark.parametrize("reserved", ["model", "port", "api-key", "api_key", "served-model-name", "host"])
def test_reserved_flags_are_refused(reserved):
    with pytest.raises(VllmArgsError, match="serve role"):
        render_vllm_args({reserved: "x"})


def test_same_flag_twice_in_two_spellings_is_refused():
    with pytest.raises(VllmArgsError, match="twice"):
        render_vllm_args({"max_model_len": 1, "max-model-len": 2})


@pytest.mark.parametrize("bad", ["max model len", "Max-Model-Len", "", "--"])
def test_malformed_names_are_refused(bad):
    with pytest.raises(VllmArgsError):
        render_vllm_args({bad: 1})


def test_merge_later_layer_wins_across_spellings():
    merged = merge_vllm_args({"max_model_len": 1, "enforce-eager": True}, {"max-model-len": 2, "enforce_eager": None})
    assert merged == {"max-model-len": 2, "enforce-eager": None}
    assert render_vllm_args(merged) == ["--max-model-len", "2"]


def test_one_replica_per_planned_gpu_group_with_consecutive_ports():
    from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_args import replica_specs
    assert replica_specs([[0, 1], [2, 3]], "gpu", 9000) == [
        {"name": "0", "port": 9000, "gpus": [0, 1]},
        {"name": "1", "port": 9001, "gpus": [2, 3]},
    ]


def test_cpu_profile_runs_one_replica_without_gpus():
    from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_args import replica_specs
    assert replica_specs([[0], [1]], "cpu", 8000) == [{"name": "0", "port": 8000, "gpus": []}]


@pytest.mark.parametrize("bad", [[[]], [["a"]], [[-1]], ["0"]])
def test_malformed_plan_replicas_are_refused(bad):
    from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_args import replica_specs
    with pytest.raises(VllmArgsError, match="replica 0"):
        replica_specs(bad, "gpu")


def test_replica_specs_refuse_a_port_base_that_is_not_a_port():
    from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_args import VllmArgsError, replica_specs
    with pytest.raises(VllmArgsError, match="vllm_server_port_base must be a TCP port number"):
        replica_specs(None, "cpu", "eighty")
    with pytest.raises(VllmArgsError, match="1-65535"):
        replica_specs([[0]], "gpu", 70000)


def test_argv_groups_keep_each_value_with_its_flag():
    from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_args import argv_groups
    argv = render_vllm_args({"enforce-eager": True, "max-model-len": 512, "middleware": ["a", "b"]})
    assert argv_groups(argv) == [["--enforce-eager"], ["--max-model-len", "512"], ["--middleware", "a"], ["--middleware", "b"]]
