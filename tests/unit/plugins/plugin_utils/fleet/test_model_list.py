"""llmfleet_models normalised and checked (issue #39 item 1): every refusal names the entry, the key and the fix;
the one-model variables make a one-entry list that keeps today's names."""
import pytest

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import model_list as ML

SHORTHAND = {"llmfleet_model": "Qwen/Qwen3.5-35B-A3B-FP8", "llmfleet_served_model_name": "qwen3.5-35b-a3b",
             "model_weights_dir": "/srv/models/qwen35", "model_weights_revision": "a" * 40,
             "llmfleet_max_model_len": 32768, "vllm_server_args_extra": {"enforce-eager": True}}


def ok(models, gpu_count=8):
    r = ML.model_list(models, gpu_count=gpu_count)
    assert r["problems"] == []
    return r["models"]


def refused(models, gpu_count=8):
    r = ML.model_list(models, gpu_count=gpu_count)
    assert r["models"] == [] and r["problems"]
    return " | ".join(r["problems"])


def test_the_shorthand_is_a_one_entry_list_with_todays_names():
    [entry] = ML.model_list(None, SHORTHAND)["models"]
    assert entry["name"] == "qwen3.5-35b-a3b" and entry["model"] == "Qwen/Qwen3.5-35B-A3B-FP8"
    assert entry["shorthand"] is True and entry["runner"] == "generate"
    # today's replica instances: llmfleet-vllm@0.service, llmfleet-vllm@1.service
    assert [ML.instance_name(entry, i) for i in range(2)] == ["0", "1"]
    assert ML.shorthand_variables(entry) == {
        "llmfleet_served_model_name": "qwen3.5-35b-a3b", "llmfleet_model": "Qwen/Qwen3.5-35B-A3B-FP8",
        "model_weights_revision": "a" * 40, "model_weights_source": "hf", "model_weights_local_path": "",
        "model_weights_dir": "/srv/models/qwen35", "llmfleet_max_model_len": 32768, "llmfleet_replicas": 0,
        "llmfleet_tensor_parallel_size": 0, "vllm_server_args_extra": {"enforce-eager": True},
        "vllm_server_env": {}, "llmfleet_features": {}}


def test_the_shorthand_served_name_defaults_to_the_model_directory_like_the_serve_role():
    [entry] = ML.model_list(None, {"llmfleet_model": "org/m", "model_weights_dir": "/srv/models/m-1/"})["models"]
    assert entry["name"] == "m-1"


def test_the_shorthand_keeps_a_served_name_that_is_no_unit_name():
    # today's served name is only the "model" clients send; the units are named 0, 1, ...: nothing to refuse
    [entry] = ML.model_list(None, dict(SHORTHAND, llmfleet_served_model_name="Qwen/Qwen3.5-35B"))["models"]
    assert entry["name"] == "Qwen/Qwen3.5-35B"


def test_a_list_entry_is_filled_in_and_names_its_instances_after_itself():
    [e] = ok([{"name": "llama-8b", "model": "meta-llama/Llama-3.1-8B-Instruct", "replicas": "2"}])
    assert e["replicas"] == 2 and e["tensor_parallel_size"] == 0 and e["gpus"] is None and e["shorthand"] is False
    assert e["args_extra"] == {} and e["adapters"] == [] and e["source"] == "hf"
    assert [ML.instance_name(e, i) for i in range(2)] == ["llama-8b-0", "llama-8b-1"]


def test_an_empty_list_is_refused():
    assert "empty list" in refused([])


def test_not_a_list_is_refused():
    assert "must be a list" in refused({"name": "a", "model": "b"})


def test_duplicate_names_are_refused_naming_both_entries():
    text = refused([{"name": "a", "model": "x/1"}, {"name": "a", "model": "x/2"}])
    assert "llmfleet_models[1] (a): name 'a' is already the name of llmfleet_models[0] (a)" in text


@pytest.mark.parametrize("name", ["Qwen/Qwen3-8B", "my model", "-lead", "x" * 65, "ünï"])
def test_a_name_that_cannot_be_a_unit_or_map_key_is_refused_with_the_pattern(name):
    text = refused([{"name": name, "model": "x/1"}])
    assert "cannot be a systemd unit instance" in text and ML.NAME_PATTERN in text


def test_an_unknown_key_is_refused_with_the_nearest_one():
    text = refused([{"name": "a", "model": "x/1", "gpu_shares": 0.5}])
    assert "llmfleet_models[0] (a): key 'gpu_shares' is not known; did you mean 'gpu_share'?" in text
    assert "did you mean" not in refused([{"name": "a", "model": "x/1", "zzz": 1}])


