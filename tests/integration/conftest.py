"""Fixtures shared by the integration tests."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "testbed"))

import hub_repo  # noqa: E402


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A synthetic model directory (config, tokenizer, two safetensors shards of 1 and 16 MiB) for the weights
    transfer tests (test_peer_fetch.py, test_peer_upload.py)."""
    return hub_repo.synth_model(tmp_path_factory.mktemp("model") / "m", [1, 16])


@pytest.fixture(scope="module")
def model_bytes(model_dir):
    """The size of model_dir, every file counted."""
    return sum(p.stat().st_size for p in model_dir.rglob("*") if p.is_file())
