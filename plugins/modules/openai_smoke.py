#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Smoke-test an OpenAI-compatible endpoint (vLLM) from the host it runs on."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: openai_smoke
short_description: Smoke-test an OpenAI-compatible endpoint
description:
  - Checks that C(/v1/models) lists the served model name, then tests the model by its O(kind).
  - C(generate) (a chat model or a LoRA adapter of one) - a chat completion returns non-empty text, and a streamed one
    is timed to its first token.
  - C(embed) (vLLM's pooling runner) - C(/v1/embeddings) returns one vector of numbers per input, of the model's
    hidden size (O(embedding_size), else read from O(model_dir)'s C(config.json)).
  - C(score) (a reranker or cross-encoder on the pooling runner) - C(/v1/score) returns one number per document.
  - For C(embed) and C(score), a chat request must get vLLM's 4xx (never a 5xx or a hang), unless
    O(check_chat_refused=false).
  - A served-name mismatch fails with the diagnosis (clients would get 404 "model does not exist").
  - Read-only; never changes anything.
options:
  base_url:
    description: Endpoint root including C(/v1), e.g. C(http://127.0.0.1:8000/v1).
    type: str
    required: true
  model:
    description: The model name clients send (vLLM's C(--served-model-name)).
    type: str
    required: true
  api_key:
    description: Bearer token, when the server requires one.
    type: str
    default: ""
  prompt:
    description: User message of the test requests.
    type: str
    default: "Say hello in five words."
  max_tokens:
    description: Tokens asked for in each test request.
    type: int
    default: 16
  timeout:
    description: Seconds allowed for each request.
    type: int
    default: 120
  ca_path:
    description:
      - The CA certificate (PEM) an C(https://) endpoint's certificate is verified against, for example the fleet's
        C(/etc/llmfleet/tls/ca.crt); empty, the system's trusted CAs. The certificate is always verified.
    type: path
    default: ""
    version_added: 1.1.0
  chat_template_kwargs:
    description: "Passed to vLLM as C(chat_template_kwargs), for example C({\"enable_thinking\": false})."
    type: dict
    default: {}
  kind:
    description: How the model is tested (see the description); C(generate) is the test of releases before 1.1.0.
    type: str
    choices: [generate, embed, score]
    default: generate
    version_added: 1.1.0
  embedding_size:
    description: The vector length C(embed) expects; unset, the hidden size in O(model_dir)'s C(config.json).
    type: int
    version_added: 1.1.0
  model_dir:
    description:
      - The model's directory on this host, read for its hidden size when O(embedding_size) is unset.
      - A cross-encoder there (a C(*ForSequenceClassification) architecture, a reranker) is tested with C(score)
        whatever O(kind) says.
    type: path
    version_added: 1.1.0
  check_chat_refused:
    description: For C(embed) and C(score), send a chat request and require a 4xx answer.
    type: bool
    default: true
    version_added: 1.1.0
author:
  - llmfleet maintainers (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.vllm.attributes
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  check_mode:
    support: full
    details: It only sends requests to the endpoint; it changes nothing.
"""

EXAMPLES = r"""
- name: Smoke-test replica 0
  llmfleet.vllm.openai_smoke:
    base_url: http://127.0.0.1:8000/v1
    model: qwen3.5-35b-a3b
    api_key: "{{ vllm_server_api_key }}"

- name: Smoke-test an edge that speaks TLS, verified against the fleet's CA
  llmfleet.vllm.openai_smoke:
    base_url: https://127.0.0.1:8000/v1
    model: qwen3.5-35b-a3b
    api_key: "{{ vllm_server_api_key }}"
    ca_path: /etc/llmfleet/tls/ca.crt
"""

RETURN = r"""
models:
  description: Model ids listed by /v1/models.
  type: list
  elements: str
  returned: always
chat_reply:
  description: Text of the non-streamed chat completion.
  type: str
  returned: success
chat_latency_ms:
  description: Wall time of the non-streamed chat completion.
  type: float
  returned: success
ttft_ms:
  description: Time to first token of the streamed chat completion (first non-empty delta).
  type: float
  returned: success
stream_total_ms:
  description: Wall time of the whole streamed completion.
  type: float
  returned: success
stream_chunks:
  description: Number of streamed chunks that carried text.
  type: int
  returned: success
kind:
  description: The test that ran, C(embed) or C(score) (see O(model_dir)).
  type: str
  returned: with O(kind=embed) or O(kind=score)
  version_added: 1.1.0
latency_ms:
  description: Wall time of the embeddings or score request.
  type: float
  returned: success with O(kind=embed) or O(kind=score)
  version_added: 1.1.0
embedding_size:
  description: Length of the vectors /v1/embeddings returned.
  type: int
  returned: success with O(kind=embed)
  version_added: 1.1.0
scores:
  description: The scores /v1/score returned, one per test document.
  type: list
  elements: float
  returned: success with O(kind=score)
  version_added: 1.1.0
summary:
  description: One sentence of what was tested and what came back (what the verify role reports).
  type: str
  returned: success
  version_added: 1.1.0
chat_status:
  description: The HTTP status a chat request to the pooling model got (a 4xx on success).
  type: int
  returned: success with O(kind=embed) or O(kind=score) and O(check_chat_refused)
  version_added: 1.1.0
"""

import json
import os
import time
import urllib.error

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import ConnectionError as UrlsConnectionError, open_url
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
)

# Texts of the pooling tests: two inputs (a batch), a query and two documents.
EMBED_INPUTS = ["The quick brown fox.", "A second, longer sentence about retrieval."]
SCORE_QUERY = "What is a cat?"
SCORE_DOCUMENTS = ["A cat is a small domesticated animal.", "Paris is the capital of France."]


def _request(module, path, body=None):
    url = module.params["base_url"].rstrip("/") + path
    headers = {"Content-Type": "application/json"}
    if module.params["api_key"]:
        headers["Authorization"] = "Bearer " + module.params["api_key"]
    data = json.dumps(body).encode() if body is not None else None
    return dict(url=url, data=data, headers=headers, method="POST" if body is not None else "GET")


def _open(module, request):
    try:
        return open_url(request["url"], data=request["data"], headers=request["headers"], method=request["method"],
                        timeout=module.params["timeout"], ca_path=module.params["ca_path"] or None)
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")[:500]
        hint = " (check the API key: vLLM's --api-key protects /v1)" if exc.code == 401 else ""
        module.fail_json(msg="%s %s answered HTTP %d%s: %s" % (request["method"], request["url"], exc.code, hint, detail))
    except (urllib.error.URLError, UrlsConnectionError, OSError) as exc:
        module.fail_json(msg="%s %s failed: %s (is the replica running and listening?)" % (
            request["method"], request["url"], exc))


def _status(module, request):
    """The HTTP status of a request (None when it got no answer in time); the body is not needed."""
    try:
        with open_url(request["url"], data=request["data"], headers=request["headers"], method=request["method"],
                      timeout=module.params["timeout"], ca_path=module.params["ca_path"] or None) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, UrlsConnectionError, OSError):
        return None


def _model_config(path):
    try:
        with open(os.path.join(path, "config.json")) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError, TypeError):
        return None


def _smoke_pooling(module, p, models):
    """The embed or score test, then the 4xx a chat request must get."""
    config = _model_config(p["model_dir"]) if p["model_dir"] else None
    kind = pooling_kind(config, p["kind"])
    result = dict(changed=False, models=models, kind=kind)
    started = time.monotonic()
    if kind == "embed":
        size = p["embedding_size"] or expected_embedding_size(config)
        with _open(module, _request(module, "/embeddings", {"model": p["model"], "input": EMBED_INPUTS})) as response:
            answer = json.load(response)
        problem = embedding_problem(answer, len(EMBED_INPUTS), size)
        if not problem:
            result["embedding_size"] = len(answer["data"][0]["embedding"])
    else:
        body = {"model": p["model"], "text_1": SCORE_QUERY, "text_2": SCORE_DOCUMENTS}
        with _open(module, _request(module, "/score", body)) as response:
            answer = json.load(response)
        problem = score_problem(answer, len(SCORE_DOCUMENTS))
        if not problem:
            result["scores"] = [item["score"] for item in answer["data"]]
    result["latency_ms"] = round((time.monotonic() - started) * 1000, 1)
    if problem:
        module.fail_json(msg="%s: %s" % (p["model"], problem), **result)
    if p["check_chat_refused"]:
        chat = {"model": p["model"], "messages": [{"role": "user", "content": p["prompt"]}], "max_tokens": 1}
        result["chat_status"] = _status(module, _request(module, "/chat/completions", chat))
        problem = chat_refusal_problem(result["chat_status"], p["model"])
        if problem:
            module.fail_json(msg=problem, **result)
    result["summary"] = "model %r listed; %s in %s ms%s." % (
        p["model"], "embeddings of %d numbers" % result["embedding_size"] if kind == "embed"
        else "scores %s" % ", ".join("%.4f" % x for x in result["scores"]), result["latency_ms"],
        "; a chat request got HTTP %s" % result["chat_status"] if p["check_chat_refused"] else "")
    module.exit_json(**result)


def _smoke_generate(module, p, models):
    """A chat completion with text, then a streamed one timed to its first token (the test before 1.1.0)."""
    body = {
        "model": p["model"],
        "messages": [{"role": "user", "content": p["prompt"]}],
        "max_tokens": p["max_tokens"],
        "temperature": 0,
    }
    if p["chat_template_kwargs"]:
        body["chat_template_kwargs"] = p["chat_template_kwargs"]

    started = time.monotonic()
    with _open(module, _request(module, "/chat/completions", body)) as response:
        reply = chat_reply_text(json.load(response))
    chat_latency_ms = (time.monotonic() - started) * 1000
    if not reply.strip():
        module.fail_json(msg="The chat completion came back empty: the model loaded but produced no text "
                             "(a broken tokenizer or chat template is the usual cause).", models=models)

    stream_body = dict(body, stream=True)
    started = time.monotonic()
    ttft_ms = None
    chunks = 0
    with _open(module, _request(module, "/chat/completions", stream_body)) as response:
        for raw in response:
            event = parse_sse_line(raw)
            if event == "[DONE]":
                break
            if chunk_text(event):
                chunks += 1
                if ttft_ms is None:
                    ttft_ms = (time.monotonic() - started) * 1000
    stream_total_ms = (time.monotonic() - started) * 1000
    if ttft_ms is None:
        module.fail_json(msg="The streamed chat completion sent no text chunk.", models=models)

    summary = ("model %r listed; chat reply %s in %.1f ms; streamed time to first token %.1f ms (%d chunks in %.1f ms)."
               % (p["model"], json.dumps(reply), chat_latency_ms, ttft_ms, chunks, stream_total_ms))
    module.exit_json(changed=False, models=models, chat_reply=reply, chat_latency_ms=round(chat_latency_ms, 1),
                     ttft_ms=round(ttft_ms, 1), stream_total_ms=round(stream_total_ms, 1), stream_chunks=chunks,
                     summary=summary)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            base_url=dict(type="str", required=True),
            model=dict(type="str", required=True),
            api_key=dict(type="str", default="", no_log=True),
            prompt=dict(type="str", default="Say hello in five words."),
            max_tokens=dict(type="int", default=16, no_log=False),
            timeout=dict(type="int", default=120),
            chat_template_kwargs=dict(type="dict", default={}),
            kind=dict(type="str", default="generate", choices=["generate", "embed", "score"]),
            embedding_size=dict(type="int"),
            model_dir=dict(type="path"),
            check_chat_refused=dict(type="bool", default=True),
            ca_path=dict(type="path", default=""),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not p["base_url"].startswith(("http://", "https://")):
        module.fail_json(msg="base_url must start with http:// or https://, e.g. http://127.0.0.1:8000/v1; got %r" % p["base_url"])

    with _open(module, _request(module, "/models")) as response:
        models = served_model_ids(json.load(response))
    diagnosis = model_name_diagnosis(p["model"], models)
    if diagnosis:
        module.fail_json(msg=diagnosis, models=models)
    if p["kind"] != "generate":
        _smoke_pooling(module, p, models)

    _smoke_generate(module, p, models)


if __name__ == "__main__":
    main()