def test_a_missing_name_or_model_is_refused():
    text = refused([{"model": "x/1"}, {"name": "b"}])
    assert "llmfleet_models[0]: name is required" in text and "llmfleet_models[1] (b): model is required" in text


def test_two_entries_writing_one_weights_dir_with_different_content_are_refused():
    text = refused([{"name": "a", "model": "x/1", "weights_dir": "/m/x"},
                    {"name": "b", "model": "x/1", "revision": "v2", "weights_dir": "/m/x/"}])
    assert "llmfleet_models[1] (b): weights_dir /m/x/ is also where llmfleet_models[0] (a) writes x/1" in text
    # the same model and revision in one directory is one download, shared
    ok([{"name": "a", "model": "x/1", "weights_dir": "/m/x"}, {"name": "b", "model": "x/1", "weights_dir": "/m/x"}])


def test_gpus_outside_the_host_are_refused_with_its_gpu_count():
    text = refused([{"name": "a", "model": "x/1", "gpus": [6, 8, 9], "tensor_parallel_size": 3}], gpu_count=8)
    assert "gpus 8, 9 are not on this host, which has 8 GPUs (indexes 0-7)" in text
    # without the host's count (a plan on described hardware decides later) only the shape is checked
    assert ML.model_list([{"name": "a", "model": "x/1", "gpus": [9]}])["problems"] == []


def test_gpus_that_are_not_indexes_are_refused():
    assert "gpus must be a list of GPU indexes" in refused([{"name": "a", "model": "x/1", "gpus": "0,1"}])
    assert "lists a GPU twice" in refused([{"name": "a", "model": "x/1", "gpus": [1, 1]}])


def test_shares_above_one_gpu_are_refused():
    text = refused([{"name": "a", "model": "x/1", "gpus": [3], "gpu_share": 0.6},
                    {"name": "b", "model": "x/2", "gpus": [3], "gpu_share": 0.5}])
    assert "GPU 3: the shares of llmfleet_models[0] (a) (0.6), llmfleet_models[1] (b) (0.5) add up to 1.1" in text
    ok([{"name": "a", "model": "x/1", "gpus": [3], "gpu_share": 0.6},
        {"name": "b", "model": "x/2", "gpus": [3], "gpu_share": 0.4}])


def test_a_whole_gpu_entry_beside_a_pinned_share_is_refused():
    text = refused([{"name": "a", "model": "x/1", "gpus": [0]}, {"name": "b", "model": "x/2", "gpus": [0],
                                                                 "gpu_share": 0.2}])
    assert "GPU 0: llmfleet_models[0] (a) pinned to it without gpu_share" in text


@pytest.mark.parametrize("entry, says", [
    ({"gpus": [0, 1], "gpu_share": 0.5}, "gpu_share 0.5 is a fraction of ONE GPU, but the entry has gpus [0, 1]"),
    ({"gpus": [0], "gpu_share": 0.5, "tensor_parallel_size": 2}, "but the entry has tensor_parallel_size 2"),
    ({"gpu_share": 1.5}, "gpu_share must be a fraction of one GPU in (0, 1]"),
    ({"gpu_share": 0}, "gpu_share must be a fraction of one GPU in (0, 1]"),
    ({"gpus": [0, 1, 2], "tensor_parallel_size": 2}, "gpus [0, 1, 2] cannot hold whole replicas of tensor_parallel"),
    ({"gpus": [0, 1], "tensor_parallel_size": 2, "replicas": 2}, "cannot hold 2 replicas of tensor_parallel_size 2"),
])
def test_gpus_and_gpu_share_that_cannot_hold_are_refused(entry, says):
    assert says in refused([dict({"name": "a", "model": "x/1"}, **entry)])


def test_runner_must_be_generate_or_pooling():
    assert "runner must be generate or pooling" in refused([{"name": "a", "model": "x/1", "runner": "embed"}])
    [e] = ok([{"name": "a", "model": "x/1", "runner": "pooling"}])
    assert e["runner"] == "pooling"


@pytest.mark.parametrize("key, value", [("replicas", -1), ("tensor_parallel_size", "two"), ("max_model_len", True),
                                        ("env", ["A=1"]), ("args_extra", "x"), ("features", 1), ("adapters", {}),
                                        ("source", "s3")])
def test_values_of_the_wrong_kind_are_refused_naming_the_key(key, value):
    assert "llmfleet_models[0] (a): %s" % key in refused([{"name": "a", "model": "x/1", key: value}])


def test_an_entry_that_is_not_a_mapping_is_refused():
    assert "llmfleet_models[0] must be a mapping" in refused(["x/1"])
