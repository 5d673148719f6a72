#!/usr/bin/env python
"""Prefix-aware routing vs round robin: vLLM's prefix-cache hit rate and TTFT of multi-turn chats through the balancer.

A multi-turn chat workload goes through the fleet balancer once per policy: C conversations of T turns, every turn
resending the whole history (a shared system prompt, the conversation's own first question with a nonce unique to
the run, then each earlier answer and follow-up). Turn by turn: every conversation's turn t in a new random order,
W requests in flight, then turn t + 1 (a conversation's next turn comes after the other conversations' turns, as
with many users).
Per policy it reads vLLM's own counters on every replica (vllm:prefix_cache_queries_total / _hits_total, in
tokens; through each host's edge with the API key) before turn 1 and after every turn, and measures every
turn's time to first token (streamed). Printed side by side, per regime: the later turns' (2..T) hit rate, the
prefilled (missed) tokens, TTFT p50 / p99, requests/s, output tokens/s, the machine's load average, the requests
each replica served and the turns that moved off their conversation's previous replica (from the balancer's
served-by header, loadbalancer_served_by_header, switched on with the policy), and the same for turn 1.

Regimes: --conversations takes a list (e.g. 16,32). With the same turns and a fixed per-replica KV cache, a few
conversations fit in every replica's cache (round robin loses only the turns it missed on this replica), many
exceed one replica's cache (round robin keeps every conversation on both replicas and LRU evicts what the next
turn needs; prefix routing halves each replica's working set). The table prints the working set (the longest
prompt + answer of every conversation) next to vLLM's KV cache per replica (vllm:cache_config_info).

The policy is switched between runs the way a user would: playbooks/fleet.yml on the balancers with
-e loadbalancer_balance=<policy> (needs --inventory); prefix:<n> also sets loadbalancer_prefix_balance_factor=n.
Every run's nonces are new, so no run profits from the cache another one left behind.
--repeat N runs the policy list N times, interleaved (A B A B ...), and prints per policy the mean and min-max of the
later turns' output tokens/s, hit rate, TTFT p50 / p99, turns moved, load average and the share of the time one
replica idled while the other had 2+ requests in flight (from every request's start and end, kept in the JSON).

    tests/bench/prefix_routing.py --balancer http://172.17.0.6:8080 --replica http://172.17.0.3:8000 \
        --replica http://172.17.0.5:8000 --api-key-env LLMFLEET_API_KEY --model tiny \
        --inventory ~/.ansible/tmp/molecule.*.fleet/inventory --policies roundrobin,prefix:150,prefix:200 \
        --conversations 16,32 --turns 6 --paste-words 160 --output tests/bench/results/prefix_routing-<date>.json

(docs/ROUTING.md: the fleet deployed with -e llmfleet_max_model_len=2048, so that six turns of ~230 tokens fit.)
"""
import argparse
import concurrent.futures
import json
import os
import random
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COUNTERS = ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total")
WORDS = ("cache", "replica", "balancer", "token", "prefix", "engine", "batch", "rollout", "model", "latency",
         "request", "stream", "kernel", "memory", "block", "queue", "decode", "prefill", "tensor", "weight")
# A short shared system prompt: with a long one, every policy hits on it and the comparison is about the rest.
# The response header the balancer names the answering replica in (loadbalancer_served_by_header, switched on for
# the runs): it counts the turns that moved off their conversation's replica and the load split.
SERVED_BY = "X-Llmfleet-Served-By"
SYSTEM = "You are a concise assistant for an inference platform team. Answer in one short paragraph."


def parse_counters(text, names=COUNTERS):
    """Sum each named counter over all its label sets in a Prometheus text exposition."""
    totals = dict.fromkeys(names, 0.0)
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.match(r"^([^\s{]+)(\{[^}]*\})?\s+(\S+)", line)
        if match and match.group(1) in totals:
            totals[match.group(1)] += float(match.group(3))
    return totals


