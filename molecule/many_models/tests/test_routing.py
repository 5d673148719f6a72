"""One endpoint that routes by model (issue #39 items 4-6), on this host's edge in front of the real engines: its one
client port (8000) picks the model's replicas by the body's "model", also after 64 KiB of body; /v1/models and an
unknown model are answered by the edge; the embedding model gives vectors of its hidden size and passes vLLM's 4xx to
a chat request; the LoRA adapter is served by its own name; a key limited to one model (or to the adapter) reaches
only that one. Runs after test_many_models.py, which leaves the host serving the list of models.yml."""
import json
import shlex
import time

from test_many_models import API_KEY, MODELS, _models, _site  # the scenario's own runs of site.yml

LIMITED_KEY = "llmfleet-limited-key-7d21"
ADAPTER_KEY = "llmfleet-adapter-key-93b0"
ADAPTER = "tiny-llama-sql"
# Every name the host serves, as /v1/models lists them: each model, its adapters after it.
NAMES = ["tiny", "tiny-llama", ADAPTER, "tiny-bert"]
# Run on the host: one request to the edge; prints [status, the answer as JSON]. pad: a "user" field of that many
# bytes before the rest of the body (a long body in which "model" comes late).
CLIENT = """
import json, ssl, sys, urllib.error, urllib.request
# The edge speaks TLS only (issue #41): verified against the fleet's CA, as every client does.
context = ssl.create_default_context(cafile="/etc/llmfleet/tls/ca.crt")
method, path, key, body, pad = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
if pad:
    body = json.dumps(dict([("user", "u" * pad)] + list(json.loads(body).items())))
req = urllib.request.Request("https://127.0.0.1:8000" + path, data=body.encode() if body else None, method=method)
req.add_header("Content-Type", "application/json")
req.add_header("Authorization", "Bearer " + key)
try:
    with urllib.request.urlopen(req, timeout=120, context=context) as resp:
        print(json.dumps([resp.status, json.loads(resp.read())]))
except urllib.error.HTTPError as exc:
    print(json.dumps([exc.code, json.loads(exc.read() or b"null")]))
"""


def _edge(host, method, path, body=None, key=API_KEY, pad=0):
    """(status, answer) of one request to the edge's one client port (a str body is sent as it is)."""
    text = body if isinstance(body, str) else json.dumps(body) if body is not None else ""
    out = host.check_output("python3 -c %s %s %s %s %s %d" % (
        shlex.quote(CLIENT), method, shlex.quote(path), shlex.quote(key), shlex.quote(text), pad))
    status, answer = json.loads(out)
    return status, answer


def _chat(model):
    return {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "model": model}


def test_the_edge_routes_each_request_to_its_models_engine(host):
    for model in ("tiny", "tiny-llama", ADAPTER):
        status, answer = _edge(host, "POST", "/v1/chat/completions", _chat(model))
        assert (status, answer["model"]) == (200, model)


def test_the_model_after_64_kib_of_body_is_still_found_and_a_body_over_the_limit_gets_413(host):
    # "user" (an OpenAI field vLLM accepts) of 70 KiB before "model".
    status, answer = _edge(host, "POST", "/v1/chat/completions", _chat("tiny-llama"), pad=70 * 1024)
    assert (status, answer["model"]) == (200, "tiny-llama")
    status, answer = _edge_oversized(host, _chat("tiny"), 1024 * 1024 + 1)
    assert status == 413 and "loadbalancer_max_body_bytes" in answer["error"]["message"]


def _edge_oversized(host, body, pad):
    """(status, answer) of a request whose body (a "user" field of pad bytes first) is over the edge's limit, sent as
    curl sends a large body (Expect: 100-continue): the edge answers 413 on the headers and closes, and a client that
    writes the whole body first (urllib) may see the closed connection before it reads the answer."""
    host.check_output("python3 -c %s" % shlex.quote(
        "import json; open('/tmp/llmfleet-oversized.json', 'w').write(json.dumps(dict([('user', 'u' * %d)] + "
        "list(json.loads(%r).items()))))" % (pad, json.dumps(body))))
    out = host.check_output(
        "curl -sS --cacert /etc/llmfleet/tls/ca.crt -H 'Expect: 100-continue' -H 'Content-Type: application/json' "
        "-H 'Authorization: Bearer %s' --data-binary @/tmp/llmfleet-oversized.json -o /tmp/llmfleet-oversized.out "
        "-w '%%{http_code}' https://127.0.0.1:8000/v1/chat/completions" % API_KEY)
    return int(out), json.loads(host.file("/tmp/llmfleet-oversized.out").content_string)


