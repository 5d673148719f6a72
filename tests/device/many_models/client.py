#!/usr/bin/env python
"""Ask each served model one request of its kind (issue #39 GPU proof): a completion of the generative model, an
embedding of the pooling one, a completion of each LoRA adapter by its own name, and /v1/models; print CLIENT_JSON
lines.  Usage: client.py ARGVDIR (the kit's argv/*.json)."""
import glob
import json
import sys
import time
import urllib.request


def post(port, path, body):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.time()
    with urllib.request.urlopen(req, timeout=120) as resp:
        return resp.status, json.loads(resp.read()), round(time.time() - t0, 3)


def get(port, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=30) as resp:
        return json.loads(resp.read())


def ask(spec):
    name, port = spec["model"], spec["port"]
    if spec["runner"] == "pooling":
        status, out, secs = post(port, "/v1/embeddings", {"model": name, "input": ["Hello world", "Paris France"]})
        got = {"vectors": len(out["data"]), "dims": [len(d["embedding"]) for d in out["data"]]}
    else:
        body = {"model": name, "prompt": "the capital of France is", "max_tokens": 16, "temperature": 0,
                "ignore_eos": True}
        status, out, secs = post(port, "/v1/completions", body)
        got = {"completion_tokens": out["usage"]["completion_tokens"], "text": out["choices"][0]["text"][:80]}
    out = dict(instance=spec["instance"], model=name, status=status, seconds=secs, **got)
    for adapter in spec.get("adapters") or []:
        # an adapter answers by its own name, on its base model's engine
        status, reply, secs = post(port, "/v1/completions", dict(body, model=adapter))
        out.setdefault("adapters", []).append({"model": reply["model"], "status": status, "seconds": secs,
                                               "completion_tokens": reply["usage"]["completion_tokens"]})
    return dict(out, listed=[m["id"] for m in get(port, "/v1/models")["data"]])


def main(argv_dir):
    rc = 0
    for path in sorted(glob.glob(argv_dir + "/*.json")):
        with open(path) as fh:
            spec = json.load(fh)
        try:
            print("CLIENT_JSON " + json.dumps(ask(spec)), flush=True)
        except Exception as exc:  # noqa: BLE001 - the capture records any failure
            rc = 1
            print("CLIENT_JSON " + json.dumps({"instance": spec["instance"], "error": repr(exc)}), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