def percentile(values, q):
    """Nearest-rank percentile (q in 0..1) of a list; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, int(-(-q * len(ordered) // 1)))  # ceil(q * n), at least 1
    return ordered[min(rank, len(ordered)) - 1]


def hit_rate(before, after):
    """Prefix-cache hit rate (hits / queries, tokens) between two summed counter snapshots."""
    queries = after[COUNTERS[0]] - before[COUNTERS[0]]
    hits = after[COUNTERS[1]] - before[COUNTERS[1]]
    return (hits / queries if queries > 0 else None), int(queries), int(hits)


def sum_snapshots(snapshots):
    return {name: sum(s[name] for s in snapshots) for name in COUNTERS}


def http_get(url, key, timeout=30):
    request = urllib.request.Request(url, headers={"Authorization": "Bearer " + key} if key else {})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read().decode()


def snapshot(replicas, key):
    """[{counter: value}] per replica, read from its /metrics (through the edge, with the key)."""
    return [parse_counters(http_get(url.rstrip("/") + "/metrics", key)) for url in replicas]


def chat_stream(base, key, model, messages, max_tokens, timeout, served_by_header=SERVED_BY):
    """One streamed chat completion: (ttft seconds, total seconds, text, completion tokens, prompt tokens, replica).

    The replica is the balancer's served-by response header (loadbalancer_served_by_header), None without it."""
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    request = urllib.request.Request(base.rstrip("/") + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
    started = time.monotonic()
    ttft = None
    parts = []
    tokens = 0
    prompt_tokens = 0
    with urllib.request.urlopen(request, timeout=timeout) as response:
        replica = response.headers.get(served_by_header) if served_by_header else None
        for raw in response:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            for choice in chunk.get("choices") or []:
                text = (choice.get("delta") or {}).get("content")
                if text:
                    if ttft is None:
                        ttft = time.monotonic() - started
                    parts.append(text)
            if chunk.get("usage"):
                tokens = chunk["usage"].get("completion_tokens", tokens)
                prompt_tokens = chunk["usage"].get("prompt_tokens", prompt_tokens)
    return (ttft if ttft is not None else time.monotonic() - started, time.monotonic() - started, "".join(parts), tokens,
            prompt_tokens, replica)


def conversation_turns(nonce, index, turns, rng, paste_words=0):
    """The user messages of one conversation: a first question carrying the run's nonce, then follow-ups.

    The nonce has the same length in every run: with vLLM's block-sized cache (128 tokens on CPU) a few tokens
    more or less in turn 1 decide whether a whole block is cached. paste_words adds that many words of pasted
    context (a log, a tool's output) to every user turn, as in an agent loop.
    """
    def paste():
        return (" Context: " + " ".join(rng.choice(WORDS) for _unused in range(paste_words))) if paste_words else ""
    topic = " ".join(rng.choice(WORDS) for _unused in range(6))
    first = "Conversation %s-%03d. We are debugging %s. What should we look at first?%s" % (nonce, index, topic, paste())
    follow = ["Why %s and not %s? Say how the %s changes it.%s" % (rng.choice(WORDS), rng.choice(WORDS), rng.choice(WORDS),
                                                                   paste()) for _unused in range(turns - 1)]
    return [first] + follow


class Workload:
    def __init__(self, args, conversations):
        # The same conversations in every run (--seed), but a new nonce: nothing another run cached matches.
        self.started = time.monotonic()
        rng = random.Random(args.seed)
        nonce = "%08x" % random.getrandbits(32)
        self.args = args
        self.users = [conversation_turns(nonce, i, args.turns, rng, args.paste_words) for i in range(conversations)]
        self.history = [[{"role": "system", "content": SYSTEM}] for _unused in range(conversations)]
        self.results = []  # one dict per request: turn, conversation, ttft, total, tokens, prompt_tokens, replica, ok

    def turn(self, conv, number):
        history = self.history[conv]
        history.append({"role": "user", "content": self.users[conv][number - 1]})
        row = {"turn": number, "conversation": conv, "ttft": None, "total": None, "tokens": 0, "prompt_tokens": 0,
               "replica": None, "ok": False, "start": round(time.monotonic() - self.started, 3)}
        try:
            row["ttft"], row["total"], text, row["tokens"], row["prompt_tokens"], row["replica"] = chat_stream(
                self.args.balancer, self.args.api_key, self.args.model, history, self.args.max_tokens,
                self.args.timeout)
            history.append({"role": "assistant", "content": text})
            row["ok"] = True
        except Exception as exc:  # a failed turn counts, and ends its conversation
            print("  conversation %d turn %d failed: %s" % (conv, number, exc), file=sys.stderr)
            raise
        finally:
            row["end"] = round(time.monotonic() - self.started, 3)
            self.results.append(row)


def moves(rows):
    """Turns (2 and later) served by another replica than the conversation's previous turn: (moved, compared)."""
    where = {(r["conversation"], r["turn"]): r["replica"] for r in rows if r["ok"]}
    pairs = [(where[(c, t - 1)], replica) for (c, t), replica in where.items()
             if t > 1 and (c, t - 1) in where and replica is not None and where[(c, t - 1)] is not None]
    return sum(1 for a, b in pairs if a != b), len(pairs)


def cache_tokens(text):
    """A replica's KV cache in tokens (num_gpu_blocks x block_size of vllm:cache_config_info), None when not exported."""
    for line in text.splitlines():
        if line.startswith("vllm:cache_config_info{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            try:
                return int(labels["num_gpu_blocks"]) * int(labels["block_size"])
            except (KeyError, ValueError):
                return None
    return None


def run_policy(args, policy, conversations=None):
    """Turn by turn: every conversation's turn t (W at a time), then vLLM's counters; then turn t + 1."""
    conversations = conversations or args.conversations
    run_id = "%s-%x" % (policy, random.getrandbits(32))
    load = Workload(args, conversations)
    snaps = [snapshot(args.replica, args.api_key)]
    seconds = {}
    loadavg = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.workers) as pool:
        order = list(range(conversations))
        for number in range(1, args.turns + 1):
            # A new order every turn: in a fixed order, round robin would hand each conversation the same replica
            # turn after turn (an even number of requests per turn), i.e. be sticky by accident.
            random.shuffle(order)
            started = time.monotonic()
            list(pool.map(lambda c: _safe(load.turn, c, number), order))
            seconds[number] = time.monotonic() - started
            loadavg[number] = os.getloadavg()[0]
            snaps.append(snapshot(args.replica, args.api_key))

    def phase(turns):
        before, after = snaps[min(turns) - 1], snaps[max(turns)]
        rows = [r for r in load.results if r["turn"] in turns]
        ok = [r for r in rows if r["ok"]]
        ttfts = [r["ttft"] for r in ok]
        elapsed = sum(seconds[t] for t in turns)
        rate, queries, hits = hit_rate(sum_snapshots(before), sum_snapshots(after))
        per_replica = [hit_rate(b, a)[0] for b, a in zip(before, after)]
        served = {}
        for row in ok:
            served[row["replica"] or "?"] = served.get(row["replica"] or "?", 0) + 1
        moved, compared = moves([r for r in load.results if r["turn"] in turns or r["turn"] + 1 in turns])
        return {"requests": len(rows), "failed": len(rows) - len(ok), "seconds": round(elapsed, 1),
                "hit_rate": None if rate is None else round(rate, 3), "queried_tokens": queries, "hit_tokens": hits,
                "hit_rate_per_replica": [None if r is None else round(r, 3) for r in per_replica],
                "queries_per_replica": [int(a[COUNTERS[0]] - b[COUNTERS[0]]) for b, a in zip(before, after)],
                "requests_per_replica": dict(sorted(served.items())),
                "moved_turns": moved if min(turns) > 1 else None, "compared_turns": compared if min(turns) > 1 else None,
                "ttft_p50_ms": _ms(percentile(ttfts, 0.5)), "ttft_p99_ms": _ms(percentile(ttfts, 0.99)),
                "requests_per_s": round(len(ok) / elapsed, 2) if elapsed else None,
                "output_tokens_per_s": round(sum(r["tokens"] for r in ok) / elapsed, 1) if elapsed else None,
                "load_average_1m": round(sum(loadavg[t] for t in turns) / len(turns), 2),
                "load_average_1m_max": round(max(loadavg[t] for t in turns), 2),
                "occupancy": occupancy(ok)}
    last = {}
    for row in load.results:
        if row["ok"]:
            last[row["conversation"]] = max(last.get(row["conversation"], 0), row["prompt_tokens"] + row["tokens"])
    caches = [cache_tokens(http_get(url.rstrip("/") + "/metrics", args.api_key)) for url in args.replica]
    return {"policy": policy, "conversations": conversations, "run_id": run_id,
            "working_set_tokens": sum(last.values()), "longest_conversation_tokens": max(last.values() or [0]),
            "kv_cache_tokens_per_replica": caches, "turn_1": phase([1]),
            "later_turns": phase(list(range(2, args.turns + 1))),
            "per_turn_hit_rate": [phase([t])["hit_rate"] for t in range(1, args.turns + 1)],
            "requests": [[r["turn"], r["conversation"], r["replica"], r["start"], r["end"], _ms(r["ttft"]), r["tokens"],
                          r["prompt_tokens"], r["ok"]] for r in load.results]}


REQUEST_FIELDS = ("turn", "conversation", "replica", "start_s", "end_s", "ttft_ms", "tokens", "prompt_tokens", "ok")


def occupancy(rows):
    """How the requests in flight were spread over the replicas, from every request's [start, end) (seconds).

    Over the time at least one request was in flight: per replica the share of it that the replica had one or more
    (busy_share) and its mean number in flight; and the share of it that a replica sat idle while another had 2 or
    more in flight (idle_while_other_2plus): the moments an affinity policy wastes a replica."""
    rows = [r for r in rows if r.get("replica") and r.get("start") is not None and r.get("end") is not None]
    replicas = sorted({r["replica"] for r in rows})
    # Ends before starts at the same instant: a request that ends as another starts is not counted twice.
    events = sorted([(r["start"], 1, r["replica"]) for r in rows] + [(r["end"], -1, r["replica"]) for r in rows],
                    key=lambda e: (e[0], e[1]))
    inflight = dict.fromkeys(replicas, 0)
    busy = dict.fromkeys(replicas, 0.0)
    area = dict.fromkeys(replicas, 0.0)
    total = lopsided = 0.0
    last = None
    for when, delta, replica in events:
        if last is not None and when > last and any(inflight.values()):
            span = when - last
            total += span
            for name, count in inflight.items():
                area[name] += count * span
                busy[name] += span if count else 0.0
            if len(replicas) > 1 and min(inflight.values()) == 0 and max(inflight.values()) >= 2:
                lopsided += span
        inflight[replica] += delta
        last = when
    if not total:
        return {"seconds_in_flight": 0.0, "busy_share": {}, "mean_in_flight": {}, "idle_while_other_2plus": None}
    return {"seconds_in_flight": round(total, 2),
            "busy_share": {name: round(busy[name] / total, 3) for name in replicas},
            "mean_in_flight": {name: round(area[name] / total, 2) for name in replicas},
            "idle_while_other_2plus": round(lopsided / total, 3)}


# What --repeat summarises per policy (mean, min, max over the runs): label, path in a run's result.
SUMMARY_METRICS = (("output_tokens_per_s", ("later_turns", "output_tokens_per_s")),
                   ("hit_rate", ("later_turns", "hit_rate")),
                   ("ttft_p50_ms", ("later_turns", "ttft_p50_ms")),
                   ("ttft_p99_ms", ("later_turns", "ttft_p99_ms")),
                   ("moved_turns", ("later_turns", "moved_turns")),
                   ("load_average_1m", ("later_turns", "load_average_1m")),
                   ("idle_while_other_2plus", ("later_turns", "occupancy", "idle_while_other_2plus")))


def _get(result, path):
    for key in path:
        result = result.get(key) if isinstance(result, dict) else None
    return result


def summarize(results, baseline="roundrobin"):
    """Per (conversations, policy), in the order first run: mean, min and max of every SUMMARY_METRICS over its runs,
    and the ratio of each mean to the baseline policy's (the first policy when the baseline did not run)."""
    groups = {}
    for result in results:
        groups.setdefault((result["conversations"], result["policy"]), []).append(result)
    summary = []
    for (conversations, policy), runs in groups.items():
        stats = {}
        for label, path in SUMMARY_METRICS:
            values = [v for v in (_get(r, path) for r in runs) if v is not None]
            stats[label] = ({"mean": round(sum(values) / len(values), 3), "min": min(values), "max": max(values)}
                            if values else None)
        summary.append({"conversations": conversations, "policy": policy, "runs": len(runs), **stats})
    for row in summary:
        same = [s for s in summary if s["conversations"] == row["conversations"]]
        base = next((s for s in same if s["policy"] == baseline), same[0])
        row["ratio_to"] = base["policy"]
        row["ratio"] = {label: (round(row[label]["mean"] / base[label]["mean"], 3)
                                if row[label] and base[label] and base[label]["mean"] else None)
                        for label, _path in SUMMARY_METRICS}
    return summary


def summary_table(summary):
    """The --repeat summary: per policy the mean and (min-max) over its runs, and the ratio of the means."""
    def cell(stat, fmt, scale=1):
        if not stat:
            return "-"
        return (fmt + " (" + fmt + "-" + fmt + ")") % (stat["mean"] * scale, stat["min"] * scale, stat["max"] * scale)
    columns = (("output tok/s", "output_tokens_per_s", "%.1f", 1), ("hit rate %", "hit_rate", "%.1f", 100),
               ("TTFT p50 ms", "ttft_p50_ms", "%.0f", 1), ("TTFT p99 ms", "ttft_p99_ms", "%.0f", 1),
               ("moved", "moved_turns", "%.0f", 1), ("load avg", "load_average_1m", "%.1f", 1),
               ("idle/other>=2 %", "idle_while_other_2plus", "%.0f", 100))
    lines = ["later turns, mean (min-max) over the runs"]
    lines.append("%-10s %-12s %4s " % ("convs", "policy", "runs") + " ".join("%-22s" % c[0] for c in columns))
    for row in summary:
        lines.append("%-10s %-12s %4d " % (row["conversations"], row["policy"], row["runs"])
                     + " ".join("%-22s" % cell(row[key], fmt, scale) for _t, key, fmt, scale in columns))
    for row in summary:
        if row["policy"] != row["ratio_to"]:
            ratio = row["ratio"]
            lines.append("%s vs %s (%d conversations), ratio of the means: output tokens/s x%s, hit rate x%s, "
                         "TTFT p50 x%s, p99 x%s" % (row["policy"], row["ratio_to"], row["conversations"],
                                                    *("%.2f" % ratio[k] if ratio[k] is not None else "-" for k in (
                                                        "output_tokens_per_s", "hit_rate", "ttft_p50_ms",
                                                        "ttft_p99_ms"))))
    return "\n".join(lines)


def _safe(func, *argv):
    try:
        func(*argv)
    except Exception:  # recorded in Workload.results
        pass


def _ms(value):
    return None if value is None else round(value * 1000, 1)


def policy_vars(policy, served_by=SERVED_BY):
    """The -e variables of a policy name: roundrobin, prefix, or prefix:<loadbalancer_prefix_balance_factor>."""
    name, _sep, factor = policy.partition(":")
    extra = ["-e", "loadbalancer_balance=" + name, "-e", "loadbalancer_served_by_header=" + served_by]
    if factor:
        extra += ["-e", "loadbalancer_prefix_balance_factor=%d" % int(factor)]
    return extra


def switch_policy(args, policy):
    """Reconfigure the balancers with loadbalancer_balance=<policy> (playbooks/fleet.yml, as a user would)."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"), ANSIBLE_ROLES_PATH=str(ROOT / "roles"),
               ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3")
    # Every host of the fleet: the monitoring play needs the serving hosts' facts (their addresses).
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", args.inventory,
            str(ROOT / "playbooks" / "fleet.yml")] + policy_vars(policy)
    started = time.monotonic()
    result = subprocess.run(argv, cwd=str(ROOT), env=env, capture_output=True, check=False, text=True)
    if result.returncode != 0:
        raise SystemExit("switching the balancer to %s failed:\n%s" % (policy, result.stdout[-4000:] + result.stderr[-2000:]))
    print("balancer now balances with %s (playbooks/fleet.yml, %.0f s)" % (policy, time.monotonic() - started))


def table(results, args):
    """The policies side by side, later turns first (what prefix routing is for)."""
    rows = [("later turns (2..%d)" % args.turns, None)] + [
        ("  prefix-cache hit rate", lambda r: _pct(r["later_turns"]["hit_rate"])),
        ("  hit rate per replica", lambda r: "/".join(_pct(x) for x in r["later_turns"]["hit_rate_per_replica"])),
        ("  prompt tokens per replica", lambda r: "/".join(str(x) for x in r["later_turns"]["queries_per_replica"])),
        ("  prefilled (missed) tokens", lambda r: r["later_turns"]["queried_tokens"] - r["later_turns"]["hit_tokens"]),
        ("  requests per replica", lambda r: "/".join(str(x) for x in r["later_turns"]["requests_per_replica"].values())),
        ("  turns moved / compared", lambda r: "%s / %s" % (
            r["later_turns"]["moved_turns"], r["later_turns"]["compared_turns"])),
        ("  TTFT p50 (ms)", lambda r: r["later_turns"]["ttft_p50_ms"]),
        ("  TTFT p99 (ms)", lambda r: r["later_turns"]["ttft_p99_ms"]),
        ("  requests/s", lambda r: r["later_turns"]["requests_per_s"]),
        ("  output tokens/s", lambda r: r["later_turns"]["output_tokens_per_s"]),
        ("  in flight per replica (mean)", lambda r: "/".join(
            "%.2f" % x for x in r["later_turns"]["occupancy"]["mean_in_flight"].values())),
        ("  one idle, other >= 2", lambda r: _pct(r["later_turns"]["occupancy"]["idle_while_other_2plus"])),
        ("  load average (1 min)", lambda r: "%s (max %s)" % (
            r["later_turns"]["load_average_1m"], r["later_turns"]["load_average_1m_max"])),
        ("  failed / sent", lambda r: "%d / %d" % (r["later_turns"]["failed"], r["later_turns"]["requests"])),
        ("  hit rate turn by turn", lambda r: " ".join("%.0f" % (100 * x) if x is not None else "-"
                                                       for x in r["per_turn_hit_rate"])),
        ("turn 1", None),
        ("  prefix-cache hit rate", lambda r: _pct(r["turn_1"]["hit_rate"])),
        ("  TTFT p50 (ms)", lambda r: r["turn_1"]["ttft_p50_ms"]),
        ("  TTFT p99 (ms)", lambda r: r["turn_1"]["ttft_p99_ms"]),
        ("  failed / sent", lambda r: "%d / %d" % (r["turn_1"]["failed"], r["turn_1"]["requests"])),
        ("working set (tokens)", lambda r: r["working_set_tokens"]),
        ("KV cache per replica (tokens)", lambda r: "/".join(str(x) for x in r["kv_cache_tokens_per_replica"])),
    ]
    width = 30
    lines = []
    for conversations in sorted({r["conversations"] for r in results}):
        group = [r for r in results if r["conversations"] == conversations]
        lines.append("%d conversations x %d turns" % (conversations, args.turns))
        names = [r["policy"] + ("#%d" % r["repeat"] if args.repeat > 1 else "") for r in group]
        lines.append("%-*s" % (width, "") + "".join("%20s" % name for name in names))
        for label, value in rows:
            lines.append(label if value is None else "%-*s" % (width, label) + "".join("%20s" % (value(r),) for r in group))
        for other in group:
            # Against the first policy of the same round (--repeat: A B A B ..., each B against the A before it).
            first = next(r for r in group if r.get("repeat", 1) == other.get("repeat", 1))
            if other is first:
                continue
            base = first["later_turns"]
            later = other["later_turns"]
            if base["hit_rate"] and later["hit_rate"] is not None:
                missed = later["queried_tokens"] - later["hit_tokens"]
                base_missed = base["queried_tokens"] - base["hit_tokens"]
                ratios = (other["policy"], first["policy"], later["hit_rate"] / base["hit_rate"],
                          missed / base_missed if base_missed else float("nan"),
                          later["ttft_p50_ms"] / base["ttft_p50_ms"], later["ttft_p99_ms"] / base["ttft_p99_ms"],
                          later["output_tokens_per_s"] / base["output_tokens_per_s"])
                lines.append("later turns, %s vs %s: hit rate x%.2f, prefilled tokens x%.2f, TTFT p50 x%.2f, "
                             "p99 x%.2f, output tokens/s x%.2f" % ratios)
        lines.append("")
    return "\n".join(lines)


def dump_report(report):
    """The report as indented JSON, every list of plain values (a request's row, per-replica numbers) on one line."""
    text = json.dumps(report, indent=1)
    return re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + re.sub(r"\s*\n\s*", " ", m.group(1)) + "]", text) + "\n"


def _pct(value):
    return "-" if value is None else "%.1f%%" % (100 * value)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--balancer", required=True, help="the balancer's root URL (http://host:8080)")
    parser.add_argument("--replica", action="append", required=True, help="a replica's URL for /metrics (its edge)")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--api-key-env", default="LLMFLEET_API_KEY")
    parser.add_argument("--policies", default="roundrobin,prefix",
                        help="comma-separated loadbalancer_balance values; prefix:<factor> also sets "
                             "loadbalancer_prefix_balance_factor")
    parser.add_argument("--inventory", help="inventory to switch the policy with (playbooks/fleet.yml); none: measure as is")
    parser.add_argument("--current", default="", help="the policy the balancer runs now (not switched to again)")
    parser.add_argument("--conversations", default="32",
                        help="conversations per run; a comma-separated list runs each count (regime) with every policy")
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--workers", type=int, default=4, help="conversations in flight at once")
    parser.add_argument("--max-tokens", type=int, default=24, help="tokens per answer (ignore_eos: exactly this many)")
    parser.add_argument("--seed", type=int, default=20, help="seed of the conversations' text")
    parser.add_argument("--paste-words", type=int, default=0, help="words of pasted context in every user turn")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--repeat", type=int, default=1,
                        help="run the policy list this many times, interleaved (A B A B ...); prints the mean and "
                             "min-max per policy")
    parser.add_argument("--output", default=str(ROOT / ".cache" / "prefix_routing.json"))
    args = parser.parse_args(argv)
    args.api_key = os.environ.get(args.api_key_env, "")
    counts = [int(n) for n in str(args.conversations).split(",")]
    results = []
    report = {"turns": args.turns, "workers": args.workers, "paste_words": args.paste_words,
              "max_tokens": args.max_tokens, "replicas": len(args.replica), "repeat": args.repeat,
              "policies": args.policies, "load_average_before": os.getloadavg(), "request_fields": REQUEST_FIELDS,
              "results": results}
    # --repeat N: the whole policy list N times, interleaved (A B A B ...), so that a slow phase of the machine hits
    # every policy alike. Every run starts with its own nonce: no run hits on what an earlier one left cached.
    for repeat in range(args.repeat):
        for policy in args.policies.split(","):
            if args.inventory and policy != args.current:
                switch_policy(args, policy)
            args.current = policy
            for conversations in counts:
                print("running %d conversations x %d turns with %s (run %d of %d) ..." % (
                    conversations, args.turns, policy, repeat + 1, args.repeat), flush=True)
                result = run_policy(args, policy, conversations)
                result["repeat"] = repeat + 1
                results.append(result)
                print(json.dumps({k: v for k, v in result.items() if k != "requests"}), flush=True)
                report["load_average_after"] = os.getloadavg()
                report["summary"] = summarize(results)
                Path(args.output).parent.mkdir(parents=True, exist_ok=True)
                Path(args.output).write_text(dump_report(report))
    print(table(results, args))
    if args.repeat > 1:
        print(summary_table(report["summary"]))
    failed = sum(r[p]["failed"] for r in results for p in ("turn_1", "later_turns"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
