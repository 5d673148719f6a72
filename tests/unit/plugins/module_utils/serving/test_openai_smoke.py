import json
import os

from ansible_collections.llmfleet.vllm.plugins.module_utils.serving.openai_smoke import (
    chat_refusal_problem,
    chat_reply_text,
    chunk_text,
    embedding_problem,
    expected_embedding_size,
    model_name_diagnosis,
    parse_sse_line,
    pooling_kind,
    score_problem,
    served_model_ids,
    smoke_kind,
    smoke_targets,
)

CONFIGS = os.path.join(os.path.dirname(__file__), *[".."] * 4, "fixtures", "model_configs")


def test_model_ids_come_from_the_data_list():
    body = {"object": "list", "data": [{"id": "qwen", "object": "model"}, {"id": "lora-a"}, {"object": "x"}]}
    assert served_model_ids(body) == ["qwen", "lora-a"]


def test_matching_name_has_no_diagnosis():
    assert model_name_diagnosis("qwen", ["qwen"]) is None


def test_mismatch_names_what_is_served_and_the_fix():
    message = model_name_diagnosis("Qwen/Qwen3.5-35B-A3B", ["/models/qwen"])
    assert "404" in message
    assert "'/models/qwen'" in message
    assert "--served-model-name" in message


def test_empty_listing_points_at_the_journal():
    assert "journal" in model_name_diagnosis("qwen", [])


def test_chat_text_falls_back_to_reasoning_content():
    assert chat_reply_text({"choices": [{"message": {"content": None, "reasoning_content": "thinking"}}]}) == "thinking"
    assert chat_reply_text({"choices": []}) == ""


def test_sse_lines_decode_chunks_and_done():
    chunk = parse_sse_line(b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n')
    assert chunk_text(chunk) == "Hi"
    assert parse_sse_line("data: [DONE]") == "[DONE]"
    assert parse_sse_line(": keep-alive") is None
    assert parse_sse_line("data: {broken") is None
    assert chunk_text({"choices": [{"delta": {"role": "assistant"}}]}) == ""


def _config(name):
    with open(os.path.join(CONFIGS, name)) as handle:
        return json.load(handle)


def test_the_kind_follows_runner_and_convert():
    assert smoke_kind() == "generate"
    assert smoke_kind("pooling") == "embed" and smoke_kind("pooling", "embed") == "embed"
    assert smoke_kind("pooling", "classify") == "score"


def test_a_cross_encoder_is_scored_whatever_the_deployment_said():
    assert pooling_kind({"architectures": ["XLMRobertaForSequenceClassification"]}) == "score"
    assert pooling_kind({"architectures": ["BertModel"]}) == "embed"
    assert pooling_kind(None, "score") == "score" and pooling_kind({}) == "embed"


def test_expected_embedding_size_is_the_published_hidden_size():
    # microsoft/xtremedistil-l12-h384-uncased (BertModel) and Qwen/Qwen3-1.7B (Qwen3ForCausalLM, the class of the
    # Qwen3-Embedding models), as published (tests/fixtures/model_configs/SOURCES.md)
    bert = _config(os.path.join("pooling", "microsoft--xtremedistil-l12-h384-uncased.json"))
    assert expected_embedding_size(bert) == 384
    assert expected_embedding_size(_config("Qwen--Qwen3-1.7B.json")) == 2048
    assert expected_embedding_size({"text_config": {"hidden_size": 64}}) == 64
    assert expected_embedding_size({}) is None


def test_embeddings_of_the_right_count_and_size_pass():
    answer = {"data": [{"embedding": [0.1] * 128}, {"embedding": [0.2] * 128}]}
    assert embedding_problem(answer, 2, 128) is None
    assert embedding_problem(answer, 2) is None
    assert "vectors of 128 numbers; the model's hidden size is 384" in embedding_problem(answer, 2, 384)
    assert embedding_problem(answer, 3) == "/v1/embeddings answered 2 vectors for 3 inputs."
    assert "not a list of numbers" in embedding_problem({"data": [{"embedding": "abc"}]}, 1)
    assert embedding_problem({"detail": "Not Found"}, 2) == "/v1/embeddings answered no vectors for 2 inputs."


def test_scores_must_be_one_number_per_document():
    assert score_problem({"data": [{"score": 0.7}, {"score": 0.1}]}, 2) is None
    assert "not one number each" in score_problem({"data": [{"score": None}, {"score": 0.1}]}, 2)
    assert "for 2 documents" in score_problem({}, 2)


def test_a_chat_to_a_pooling_model_must_get_a_4xx():
    assert chat_refusal_problem(404, "emb") is None and chat_refusal_problem(400, "emb") is None
    assert "got HTTP 500, not a client error" in chat_refusal_problem(500, "emb")
    assert "served as a generator" in chat_refusal_problem(200, "emb")
    assert "hang" in chat_refusal_problem(None, "emb")


MODELS = [
    {"name": "chat", "runner": "generate", "model_path": "/srv/m/chat", "adapters": ["sql"],
     "base_urls": ["http://127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1"]},
    {"name": "emb", "runner": "pooling", "model_path": "/srv/m/emb", "adapters": [],
     "base_urls": ["http://127.0.0.1:8003/v1"]},
    {"name": "rerank", "runner": "pooling", "convert": "classify", "model_path": "/srv/m/rr",
     "base_urls": ["http://127.0.0.1:8004/v1"]},
]


def test_every_model_and_adapter_is_tested_by_its_kind_on_each_replica():
    got = [(t["model"], t["kind"], t["base_url"][-7:-3], t["model_dir"]) for t in smoke_targets(MODELS)]
    assert got == [("chat", "generate", "8001", "/srv/m/chat"), ("chat", "generate", "8002", "/srv/m/chat"),
                   ("sql", "generate", "8001", "/srv/m/chat"), ("sql", "generate", "8002", "/srv/m/chat"),
                   ("emb", "embed", "8003", "/srv/m/emb"), ("rerank", "score", "8004", "/srv/m/rr")]


def test_one_named_model_or_adapter_only():
    assert [(t["model"], t["kind"]) for t in smoke_targets(MODELS, model="emb")] == [("emb", "embed")]
    assert [t["model"] for t in smoke_targets(MODELS, model="sql")] == ["sql", "sql"]
    urls = ["http://10.0.0.1:8000/v1"]
    assert smoke_targets(MODELS, base_urls=urls, model="emb") == [
        {"base_url": urls[0], "model": "emb", "kind": "embed", "model_dir": "/srv/m/emb"}]


def test_explicit_inputs_without_a_description_keep_todays_test():
    assert smoke_targets([], base_urls=["http://h:1/v1"], model="x") == [
        {"base_url": "http://h:1/v1", "model": "x", "kind": "generate", "model_dir": None}]
