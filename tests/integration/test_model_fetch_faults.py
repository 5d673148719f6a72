"""model_fetch against real hub clients and local hubs: resume after a kill, corruption, a too-small disk.

The module runs as a user runs it: ansible-playbook on localhost (the controller's venv python, which has
huggingface_hub and modelscope installed). Hugging Face is served by olah (a real HF mirror, offline); the
ModelScope API by tests/testbed/modelscope_server.py (a test double of modelscope.cn, which is unreachable
here). Both serve the same git repo. Needs no Docker.
"""
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "testbed"))

import hub_repo  # noqa: E402
import hubs  # noqa: E402

REPO = "acme/tiny-faults"
BIG = "model-00003-of-00003.safetensors"
SMALL = ["model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors"]
RATE = 3 << 20  # bytes/s per connection on the throttled paths: the 24 MiB shard takes ~8 s

PLAYBOOK = """
- name: Fetch a model with llmfleet.vllm.model_fetch
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Place the model
      llmfleet.vllm.model_fetch: "{{ fetch_args }}"
"""


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("model")
    return hub_repo.synth_model(out / "m", [1, 1, 24])


@pytest.fixture(scope="module")
def mirrors(model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("mirrors")
    commit = hub_repo.publish(model_dir, root, REPO)
    return root, commit


@pytest.fixture(scope="module")
def olah(mirrors):
    srv = hubs.start_olah(mirrors[0], probe_repo=REPO)
    yield srv
    srv.stop()


@pytest.fixture
def ms(mirrors):
    srv = hubs.start_modelscope(mirrors[0])
    yield srv
    srv.stop()


@pytest.fixture
def ms_slow(mirrors):
    srv = hubs.start_modelscope(mirrors[0], rate=RATE)
    yield srv
    srv.stop()


@pytest.fixture
def olah_slow(olah):
    srv = hubs.start_throttle(olah.url, RATE)
    yield srv
    srv.stop()


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def _env(tmp):
    env = dict(os.environ)
    env.update(ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"), ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), HF_HOME=str(tmp / "hf-home"),
               MODELSCOPE_CACHE=str(tmp / "ms-home"), ANSIBLE_LOCAL_TEMP=str(tmp / "ansible-tmp"))
    return env


def start_fetch(tmp, args, check=False):
    tmp.mkdir(parents=True, exist_ok=True)
    pb = tmp / "fetch.yml"
    pb.write_text(PLAYBOOK)
    ev = tmp / "vars.json"
    ev.write_text(json.dumps({"fetch_args": args, "ansible_python_interpreter": sys.executable}))
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(pb),
           "-e", "@%s" % ev] + (["--check"] if check else [])
    return subprocess.Popen(cmd, cwd=ROOT, env=_env(tmp), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def run_fetch(tmp, args, check=False, timeout=300):
    proc = start_fetch(tmp, args, check)
    out, err = proc.communicate(timeout=timeout)
    try:
        doc = json.loads(out)
    except ValueError:
        raise AssertionError("no JSON from ansible-playbook: %s\n%s" % (out[-2000:], err[-2000:]))
    return doc["plays"][0]["tasks"][0]["hosts"]["localhost"]


def descendants(pid):
    """Every process below pid (from /proc): the play's worker, the module, its threads' process."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(proc):
    """SIGKILL the play and everything it started (Ansible runs the module in its own session)."""
    for pid in [proc.pid] + descendants(proc.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def kill_when(proc, staging, predicate, timeout=60):
    """SIGKILL the whole play (ansible-playbook and the module) once predicate(staging) holds."""
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise AssertionError("the download finished before it could be interrupted: %s" % proc.stderr.read())
        if staging.is_dir() and predicate(staging):
            kill_tree(proc)
            time.sleep(0.5)
            return
        time.sleep(0.05)
    kill_tree(proc)
    raise AssertionError("the kill condition never held")


def partial_bytes(staging):
    return sum(p.stat().st_size for p in staging.rglob("*") if p.is_file()
               and (p.name.endswith(".incomplete") or "_0_" in p.name))


def small_done_big_partial(staging):
    return all((staging / s).is_file() for s in SMALL) and partial_bytes(staging) > (2 << 20)


def fetch_args(source, url, dest, **extra):
    args = {"source": source, "repo_id": REPO, "endpoint": url, "dest": str(dest), "token": "hf_testbed_secret"}
    if source == "modelscope":
        args["revision"] = "v1"
    args.update(extra)
    return args


def assert_same_as_source(dest, model_dir):
    for f in model_dir.iterdir():
        assert sha256(dest / f.name) == sha256(f), f.name


@pytest.mark.parametrize("source", ["hf", "modelscope"])
def test_kill_mid_download_then_rerun_keeps_finished_files(source, olah_slow, ms_slow, ms, olah, model_dir,
                                                           tmp_path):
    dest = tmp_path / "models" / "tiny"
    staging = tmp_path / "models" / ".tiny.partial"
    slow = olah_slow if source == "hf" else ms_slow
    proc = start_fetch(tmp_path / "run1", fetch_args(source, slow.url, dest))
    kill_when(proc, staging, small_done_big_partial)
    assert not dest.exists(), "a killed run must never leave a half-written model at dest"
    before = {s: (staging / s).stat().st_ino for s in SMALL}
    cut_at = partial_bytes(staging)
    assert 0 < cut_at < (24 << 20)

    fast = olah if source == "hf" else ms
    r = run_fetch(tmp_path / "run2", fetch_args(source, fast.url, dest))
    assert r["changed"] and not r.get("failed"), r.get("msg")
    # The finished shards were not fetched again: same inodes, listed as reused, not in this run's fetch list.
    for s in SMALL:
        assert (dest / s).stat().st_ino == before[s]
        assert s in r["files_reused"] and s not in r["files_to_fetch"]
    assert BIG in r["files_to_fetch"]
    if source == "hf":
        # huggingface_hub 2.4 cannot resume a partial file across processes: the module says so in numbers.
        assert r["partial_bytes_discarded"] >= cut_at - (1 << 20)
    else:
        # The ModelScope SDK resumed the cut shard with Range: this run's server sent only the rest of it.
        stats = json.load(__import__("urllib.request").request.urlopen(ms.url + "/__stats"))
        assert stats["file_requests"].get(BIG, 0) >= 1
        assert stats["bytes_sent"][BIG] <= (24 << 20) - cut_at + (1 << 20)
        assert not any(s in stats["file_requests"] for s in SMALL)
    assert_same_as_source(dest, model_dir)
    assert not staging.exists() and (dest / ".llmfleet-weights.json").is_file()
    assert "hf_testbed_secret" not in json.dumps(r)

    again = run_fetch(tmp_path / "run3", fetch_args(source, fast.url, dest))
    assert again["changed"] is False and again["files_to_fetch"] == []


def flip_byte(path, offset=-100):
    with open(path, "r+b") as f:
        f.seek(offset, os.SEEK_END)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0xFF]))


@pytest.mark.parametrize("source", ["hf", "modelscope"])
def test_corrupt_shard_in_place_is_detected_and_refetched(source, olah, ms, model_dir, tmp_path):
    dest = tmp_path / "models" / "tiny"
    url = olah.url if source == "hf" else ms.url
    r = run_fetch(tmp_path / "a", fetch_args(source, url, dest))
    assert r["changed"], r.get("msg")
    victim = SMALL[1]
    keep_ino = (dest / BIG).stat().st_ino
    flip_byte(dest / victim)  # same size: only a digest can tell
    r = run_fetch(tmp_path / "b", fetch_args(source, url, dest, verify_existing=True))
    assert r["changed"] and r["refetched"] == [victim], r
    assert r["files_to_fetch"] == [victim] and r["bytes_fetched"] == (dest / victim).stat().st_size
    assert (dest / BIG).stat().st_ino == keep_ino, "good files are kept (hard-linked), not fetched again"
    assert_same_as_source(dest, model_dir)


def test_corrupt_finished_file_in_staging_is_refetched(olah_slow, olah, model_dir, tmp_path):
    dest = tmp_path / "models" / "tiny"
    staging = tmp_path / "models" / ".tiny.partial"
    proc = start_fetch(tmp_path / "run1", fetch_args("hf", olah_slow.url, dest))
    kill_when(proc, staging, small_done_big_partial)
    flip_byte(staging / SMALL[0])
    r = run_fetch(tmp_path / "run2", fetch_args("hf", olah.url, dest))
    assert r["changed"] and SMALL[0] in r["refetched"] and SMALL[0] in r["files_to_fetch"]
    assert SMALL[1] in r["files_reused"]
    assert_same_as_source(dest, model_dir)


@pytest.fixture
def tiny_fs(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], capture_output=True, check=False)
    if res.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root): %s" % res.stderr.decode().strip())
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.parametrize("source", ["hf", "modelscope"])
def test_disk_too_small_is_refused_before_downloading(source, olah, ms, tiny_fs, tmp_path):
    dest = tiny_fs / "models" / "tiny"
    url = olah.url if source == "hf" else ms.url
    r = run_fetch(tmp_path / "run", fetch_args(source, url, dest))
    assert r.get("failed") and "not enough free space" in r["msg"] and "MiB free" in r["msg"], r
    assert not (tiny_fs / "models" / ".tiny.partial").exists() and not dest.exists()
    if source == "modelscope":
        stats = json.load(__import__("urllib.request").request.urlopen(ms.url + "/__stats"))
        assert stats["file_requests"] == {}, "nothing may be downloaded once the space check fails"


def test_check_mode_reports_what_would_be_fetched(olah, model_dir, tmp_path):
    dest = tmp_path / "models" / "tiny"
    r = run_fetch(tmp_path / "run", fetch_args("hf", olah.url, dest), check=True)
    expected = sorted(f.name for f in model_dir.iterdir())
    assert sorted(r["files_to_fetch"]) == expected
    assert r["bytes_to_fetch"] == sum(f.stat().st_size for f in model_dir.iterdir())
    assert r["changed"] and not dest.exists() and not (tmp_path / "models" / ".tiny.partial").exists()


def test_local_host_path_and_archive_are_verified_and_placed(model_dir, tmp_path):
    import tarfile
    dest = tmp_path / "models" / "tiny"
    r = run_fetch(tmp_path / "a", {"source": "local", "local_path": str(model_dir), "dest": str(dest)})
    assert r["changed"], r.get("msg")
    assert_same_as_source(dest, model_dir)
    arch = tmp_path / "tiny.tar.gz"
    with tarfile.open(arch, "w:gz") as tf:
        tf.add(model_dir, arcname="tiny")
    dest2 = tmp_path / "models" / "tiny2"
    r = run_fetch(tmp_path / "b", {"source": "archive", "archive_path": str(arch), "dest": str(dest2)})
    assert r["changed"], r.get("msg")
    assert_same_as_source(dest2, model_dir)


def test_incomplete_local_model_is_refused_with_the_reason(model_dir, tmp_path):
    import shutil
    broken = tmp_path / "broken"
    shutil.copytree(model_dir, broken)
    (broken / SMALL[1]).unlink()
    (broken / "tokenizer.json").unlink()
    r = run_fetch(tmp_path / "a", {"source": "local", "local_path": str(broken), "dest": str(tmp_path / "d")})
    assert r.get("failed")
    assert "shard %s named in model.safetensors.index.json is missing" % SMALL[1] in r["msg"]
    assert "no tokenizer files" in r["msg"]
    assert not (tmp_path / "d").exists()


ASYNC_PLAYBOOK = """
- name: Fetch in the background and follow it, as the model_weights role does
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Start model_fetch
      llmfleet.vllm.model_fetch: "{{ fetch_args }}"
      async: 600
      poll: 0
      register: job
    - name: Follow the download
      llmfleet.vllm.model_fetch_wait:
        jid: "{{ job.ansible_job_id }}"
        progress_file: "{{ progress_file }}"
        poll_interval: 1
      register: done
    - name: Show the result
      ansible.builtin.debug:
        msg: "RESULT changed={{ done.changed }} fetched={{ done.bytes_fetched }} path={{ done.path }}"
"""


def test_play_output_shows_bytes_percent_rate_and_eta_while_downloading(olah_slow, model_dir, tmp_path):
    import re
    dest = tmp_path / "models" / "tiny"
    pb = tmp_path / "async.yml"
    pb.write_text(ASYNC_PLAYBOOK)
    ev = tmp_path / "vars.json"
    ev.write_text(json.dumps({"fetch_args": fetch_args("hf", olah_slow.url, dest),
                              "progress_file": str(tmp_path / "models" / ".tiny.progress.json"),
                              "ansible_python_interpreter": sys.executable}))
    env = _env(tmp_path)
    env["ANSIBLE_STDOUT_CALLBACK"] = "default"
    p = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                        str(pb), "-e", "@%s" % ev], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    lines = re.findall(r"model_fetch downloading: ([\d.]+) (\w+) / ([\d.]+) MiB \(([\d.]+)%\) at ([\d.]+) \w+/s, ETA (\S+)",
                       p.stdout)
    assert len(lines) >= 2, p.stdout  # each poll costs two module round trips: ~2-4 s on 2 busy cores
    percents = [float(x[3]) for x in lines]
    assert percents == sorted(percents) and percents[0] < 90 and percents[-1] > percents[0]
    assert any(x[5] not in ("unknown", "0s") for x in lines), "an ETA is shown while bytes flow"
    assert "model_fetch done: " in p.stdout and "(100.0%)" in p.stdout
    assert "RESULT changed=True fetched=%d path=%s" % (sum(f.stat().st_size for f in model_dir.iterdir()), dest) \
        in p.stdout
    assert "hf_testbed_secret" not in p.stdout + p.stderr
