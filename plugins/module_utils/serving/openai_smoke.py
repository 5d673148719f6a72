# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure checks behind the OpenAI smoke test: model listing, chat replies, server-sent events."""

from __future__ import annotations

import json


def served_model_ids(models_response):
    """The ids in a /v1/models response body (dict)."""
    data = (models_response or {}).get("data") or []
    return [entry.get("id") for entry in data if isinstance(entry, dict) and entry.get("id")]


def model_name_diagnosis(expected, listed):
    """None when ``expected`` is served; else a sentence that says what is served and how to fix it."""
    if expected in listed:
        return None
    if not listed:
        return ("The server lists no models at /v1/models; it is not serving yet or failed to load the "
                "model: check the unit's journal.")
    return ("Requests for model %r would fail with 404 'The model `%s` does not exist': the server serves %s. "
            "Send one of those names, or set llmfleet_served_model_name to %r and re-run serve.yml "
            "(vLLM's --served-model-name)." % (expected, expected, ", ".join(repr(x) for x in listed), expected))


def chat_reply_text(chat_response):
    """The assistant text of a /v1/chat/completions response (content, else reasoning content)."""
    choices = (chat_response or {}).get("choices") or []
    if not choices:
        return ""
    message = choices[0].get("message") or {}
    return (message.get("content") or message.get("reasoning_content") or message.get("reasoning") or "")


def parse_sse_line(line):
    """Decode one server-sent-events line: returns the JSON chunk, the string '[DONE]', or None."""
    if isinstance(line, bytes):
        line = line.decode("utf-8", "replace")
    line = line.strip()
    if not line.startswith("data:"):
        return None
    payload = line[len("data:"):].strip()
    if payload == "[DONE]":
        return "[DONE]"
    try:
        return json.loads(payload)
    except ValueError:
        return None


def chunk_text(chunk):
    """Text carried by one streamed chat chunk (content or reasoning delta)."""
    if not isinstance(chunk, dict):
        return ""
    choices = chunk.get("choices") or []
    if not choices:
        return ""
    delta = choices[0].get("delta") or {}
    return delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning") or ""
