"""plugins/filter/benchmark.py: the benchmark client's command (bench_serve_argv), as roles/benchmark/tasks/level.yml
runs it for one concurrency level, and the API key it reads from an environment file (env_file_value)."""
import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.filter.benchmark import FilterModule

argv_of = FilterModule().filters()["bench_serve_argv"]
CLIENT = {"container": "llmfleet-bench-r1-c4", "env_file": "/tmp/env", "model_dir": "/srv/models/tiny",
          "results_dir": "/tmp/results", "image": "reg/vllm@sha256:ab", "backend": "openai",
          "base_url": "http://127.0.0.1:8000", "endpoint": "/v1/completions", "served_model_name": "tiny",
          "input_len": 1024, "output_len": 256, "seed": 0, "num_prompts": 32, "concurrency": 4, "num_warmups": 2,
          "ready_timeout_s": 60, "run_id": "r1", "extra_args": ["--goodput", "ttft:500"]}


def flag(argv, name):
    return argv[argv.index(name) + 1]


def test_the_client_runs_in_the_serving_image_offline_with_the_model_as_its_tokenizer():
    argv = argv_of(CLIENT)
    assert argv[:3] == ["docker", "run", "--rm"] and flag(argv, "--name") == "llmfleet-bench-r1-c4"
    at = argv.index("--entrypoint")
    assert argv[at + 1:at + 5] == ["vllm", "reg/vllm@sha256:ab", "bench", "serve"]
    assert "/srv/models/tiny:/model:ro" in argv and flag(argv, "--tokenizer") == "/model"
    assert "HF_HUB_OFFLINE=1" in argv and flag(argv, "--env-file") == "/tmp/env"


def test_one_concurrency_level_with_its_prompts_and_result_file():
    argv = argv_of(CLIENT)
    assert flag(argv, "--max-concurrency") == "4" and flag(argv, "--num-prompts") == "32"
    assert flag(argv, "--result-filename") == "concurrency-4.json" and flag(argv, "--result-dir") == "/results"
    assert flag(argv, "--random-input-len") == "1024" and flag(argv, "--random-output-len") == "256"
    assert all(isinstance(arg, str) for arg in argv)


def test_extra_args_come_after_the_clients_flags_and_before_the_metadata():
    argv = argv_of(CLIENT)
    assert argv.index("--goodput") > argv.index("--result-filename")
    metadata = ["--metadata", "input_len=1024", "output_len=256", "image=reg/vllm@sha256:ab",
                "target=http://127.0.0.1:8000", "run_id=r1"]
    assert argv[argv.index("--metadata"):] == metadata
    assert "--goodput" not in argv_of(dict(CLIENT, extra_args=[]))


def test_an_https_endpoint_is_verified_against_the_ca_mounted_into_the_client():
    argv = argv_of(dict(CLIENT, base_url="https://127.0.0.1:8000", ca_file="/etc/llmfleet/tls/ca.crt"))
    assert "/etc/llmfleet/tls/ca.crt:/etc/llmfleet-ca.crt:ro" in argv and "SSL_CERT_FILE=/etc/llmfleet-ca.crt" in argv
    assert argv.index("SSL_CERT_FILE=/etc/llmfleet-ca.crt") < argv.index("--entrypoint")
    assert not [a for a in argv_of(dict(CLIENT, ca_file="")) if "SSL_CERT_FILE" in a]


def test_a_missing_setting_is_named():
    with pytest.raises(AnsibleFilterError, match="missing concurrency"):
        argv_of(dict((k, v) for k, v in CLIENT.items() if k != "concurrency"))
    with pytest.raises(AnsibleFilterError):
        argv_of(["docker"])


env_value = FilterModule().filters()["env_file_value"]


@pytest.mark.parametrize("text, value", [
    ("VLLM_API_KEY=abc\n", "abc"),
    ("# key\nexport VLLM_API_KEY=\"a b\"\nOTHER=x\n", "a b"),
    ("  VLLM_API_KEY='q'  \n", "q"),
    ("OTHER=x\nMY_VLLM_API_KEY=no\n", ""),
    ("VLLM_API_KEY=\"unbalanced'\n", "\"unbalanced'"),
    (None, ""),
])
def test_the_key_is_read_from_an_environment_file_as_a_shell_would_set_it(text, value):
    assert env_value(text, "VLLM_API_KEY") == value
