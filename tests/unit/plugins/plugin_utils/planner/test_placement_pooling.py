"""Placement with pooling models and LoRA adapters (issue #39 items 5 and 6): an encoder-only embedding model
(microsoft/xtremedistil-l12-h384-uncased, BertModel, published config.json) takes a small share beside a
generator and gets no KV cache flag; a generator's adapters take their LoRA slots out of its KV cache."""
import json
import os

from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.gpu_catalogue import annotate_gpu_facts, load_catalogue
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.topology import gpu_facts_from_spec
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.model_list import model_list
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import placement as PL
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.engine_memory import weights_from_config
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.lora import lora_cudagraph_bytes, lora_memory_bytes
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.model_profiles import (
    normalize_config, profile_from_model_dir)

CONFIGS = os.path.join(os.path.dirname(__file__), *[".."] * 4, "fixtures", "model_configs")
BERT = "pooling/microsoft/xtremedistil-l12-h384-uncased"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def _config(repo):
    parts = repo.split("/")  # [pooling/]<org>/<name>: the pooling fixtures have a folder of their own
    with open(os.path.join(CONFIGS, *parts[:-2] + ["--".join(parts[-2:]) + ".json"])) as fh:
        return json.load(fh)


def facts(spec):
    return annotate_gpu_facts(gpu_facts_from_spec(spec, load_catalogue()), load_catalogue())


def by_instance(result):
    return {i["instance"]: i for i in result["instances"]}


def _inputs(entry, lora=None):
    if entry["runner"] == "pooling":
        return {"encoder": {"config": _config(entry["model"])}, "plan_args": {"max_model_len": None}}
    config = _config(entry["model"])
    weights = weights_from_config(normalize_config(config, entry["model"]), None)
    out = {"profile": profile_from_model_dir(config, weights_bytes=weights, name=entry["model"]),
           "plan_args": {"max_model_len": 32768}}
    if lora:
        out["lora"] = lora
    return out


def place(hardware, models, lora=None):
    checked = model_list(models)
    assert checked["problems"] == []
    inputs = {e["name"]: _inputs(e, lora) for e in checked["models"]}
    return PL.place(facts(hardware), checked["models"], inputs)


def test_an_embedding_model_shares_the_gpu_of_a_chat_model_without_kv_cache():
    r = place("1x H100 SXM", [{"name": "chat", "model": LLAMA},
                              {"name": "emb", "model": BERT, "runner": "pooling"}])
    assert r["fits"], r["problems"]
    inst = by_instance(r)
    emb = inst["emb-0"]
    assert emb["runner"] == "pooling" and emb["kv_cache_memory_bytes"] == 0 and emb["kv_cache_tokens"] == 0
    assert "kv-cache-memory-bytes" not in emb["vllm_args"] and emb["max_model_len"] == 512
    assert emb["shared"] and emb["share"] <= 0.05      # the smallest packing step holds it
    # the chat model keeps the rest, with its KV cache as an explicit flag, and starts first
    assert inst["chat-0"]["vllm_args"]["kv-cache-memory-bytes"] > 0 and emb["start_after"] == ["chat-0"]
    assert r["gpus"][0]["share_used"] <= 1.0


def test_an_embedding_model_alone_takes_a_gpu():
    r = place("1x H100 SXM", [{"name": "emb", "model": BERT, "runner": "pooling"}])
    assert r["fits"] and by_instance(r)["emb-0"]["gpus"] == [0]


def _graphs(inst):
    """The second set of CUDA graphs vLLM captures for active LoRA, for the instance's batch sizes."""
    return lora_cudagraph_bytes(normalize_config(_config(LLAMA), LLAMA), inst)


def test_lora_slots_come_out_of_the_kv_cache():
    models = [{"name": "chat", "model": LLAMA}]
    plain = by_instance(place("1x H100 SXM", models + [{"name": "b", "model": LLAMA}]))["chat-0"]
    lora = {"max_loras": 4, "max_lora_rank": 16}
    with_lora = by_instance(place("1x H100 SXM", models + [{"name": "b", "model": LLAMA}], lora=lora))["chat-0"]
    taken = lora_memory_bytes(_config(LLAMA), 4, 16) + _graphs(with_lora)
    assert with_lora["lora_memory_bytes"] == taken and 4 * 41943040 * 2 < taken
    assert with_lora["kv_cache_memory_bytes"] == plain["kv_cache_memory_bytes"] - taken
    assert with_lora["vllm_args"]["kv-cache-memory-bytes"] == with_lora["kv_cache_memory_bytes"]
    assert with_lora["kv_cache_tokens"] < plain["kv_cache_tokens"]


def test_lora_slots_come_out_of_the_kv_cache_of_a_model_alone_on_its_gpus():
    # the one-model path (one planner call over the host) sizes the KV cache after the LoRA slots too: vLLM's profile
    # run allocates them first, so a plan without them promises more tokens than the engine will have
    models = [{"name": "chat", "model": LLAMA}]
    plain = by_instance(place("1x H100 SXM", models))["chat-0"]
    with_lora = by_instance(place("1x H100 SXM", models, lora={"max_loras": 1, "max_lora_rank": 16}))["chat-0"]
    taken = lora_memory_bytes(_config(LLAMA), 1, 16) + _graphs(with_lora)
    assert with_lora["lora_memory_bytes"] == taken > _graphs(with_lora) > 0
    assert with_lora["kv_cache_memory_bytes"] == plain["kv_cache_memory_bytes"] - taken
    assert with_lora["kv_cache_tokens"] < plain["kv_cache_tokens"]
