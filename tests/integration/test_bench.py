"""playbooks/bench.yml end to end against a running vLLM endpoint (the CPU deployment in `make test`).

Needs the endpoint and the image it runs, from the environment (skips with the reason otherwise):
  LLMFLEET_BENCH_BASE_URL   e.g. http://127.0.0.1:8000 (as seen from this machine, which runs the client)
  LLMFLEET_BENCH_IMAGE      the pinned vLLM image (default: LLMFLEET_TEST_VLLM_IMAGE from the test bed)
  LLMFLEET_BENCH_MODEL_DIR  host directory with the model's tokenizer (default: LLMFLEET_TEST_MODEL_DIR)
  LLMFLEET_BENCH_MODEL      served model name
  LLMFLEET_BENCH_API_KEY_ENV_FILE  optional: env file holding VLLM_API_KEY=... when the endpoint wants a key
The sweep is tiny (concurrency 1 and 2, 4 requests each, 32 tokens in / 8 out) to stay short on CPUs.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def env(*names):
    for name in names:
        if os.environ.get(name):
            return os.environ[name]
    return ""


@pytest.fixture(scope="module")
def bench_env():
    values = {
        "base_url": env("LLMFLEET_BENCH_BASE_URL"),
        "image": env("LLMFLEET_BENCH_IMAGE", "LLMFLEET_TEST_VLLM_IMAGE"),
        "model_dir": env("LLMFLEET_BENCH_MODEL_DIR", "LLMFLEET_TEST_MODEL_DIR"),
        "model": env("LLMFLEET_BENCH_MODEL"),
    }
    missing = [k for k, v in values.items() if not v]
    if missing:
        pytest.skip("no endpoint to benchmark: set LLMFLEET_BENCH_BASE_URL, LLMFLEET_BENCH_IMAGE, "
                    "LLMFLEET_BENCH_MODEL_DIR and LLMFLEET_BENCH_MODEL (missing: %s)" % ", ".join(missing))
    values["api_key_env_file"] = env("LLMFLEET_BENCH_API_KEY_ENV_FILE")
    return values


def test_bench_playbook_collects_results_and_renders_the_report(bench_env, tmp_path):
    extra = {
        "benchmark_hosts": "localhost",
        "benchmark_image": bench_env["image"],
        "benchmark_base_url": bench_env["base_url"],
        "benchmark_served_model_name": bench_env["model"],
        "benchmark_model_dir": bench_env["model_dir"],
        "benchmark_api_key_env_file": bench_env["api_key_env_file"],
        "benchmark_concurrency": [1, 2],
        "benchmark_num_prompts": 4,
        "benchmark_input_len": 32,
        "benchmark_output_len": 8,
        "benchmark_num_warmups": 0,
        "benchmark_level_timeout_s": 300,
        "benchmark_results_dir": str(tmp_path / "results"),
        "benchmark_slos": {"ttft_p99_ms": 300},
    }
    inventory = ROOT / "tests" / "integration" / "runner_cli" / "hosts.yml"
    proc = subprocess.run(
        [sys.executable, "-m", "ansible_collections.llmfleet.vllm.plugins.cli.runner", "playbooks/bench.yml",
         "-i", str(inventory), "-e", json.dumps(extra), "--artifacts-dir", str(tmp_path / "runs"), "--keep-artifacts"],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT / "collections")), capture_output=True, text=True,
        timeout=900, check=False
    )
    summary = json.loads(proc.stdout)
    assert proc.returncode == 0, (summary["failed_tasks"], proc.stderr[-3000:])

    (run_dir,) = list((tmp_path / "results").iterdir())
    names = sorted(p.name for p in run_dir.iterdir())
    for expected in ("concurrency-1.json", "concurrency-2.json", "plan.json", "README.md", "throughput.png",
                     "latency.png", "summary.json"):
        assert expected in names, names
    for level in (1, 2):
        result = json.loads((run_dir / f"concurrency-{level}.json").read_text())
        assert result["max_concurrency"] == level
        assert result["completed"] == 4 and result["failed"] == 0
        assert result["image"] == bench_env["image"]  # --metadata travels into the result
        assert result["p99_ttft_ms"] >= result["p50_ttft_ms"] > 0
    for png in ("throughput.png", "latency.png"):
        data = (run_dir / png).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000
    report = (run_dir / "README.md").read_text()
    assert bench_env["image"] in report and "![" in report
    assert json.loads((run_dir / "plan.json").read_text())["image"] == bench_env["image"]

    if bench_env["api_key_env_file"]:
        key_lines = [line.split("=", 1)[1].strip() for line in Path(bench_env["api_key_env_file"]).read_text().splitlines()
                     if line.startswith("VLLM_API_KEY=")]
        for path in (tmp_path / "runs").rglob("*"):
            if path.is_file():
                data = path.read_text(errors="replace")
                assert not any(k and k in data for k in key_lines), f"API key found in {path}"


def _bench(extra, tmp_path):
    """playbooks/bench.yml on this machine through llmfleet-run; (return code, its JSON summary)."""
    inventory = ROOT / "tests" / "integration" / "runner_cli" / "hosts.yml"
    proc = subprocess.run(
        [sys.executable, "-m", "ansible_collections.llmfleet.vllm.plugins.cli.runner", "playbooks/bench.yml",
         "-i", str(inventory), "-e", json.dumps(dict({"benchmark_hosts": "localhost"}, **extra)),
         "--artifacts-dir", str(tmp_path / "runs")],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT / "collections")), capture_output=True, text=True,
        timeout=300, check=False)
    return proc.returncode, json.loads(proc.stdout)


def test_bench_model_selects_the_model_and_refuses_an_unknown_name(tmp_path):
    """-e bench_model=NAME on a host of two models (serving.json as vllm_server writes it): the requests carry that
    name and the tokenizer comes from its directory; an unknown name fails before anything runs, listing the served
    names; a model of the pooling runner is refused for the generation benchmark. No endpoint is needed: each run
    stops before the client would start."""
    models = [{"name": name, "runner": runner, "model_path": str(tmp_path / name),
               "replicas": [{"name": "%s-0" % name, "port": port, "gpus": []}],
               "base_urls": ["http://127.0.0.1:%d/v1" % port], "adapters": []}
              for name, runner, port in (("chat", "generate", 8001), ("embed", "pooling", 8002))]
    serving = tmp_path / "serving.json"
    serving.write_text(json.dumps(dict(served_model_name="chat", model_path=models[0]["model_path"], image="img:1",
                                       replicas=models[0]["replicas"], base_urls=models[0]["base_urls"], models=models)))
    base = {"benchmark_serving_file": str(serving), "benchmark_render_report": False}

    rc, summary = _bench(dict(base, bench_model="llama"), tmp_path / "unknown")
    assert rc != 0
    (failed,) = summary["failed_tasks"]
    assert "does not serve a model named 'llama'; it serves: chat, embed" in json.dumps(failed), failed

    rc, summary = _bench(dict(base, bench_model="embed"), tmp_path / "pooling")
    assert rc != 0 and "runs on vLLM's pooling runner" in json.dumps(summary["failed_tasks"]), summary["failed_tasks"]

    # chat's directory has no tokenizer here: the run stops at that check, naming chat's own directory.
    rc, summary = _bench(dict(base, bench_model="chat"), tmp_path / "chat")
    assert rc != 0
    assert "%s/tokenizer_config.json does not exist" % (tmp_path / "chat") in json.dumps(summary["failed_tasks"])
