"""The known_good module through ansible itself, on real files: what a serving replica runs is kept (and only when it
differs), put back after a failed replacement, and the model directory swapped back to the previous generation that
model_fetch's placement kept (hub_fetch.place with keep_previous)."""
import json
import os
import stat
import subprocess
import sys

from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import hub_fetch
from ansible_collections.llmfleet.vllm.plugins.module_utils.serving.host_files import model_dir_digest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
ANSIBLE_BIN = os.path.dirname(sys.executable)


def run(args, *options):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="json")
    r = subprocess.run([os.path.join(ANSIBLE_BIN, "ansible"), "localhost", "-c", "local",
                        "-e", "ansible_python_interpreter=%s" % sys.executable,
                        "-m", "llmfleet.vllm.known_good", "-a", json.dumps(args)] + list(options),
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    return json.loads(r.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def model(path, weights):
    """A model directory with its weights role record (as model_fetch writes it)."""
    os.makedirs(path)
    with open(os.path.join(path, "w.safetensors"), "w") as fh:
        fh.write(weights)
    with open(os.path.join(path, ".llmfleet-weights.json"), "w") as fh:
        json.dump({"files": [{"path": "w.safetensors", "size": len(weights)}],
                   "digests": {"w.safetensors": weights * 8}}, fh)
    return path


def deployment(tmp_path, run_text, key):
    conf = tmp_path / "etc"
    conf.mkdir(exist_ok=True)
    (conf / "vllm-0.run").write_text(run_text)
    (conf / "vllm-0.unit.conf").write_text("LLMFLEET_HEALTH_URL=http://127.0.0.1:18000/health\n")
    (conf / "vllm-0.env").write_text("VLLM_API_KEY=%s\n" % key)
    os.chmod(str(conf / "vllm-0.env"), 0o600)
    (tmp_path / "unit.service").write_text("[Service]\n")
    return conf


def base_args(tmp_path, state, **extra):
    args = dict(state=state, replicas=[{"name": 0, "port": 8000}], config_dir=str(tmp_path / "etc"),
                unit_file=str(tmp_path / "unit.service"), model_dir=str(tmp_path / "models" / "m"))
    args.update(extra)
    return args


def test_keeps_once_then_reports_nothing_until_the_serving_configuration_changes(tmp_path):
    conf = deployment(tmp_path, "run old\n", "old-key")
    model(str(tmp_path / "models" / "m"), "AAAA")
    first = run(base_args(tmp_path, "saved", model_manifest="sha256:old"))
    assert first["changed"] and first["kept"] == ["0"]
    kept = conf / "known-good"
    assert (kept / "vllm-0.run").read_text() == "run old\n"
    assert stat.S_IMODE(os.stat(str(kept / "vllm-0.env")).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(str(kept)).st_mode) == 0o700
    assert "old-key" not in json.dumps(first), "the module returned a secret"
    again = run(base_args(tmp_path, "saved", model_manifest="sha256:old"))
    assert not again["changed"] and again["kept"] == []
    (conf / "vllm-0.run").write_text("run new\n")
    assert run(base_args(tmp_path, "saved", model_manifest="sha256:old"))["kept"] == ["0"]


def test_check_mode_reports_and_writes_nothing(tmp_path):
    conf = deployment(tmp_path, "run old\n", "k")
    got = run(base_args(tmp_path, "saved"), "--check")
    assert got["changed"] and not (conf / "known-good").exists()


def test_restore_puts_the_files_back_and_swaps_the_previous_weights_in(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    dest = str(models / "m")
    model(dest, "AAAA")
    old_manifest = model_dir_digest(dest)
    conf = deployment(tmp_path, "run old\n", "old-key")
    assert run(base_args(tmp_path, "saved", model_manifest=old_manifest))["kept"] == ["0"]
    # The next run: new weights placed (the old ones kept as the previous generation), new files written.
    staging = model(str(models / ".m.partial"), "BBBB")
    hub_fetch.place(staging, dest, keep_previous=True)
    assert sorted(os.listdir(str(models))) == [".m.previous", "m"]
    assert model_dir_digest(dest) != old_manifest
    deployment(tmp_path, "run new\n", "new-key")
    got = run(base_args(tmp_path, "restored"))
    assert got["changed"] and got["restored"] == ["0"] and got["missing"] == [] and got["model_restored"]
    assert (conf / "vllm-0.run").read_text() == "run old\n"
    assert (conf / "vllm-0.env").read_text() == "VLLM_API_KEY=old-key\n"
    assert stat.S_IMODE(os.stat(str(conf / "vllm-0.env")).st_mode) == 0o600
    assert model_dir_digest(dest) == old_manifest == got["model_manifest"]
    with open(os.path.join(dest, "w.safetensors")) as fh:
        assert fh.read() == "AAAA"


def test_restore_without_a_kept_configuration_names_the_replica_and_changes_nothing(tmp_path):
    conf = deployment(tmp_path, "run new\n", "k")
    got = run(base_args(tmp_path, "restored"))
    assert not got["changed"] and got["restored"] == [] and got["missing"] == ["0"]
    assert (conf / "vllm-0.run").read_text() == "run new\n"


def test_place_without_keep_previous_leaves_nothing_next_to_the_model(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    dest = str(models / "m")
    model(dest, "AAAA")
    hub_fetch.place(model(str(models / ".m.partial"), "BBBB"), dest)
    assert os.listdir(str(models)) == ["m"]
    # With keep_previous, one generation only: a third placement replaces the previous one.
    hub_fetch.place(model(str(models / ".m.partial"), "CCCC"), dest, keep_previous=True)
    hub_fetch.place(model(str(models / ".m.partial"), "DDDD"), dest, keep_previous=True)
    assert sorted(os.listdir(str(models))) == [".m.previous", "m"]
    with open(str(models / ".m.previous" / "w.safetensors")) as fh:
        assert fh.read() == "CCCC"


def test_many_models_keep_and_restore_each_replicas_own_model_directory(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    chat, emb = str(models / "chat"), str(models / "emb")
    model(chat, "AAAA")
    model(emb, "EEEE")
    conf = deployment(tmp_path, "run chat\n", "k")
    for suffix, text in ((".run", "run emb\n"), (".unit.conf", "x\n"), (".env", "K=1\n")):
        (conf / ("vllm-emb-0" + suffix)).write_text(text)
    dirs = {"0": chat, "emb-0": emb}
    manifests = {chat: model_dir_digest(chat), emb: model_dir_digest(emb)}
    replicas = [{"name": "0"}, {"name": "emb-0"}]
    saved = run(base_args(tmp_path, "saved", replicas=replicas, replica_model_dirs=dirs, model_manifests=manifests))
    assert saved["kept"] == ["0", "emb-0"]
    record = json.loads((conf / "known-good" / "vllm-emb-0.json").read_text())
    assert record == {"model_dir": emb, "model_manifest": manifests[emb]}
    # New weights for the embedding model only: its directory is swapped back, the chat model's is left alone.
    hub_fetch.place(model(str(models / ".emb.partial"), "FFFF"), emb, keep_previous=True)
    got = run(base_args(tmp_path, "restored", replicas=[{"name": "emb-0"}], replica_model_dirs=dirs))
    assert got["restored"] == ["emb-0"] and got["model_restored"]
    assert model_dir_digest(emb) == manifests[emb] and model_dir_digest(chat) == manifests[chat]
