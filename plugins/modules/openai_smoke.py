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
  - Checks that C(/v1/models) lists the served model name, that a chat completion returns non-empty text,
    and measures a streamed chat completion's time to first token.
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
"""

import json
import time
import urllib.error

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import ConnectionError as UrlsConnectionError, open_url
from ansible_collections.llmfleet.vllm.plugins.module_utils.serving.openai_smoke import (
    chat_reply_text,
    chunk_text,
    model_name_diagnosis,
    parse_sse_line,
    served_model_ids,
)


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

    module.exit_json(changed=False, models=models, chat_reply=reply, chat_latency_ms=round(chat_latency_ms, 1),
                     ttft_ms=round(ttft_ms, 1), stream_total_ms=round(stream_total_ms, 1), stream_chunks=chunks)


if __name__ == "__main__":
    main()
