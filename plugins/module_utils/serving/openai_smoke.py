# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure checks behind the OpenAI smoke test: model listing, chat replies, server-sent events; embeddings and scores
of pooling models, and the 4xx a chat request to one must get; what to test, by kind, from serving.json."""

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


# What a served model is smoke-tested with, by its kind: a generator chats; a pooling model converted to embed
# answers /v1/embeddings; one converted to classify (a reranker, a cross-encoder) answers /v1/score.
KINDS = ("generate", "embed", "score")


def smoke_kind(runner="generate", convert=None):
    """The smoke test's kind for a model served with ``runner`` and ``convert`` (serving.json's model entry)."""
    if runner == "pooling":
        return "score" if convert == "classify" else "embed"
    return "generate"


def pooling_kind(config, kind="embed"):
    """The test a pooling model gets: a cross-encoder (a *ForSequenceClassification class, a reranker) scores text
    pairs whatever the deployment said; other pooling models keep ``kind``."""
    archs = (config or {}).get("architectures") or []
    return "score" if any(str(a).endswith("ForSequenceClassification") for a in archs) else kind


def expected_embedding_size(config):
    """The length of the vectors /v1/embeddings returns for a model of this config.json: its hidden size (the text
    config's in a wrapper), as vLLM's embed pooler returns the last hidden state; None when the config has none."""
    config = config or {}
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    size = text.get("hidden_size") or config.get("hidden_size")
    return int(size) if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None


def embedding_problem(response, inputs, expected_size=None):
    """None when an /v1/embeddings answer carries one vector of numbers per input, each ``expected_size`` long (when
    given); else what is wrong, as a sentence."""
    data = (response or {}).get("data")
    if not isinstance(data, list) or len(data) != inputs:
        return "/v1/embeddings answered %s vectors for %d inputs." % (
            len(data) if isinstance(data, list) else "no", inputs)
    sizes = []
    for item in data:
        vector = item.get("embedding") if isinstance(item, dict) else None
        if not isinstance(vector, list) or not vector or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in vector):
            return "/v1/embeddings answered an embedding that is not a list of numbers: %r." % (str(vector)[:80],)
        sizes.append(len(vector))
    if expected_size and any(s != expected_size for s in sizes):
        return ("/v1/embeddings answered vectors of %s numbers; the model's hidden size is %d (a wrong model "
                "behind the name, or a --pooler-config that changes the dimensions)."
                % ("/".join(str(s) for s in sorted(set(sizes))), expected_size))
    return None


def score_problem(response, documents):
    """None when a /v1/score answer carries one numeric score per document; else what is wrong."""
    data = (response or {}).get("data")
    scores = [item.get("score") for item in data if isinstance(item, dict)] if isinstance(data, list) else []
    if len(scores) != documents or not all(isinstance(s, (int, float)) and not isinstance(s, bool) for s in scores):
        return "/v1/score answered %r for %d documents, not one number each." % (str(data)[:120], documents)
    return None


def chat_refusal_problem(status, model):
    """None when a chat request to a pooling model was refused with a 4xx (vLLM's answer: the route or the task is
    not there); else why that is wrong for clients (a 5xx or a hang looks like an outage)."""
    if status is None:
        return ("A chat request to the pooling model %s got no answer in time: clients that send chat to it hang "
                "instead of getting an error." % model)
    if 400 <= status < 500:
        return None
    if status < 300:
        return ("The pooling model %s answered a chat request with HTTP %d: it is served as a generator (check "
                "runner: pooling reached vLLM's --runner)." % (model, status))
    return "A chat request to the pooling model %s got HTTP %d, not a client error (4xx)." % (model, status)


def smoke_targets(models, base_urls=None, model=None):
    """What to smoke-test: [{base_url, model, kind, model_dir}], one per replica URL per served name: each of
    ``models`` (the served models of serving.json: [{name, runner, convert, model_path, base_urls, adapters}]) and
    each of its LoRA adapters, tested like its base model.  ``model`` given: only that name (the model it is, or
    whose adapter it is, else the first model: a name the server may not list, which the smoke test then
    diagnoses).  ``base_urls`` given: those URLs instead of the model's own."""
    entries = list(models or []) or [{"name": model, "runner": "generate"}]
    if model:
        owner = [e for e in entries if model == e.get("name") or model in (e.get("adapters") or [])] or entries[:1]
        entries = [dict(owner[0], name=model, adapters=[])]
    targets = []
    for entry in entries:
        kind = smoke_kind(entry.get("runner") or "generate", entry.get("convert"))
        for name in [entry.get("name")] + list(entry.get("adapters") or []):
            for url in base_urls or entry.get("base_urls") or []:
                targets.append({"base_url": url, "model": name, "kind": kind,
                                "model_dir": entry.get("model_path") or None})
    return targets
