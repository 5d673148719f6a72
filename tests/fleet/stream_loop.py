#!/usr/bin/env python
"""Long streaming completions through one OpenAI-compatible endpoint (the balancer), back to back, counting cuts.

W workers each send streaming chat completions of exactly N tokens (temperature 0, vLLM's ignore_eos), one
after the other, until stopped or T seconds passed; stop() lets the streams in flight finish. Each stream is:
  ok      it ended with a finish_reason, then [DONE], and its usage says N completion tokens;
  cut     it started (at least one chunk came) but ended otherwise: closed early, an error mid-stream, a short
          count of tokens, or no [DONE];
  failed  it never started (refused, an HTTP error, a timeout before the first chunk).
Used by the fleet scenario while a rolling upgrade runs (a drain must let every stream finish):

    python3 tests/fleet/stream_loop.py --base-url http://172.18.0.4:8080/v1 --model tiny \
        --api-key-env LLMFLEET_API_KEY --tokens 300 --seconds 120 --workers 2
"""
import argparse
import collections
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request


class StreamLoop:
    def __init__(self, base_url, model, api_key="", workers=2, max_tokens=300, max_seconds=900.0, timeout=120.0,
                 prompt="Count slowly."):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.workers = max(1, int(workers))
        self.max_tokens = int(max_tokens)
        self.max_seconds = float(max_seconds)
        self.timeout = float(timeout)
        self.prompt = prompt
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = []
        self.counts = collections.Counter()
        self.errors = collections.Counter()
        self.first_errors = []
        self.durations = []
        self.started = None

    def one(self):
        """'ok' | 'cut' | 'failed', and an error text."""
        body = json.dumps({"model": self.model, "max_tokens": self.max_tokens, "temperature": 0, "ignore_eos": True,
                           "stream": True, "stream_options": {"include_usage": True},
                           "messages": [{"role": "user", "content": self.prompt}]}).encode()
        request = urllib.request.Request(self.base_url + "/chat/completions", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        if self.api_key:
            request.add_header("Authorization", "Bearer " + self.api_key)
        chunks, finished, done, tokens = 0, False, False, None
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                for raw in response:
                    line = raw.decode("utf-8", "replace").strip()
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        done = True
                        break
                    chunk = json.loads(data)
                    if "error" in chunk:
                        raise ValueError("error mid-stream: %s" % chunk["error"])
                    chunks += 1
                    for choice in chunk.get("choices") or []:
                        if choice.get("finish_reason"):
                            finished = True
                    if chunk.get("usage"):
                        tokens = chunk["usage"].get("completion_tokens")
        except Exception as exc:  # pylint: disable=broad-except
            return ("cut" if chunks else "failed"), "%s: %s" % (type(exc).__name__, exc)
        if not (finished and done):
            return "cut", "stream ended without %s" % ("[DONE]" if finished else "a finish_reason")
        if tokens != self.max_tokens:
            return "cut", "%s of %d tokens" % (tokens, self.max_tokens)
        return "ok", None

    def _worker(self):
        while not self._stop.is_set() and time.monotonic() - self.started < self.max_seconds:
            began = time.monotonic()
            outcome, error = self.one()
            with self._lock:
                self.counts[outcome] += 1
                if outcome == "ok":
                    self.durations.append(time.monotonic() - began)
                else:
                    self.errors[error.split(":")[0]] += 1
                    if len(self.first_errors) < 5:
                        self.first_errors.append("%s: %s" % (outcome, error))

    def start(self):
        self.started = time.monotonic()
        for _unused in range(self.workers):
            thread = threading.Thread(target=self._worker, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self):
        """Let the streams in flight finish, then the summary."""
        self._stop.set()
        for thread in self._threads:
            thread.join(self.timeout + 10)
        durations = sorted(self.durations)
        return {"streams": sum(self.counts.values()), "ok": self.counts["ok"], "cut": self.counts["cut"],
                "failed": self.counts["failed"], "tokens_each": self.max_tokens,
                "seconds_median": round(durations[len(durations) // 2], 1) if durations else None,
                "seconds_max": round(durations[-1], 1) if durations else None,
                "errors": dict(self.errors), "first_errors": self.first_errors}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--api-key-env", default="")
    ap.add_argument("--tokens", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    loop = StreamLoop(args.base_url, args.model, os.environ.get(args.api_key_env, "") if args.api_key_env else "",
                      workers=args.workers, max_tokens=args.tokens, max_seconds=args.seconds).start()
    try:
        while any(t.is_alive() for t in loop._threads):  # pylint: disable=protected-access
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    summary = loop.stop()
    print(json.dumps(summary, indent=2))
    return 0 if summary["cut"] == 0 and summary["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
