from ansible_collections.llmfleet.vllm.plugins.module_utils.serving.openai_smoke import (
    chat_reply_text,
    chunk_text,
    model_name_diagnosis,
    parse_sse_line,
    served_model_ids,
)


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
