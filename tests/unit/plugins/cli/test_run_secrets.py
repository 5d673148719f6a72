"""llmfleet-run's secrets (plugins/cli/run_secrets.py): which names look secret, the values kept out of output and
artifacts, their redaction and the scrubbing of kept artifacts."""

import json

import pytest

from ansible_collections.llmfleet.vllm.plugins.cli import run_secrets


@pytest.mark.parametrize("name", ["hub_token", "HF_TOKEN", "vllm_api_key", "db_password", "client_secret",
                                  "ansible_become_pass", "OPENAI_APIKEY", "registry-password"])
def test_secret_looking_names(name):
    assert run_secrets.is_secret_name(name)


@pytest.mark.parametrize("name", ["llmfleet_model", "vllm_max_num_batched_tokens", "max_tokens", "vllm_port",
                                  "passes", "keyboard_api", "tokenizer"])
def test_ordinary_names_are_not_secret(name):
    # A number such as max_tokens must not be treated as a secret: its value would be scrubbed
    # from every artifact it appears in.
    assert not run_secrets.is_secret_name(name)


def test_split_sends_nested_secrets_whole_to_the_private_side():
    public, secret = run_secrets.split_extravars(
        {"llmfleet_model": "Qwen/Qwen3.5-35B-A3B", "hub": {"endpoint": "https://hf.co", "token": "hf_abcdef"},
         "vllm_api_key": "sk-123456", "replicas": 2})
    assert public == {"llmfleet_model": "Qwen/Qwen3.5-35B-A3B", "replicas": 2}
    assert set(secret) == {"hub", "vllm_api_key"}
    values = run_secrets.secret_values(secret, {"HF_TOKEN": "hf_fromenv", "HOME": "/root", "MY_PASSWORD": "ab"})
    # the hub endpoint is not a secret; values shorter than 4 characters are not scanned for
    assert sorted(values) == ["hf_abcdef", "hf_fromenv", "sk-123456"]


def test_redact_also_catches_json_escaped_forms():
    secret = 'p"w\\d1234'
    text = json.dumps({"msg": f"value {secret}"})
    redacted = run_secrets.redact(text, [secret])
    assert secret not in redacted and json.dumps(secret)[1:-1] not in redacted


def test_scrub_tree_overwrites_secrets_and_names_the_files(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "stdout").write_text("token is SENTINEL123\n")
    (tmp_path / "clean.json").write_text("{}")
    hits = run_secrets.scrub_tree(tmp_path, ["SENTINEL123"])
    assert hits == ["a/stdout"]
    assert (tmp_path / "a" / "stdout").read_text() == "token is ********\n"
