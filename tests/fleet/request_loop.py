#!/usr/bin/env python
"""A bounded request loop against one OpenAI-compatible endpoint (the balancer), counting failures.

At most N requests, over at most T seconds, by W workers; it also stops early when asked (stop event, or
SIGINT on the command line). A request counts as failed when it raises, times out, answers anything but 200,
or returns a chat completion without text. Requests are deterministic by default (temperature 0 and vLLM's
ignore_eos, so every reply is exactly max_tokens tokens): a random test model sampled at temperature 1 now and
then picks end-of-sequence first and answers "" legitimately, which must not pass for a failure. Used by the fleet scenario while a rolling upgrade runs:

    python3 tests/fleet/request_loop.py --base-url http://172.18.0.4:8080/v1 --model tiny \
        --api-key-env LLMFLEET_API_KEY --requests 500 --seconds 300 --workers 2
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


class RequestLoop:
    """Send chat completions until `max_requests` were sent, `max_seconds` passed, or stop() is called."""

    def __init__(self, base_url, model, api_key="", max_requests=100, max_seconds=60.0, workers=1,
                 pause=0.0, timeout=60.0, max_tokens=8, prompt="Say hello.", deterministic=True, vary_prompt=False):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.max_requests = int(max_requests)
        self.max_seconds = float(max_seconds)
        self.workers = max(1, int(workers))
        self.pause = float(pause)
        self.timeout = float(timeout)
        self.max_tokens = int(max_tokens)
        self.prompt = prompt
        self.deterministic = deterministic
        # Number each request's prompt ("Say hello. (request 7)"): distinct prompts for a prefix-aware balancer.
        self.vary_prompt = vary_prompt
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = []
        self.sent = 0
        self.ok = 0
        self.failed = 0
        self.errors = collections.Counter()
        self.first_errors = []
        self.latencies = []
        self.started = None
        self.ended = None

    def _claim(self):
        """Take the next request slot, or None when a bound is reached."""
        with self._lock:
            if self._stop.is_set() or self.sent >= self.max_requests:
                return None
            if time.monotonic() - self.started >= self.max_seconds:
                return None
            self.sent += 1
            return self.sent

    def _one(self, number=0):
        prompt = "%s (request %d)" % (self.prompt, number) if self.vary_prompt else self.prompt
        body = {"model": self.model, "max_tokens": self.max_tokens,
                "messages": [{"role": "user", "content": prompt}]}
        if self.deterministic:
            body.update({"temperature": 0, "ignore_eos": True})
        body = json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + "/chat/completions", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        if self.api_key:
            request.add_header("Authorization", "Bearer " + self.api_key)
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            reply = json.load(response)
        text = reply["choices"][0]["message"].get("content") or ""
        if not text:
            raise ValueError("empty completion")

    def _record(self, started, error):
        with self._lock:
            if error is None:
                self.ok += 1
                self.latencies.append(time.monotonic() - started)
                return
            self.failed += 1
            if isinstance(error, urllib.error.HTTPError):
                kind = "HTTP %d" % error.code
            else:
                kind = type(error).__name__
            self.errors[kind] += 1
            if len(self.first_errors) < 10:
                self.first_errors.append("%.1fs %s: %s" % (time.monotonic() - self.started, kind, error))

    def _worker(self):
        while True:
            number = self._claim()
            if number is None:
                break
            started = time.monotonic()
            try:
                self._one(number)
                error = None
            except Exception as exc:  # every failure a client would see counts
                error = exc
            self._record(started, error)
            if self.pause:
                self._stop.wait(self.pause)

    def start(self):
        self.started = time.monotonic()
        self._threads = [threading.Thread(target=self._worker, daemon=True) for _unused in range(self.workers)]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self):
        """Ask the workers to finish their current request and stop; wait for them; return the summary."""
        self._stop.set()
        return self.join()

    def join(self):
        for thread in self._threads:
            thread.join()
        if self.ended is None:
            self.ended = time.monotonic()
        return self.summary()

    def run(self):
        """Run to a bound (requests or seconds) in the foreground."""
        return self.start().join()

    def summary(self):
        latencies = sorted(self.latencies)

        def pct(q):
            return round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 3) if latencies else None
        return {
            "sent": self.sent, "ok": self.ok, "failed": self.failed, "errors": dict(self.errors),
            "first_errors": list(self.first_errors),
            "seconds": round((self.ended or time.monotonic()) - self.started, 1) if self.started else 0.0,
            "latency_p50_s": pct(0.5), "latency_p95_s": pct(0.95), "latency_max_s": latencies[-1] if latencies else None,
        }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="endpoint root including /v1")
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key-env", default="", help="name of the environment variable holding the API key")
    parser.add_argument("--requests", type=int, default=100, help="at most this many requests")
    parser.add_argument("--seconds", type=float, default=60.0, help="for at most this many seconds")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--pause", type=float, default=0.0, help="seconds each worker waits between requests")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    loop = RequestLoop(args.base_url, args.model, os.environ.get(args.api_key_env, "") if args.api_key_env else "",
                       args.requests, args.seconds, args.workers, args.pause, args.timeout)
    loop.start()
    try:
        summary = loop.join()
    except KeyboardInterrupt:
        summary = loop.stop()
    print(json.dumps(summary, indent=2))
    return 1 if summary["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
