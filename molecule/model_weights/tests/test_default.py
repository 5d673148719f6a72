"""What a user of model_weights sees on the host after the converge (testinfra, Molecule verify)."""
import hashlib
import os
from pathlib import Path

import pytest

MODEL = Path(os.environ["LLMFLEET_TEST_HUB_MODEL_DIR"])
DIRS = ["tiny-hf", "tiny-ms", "tiny-local", "tiny-hostpath"]


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("name", DIRS)
def test_every_file_is_there_with_the_hub_bytes(host, name):
    d = "/srv/llmfleet/models/" + name
    for f in MODEL.iterdir():
        if f.is_file() and not f.name.startswith("."):  # hidden files (build stamps) are not published
            remote = host.file("%s/%s" % (d, f.name))
            assert remote.exists, f.name
            assert remote.sha256sum == _sha(f), f.name
    marker = host.file(d + "/.llmfleet-weights.json")
    assert marker.exists and '"verified_at"' in marker.content_string


def test_nothing_half_written_is_left_behind(host):
    listing = host.check_output("ls -A /srv/llmfleet/models")
    assert sorted(listing.split()) == sorted(DIRS)


def test_the_fact_for_the_serve_role_names_the_final_directory(host):
    assert host.file("/root/model_weights_path.txt").content_string.split() == [
        "/srv/llmfleet/models/tiny-hf", "/srv/llmfleet/models/tiny-hostpath"]


def test_hub_clients_live_in_their_own_venv(host):
    py = "/opt/llmfleet/venv/bin/python"
    out = host.check_output(py + " -c 'import huggingface_hub, modelscope; print(huggingface_hub.__version__)'")
    assert out.startswith("2.")
    assert host.run("python3 -c 'import huggingface_hub'").rc != 0, "the system Python stays untouched"


def test_the_token_is_written_nowhere(host):
    r = host.run("grep -rl testbed-secret-token-do-not-log /srv /opt/llmfleet /root /tmp /var/log 2>/dev/null")
    assert r.stdout.strip() == ""