def test_v1_models_lists_the_served_models_and_an_unknown_one_gets_404(host):
    status, answer = _edge(host, "GET", "/v1/models")
    assert status == 200 and [m["id"] for m in answer["data"]] == NAMES
    status, answer = _edge(host, "POST", "/v1/chat/completions", _chat("tiny-qwen"))
    assert status == 404 and answer["error"]["message"].endswith("This key may use: %s." % ", ".join(NAMES))


def test_embeddings_through_the_edge_are_vectors_of_the_models_hidden_size(host):
    hidden = json.loads(host.file("/srv/llmfleet/models/tiny-bert/config.json").content_string)["hidden_size"]
    status, answer = _edge(host, "POST", "/v1/embeddings", {"model": "tiny-bert", "input": ["hello", "fleet"]})
    assert status == 200, answer
    assert [len(d["embedding"]) for d in answer["data"]] == [hidden, hidden]
    assert answer["model"] == "tiny-bert"


def test_a_chat_request_to_the_embedding_model_gets_vllms_4xx_at_once(host):
    started = time.monotonic()
    status, answer = _edge(host, "POST", "/v1/chat/completions", _chat("tiny-bert"))
    # vLLM's pooling runner has no chat route: its own answer comes through, not the edge's 404 of an unknown model.
    assert 400 <= status < 500 and "This key may use" not in json.dumps(answer), (status, answer)
    assert time.monotonic() - started < 30


def test_a_key_limited_to_one_model_reaches_only_that_one(host):
    keys = [{"key": LIMITED_KEY, "models": ["tiny-llama"]}, {"key": ADAPTER_KEY, "models": [ADAPTER]}]
    rc, out, wall = _site(dict(_models(*MODELS["llmfleet_models"]), llmfleet_api_keys=keys))
    print("adding limited keys: %.0fs" % wall)
    assert rc == 0, out[-3000:]
    status, answer = _edge(host, "POST", "/v1/chat/completions", _chat("tiny-llama"), key=LIMITED_KEY)
    assert (status, answer["model"]) == (200, "tiny-llama")
    status, answer = _edge(host, "POST", "/v1/chat/completions", _chat("tiny"), key=LIMITED_KEY)
    assert status == 403 and answer["error"]["message"].endswith("It may use: tiny-llama.")
    assert [m["id"] for m in _edge(host, "GET", "/v1/models", key=LIMITED_KEY)[1]["data"]] == ["tiny-llama"]
    # Neither key is in a configuration file of the edge.
    edge_cfg = host.check_output("cat /etc/llmfleet/edge.cfg")
    assert LIMITED_KEY not in edge_cfg and ADAPTER_KEY not in edge_cfg


def test_a_key_limited_to_the_adapter_does_not_reach_its_base_model(host):
    """Issue #39 item 6: the adapter and its base model share one backend; the key of the adapter gets only it."""
    status, answer = _edge(host, "POST", "/v1/chat/completions", _chat(ADAPTER), key=ADAPTER_KEY)
    assert (status, answer["model"]) == (200, ADAPTER)
    status, answer = _edge(host, "POST", "/v1/chat/completions", _chat("tiny-llama"), key=ADAPTER_KEY)
    assert status == 403 and answer["error"]["message"].endswith("It may use: %s." % ADAPTER)
    assert [m["id"] for m in _edge(host, "GET", "/v1/models", key=ADAPTER_KEY)[1]["data"]] == [ADAPTER]
    # The edge routes on the first "model" of a body and vLLM serves the last: a body with two is refused.
    twice = '{"model": "%s", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "model": "tiny-llama"}'
    status, answer = _edge(host, "POST", "/v1/chat/completions", twice % ADAPTER, key=ADAPTER_KEY)
    assert status == 400 and "more than once" in answer["error"]["message"]
