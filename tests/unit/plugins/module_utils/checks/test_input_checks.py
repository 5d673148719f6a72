"""Input checks that need no host (module_utils.checks.input_checks)."""
import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks import input_checks as I


# ---- values -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value,ok", [(0.9, True), ("0.9", True), (1, True), (0, False), (1.5, False),
                                      ("high", False), (True, False), (None, False)])
def test_gpu_memory_utilization(value, ok):
    problems = I.value_problems([{"var": "llmfleet_gpu_memory_utilization", "value": value, "type": "float",
                                  "gt": 0, "max": 1, "example": 0.9}])
    assert (problems == []) == ok, problems
    if not ok:
        assert len(problems) == 1 and "\n" not in problems[0]
        assert problems[0].startswith("llmfleet_gpu_memory_utilization must be a number above 0 and at most 1")
        assert "e.g. 0.9" in problems[0]


def test_high_names_the_value_in_one_line():
    [msg] = I.value_problems([{"var": "llmfleet_gpu_memory_utilization", "value": "high", "type": "float",
                               "gt": 0, "max": 1, "example": 0.9}])
    assert msg == 'llmfleet_gpu_memory_utilization must be a number above 0 and at most 1 (e.g. 0.9); got "high".'


@pytest.mark.parametrize("value,ok", [(512, True), ("512", True), (0, True), (-5, False), ("long", False),
                                      (1.5, False), ("2.0", True)])
def test_int_values(value, ok):
    assert (I.value_problems([{"var": "llmfleet_max_model_len", "value": value, "type": "int", "min": 0}]) == []) == ok


def test_choice_dict_and_name():
    problems = I.value_problems([
        {"var": "llmfleet_accelerator", "value": "tpu", "type": "choice", "choices": ["gpu", "cpu"]},
        {"var": "llmfleet_features", "value": "tool_calling", "type": "dict"},
        {"var": "llmfleet_served_model_name", "value": "", "type": "str"},
        {"var": "llmfleet_served_model_name", "value": "my model", "type": "str"},
        {"var": "llmfleet_accelerator", "value": "cpu", "type": "choice", "choices": ["gpu", "cpu"]},
    ])
    assert problems[0] == 'llmfleet_accelerator must be one of gpu, cpu; got "tpu".'
    assert problems[1].startswith("llmfleet_features must be a dict")
    assert problems[2].startswith("llmfleet_served_model_name must not be empty")
    assert "spaces" in problems[3]
    assert len(problems) == 4


# ---- environment ------------------------------------------------------------------------------------------

def test_seed_prefix_caching_variable_is_refused_with_the_flag():
    [msg] = I.env_problems({"VLLM_ENABLE_PREFIX_CACHING": "1", "OMP_NUM_THREADS": "4"})
    assert "VLLM_ENABLE_PREFIX_CACHING" in msg and "--enable-prefix-caching" in msg and "vllm_server_env" in msg


def test_env_against_the_image_list():
    known = ["VLLM_LOGGING_LEVEL", "VLLM_TARGET_DEVICE"]
    assert I.env_problems({"VLLM_LOGGING_LEVEL": "DEBUG"}, known) == []
    [msg] = I.env_problems({"VLLM_LOGING_LEVEL": "DEBUG"}, known, image="img:1")
    assert "did you mean VLLM_LOGGING_LEVEL?" in msg and "img:1" in msg
    assert I.env_problems({"VLLM_WHATEVER": "1"}) == []  # without the image's list only the known-bad names


# ---- model directory --------------------------------------------------------------------------------------

def test_model_dir_complete_and_not():
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    full = ["config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors.index.json",
            "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert I.model_dir_problems(full, index) == []
    [msg] = I.model_dir_problems([n for n in full if n != "tokenizer_config.json"], index, where="X")
    assert msg.startswith("X lacks tokenizer_config.json")
    [msg] = I.model_dir_problems(full[:-1], index)
    assert "1 of the 2 shards" in msg and "model-00002-of-00002.safetensors" in msg
    assert "weight files" in I.model_dir_problems(["config.json", "tokenizer.json", "tokenizer_config.json"])[0]
    assert I.model_dir_problems(["config.json", "model.safetensors"], check_tokenizer=False) == []


# ---- ports behind the edge ----------------------------------------------------------------------------------


@pytest.mark.parametrize("replicas,edge,offset,fragment", [
    ([{"name": "0", "port": 60000}], True, 10000, "60000 + vllm_server_edge_port_offset 10000 = 70000, outside 1-65535"),
    ([{"name": "0", "port": 65535}, {"name": "1", "port": 65536}], False, 10000, "Replica 1 would listen on port 65536"),
    ([{"name": "0", "port": 0}], True, 10000, "Replica 0 would listen on port 0"),
    ([{"name": "0", "port": "x"}], True, 10000, "has no port number"),
])
def test_every_port_a_replica_listens_on_is_a_tcp_port(replicas, edge, offset, fragment):
    problems = I.port_problems(replicas, edge=edge, offset=offset)
    assert len(problems) == 1 and fragment in problems[0], problems


def test_ports_that_fit_behind_the_edge_pass():
    assert I.port_problems([{"name": "0", "port": 55535}], edge=True, offset=10000) == []
    assert I.port_problems([{"name": "0", "port": 65535}], edge=False, offset=10000) == []


def test_the_filter_names_the_variable_it_is_given():
    from ansible_collections.llmfleet.vllm.plugins.filter.vllm_args import FilterModule
    flt = FilterModule().filters()["replica_port_problems"]
    [problem] = flt([{"name": "0", "port": 60000}], True, 10000, "vllm_server_replicas")
    assert "lower vllm_server_replicas" in problem


def test_host_paths_must_be_absolute():
    checks = [{"var": "model_weights_dir", "value": v, "type": "abspath"} for v in ("models/tiny", "/", "", None)]
    problems = I.value_problems(checks)
    assert len(problems) == 4 and all(p.startswith("model_weights_dir must be an absolute path on the host")
                                      for p in problems)
    assert I.value_problems([{"var": "model_weights_dir", "value": "/srv/llmfleet/models/tiny", "type": "abspath"}]) == []
