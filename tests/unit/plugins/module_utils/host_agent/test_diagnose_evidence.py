"""Evidence collected by the diagnose role, and the diagnosis of a whole replica (host_agent.diagnose_evidence)."""
from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent.diagnose_evidence import (
    container_facts_json,
    context_from_plan,
    diagnose_replica,
    parse_df,
    parse_systemctl_show,
    redact,
    replica_names,
)
from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent.diagnostics import classify

from .test_diagnostics_bind import JOURNAL  # the journal of a replica whose published port was taken (issue 16)

INSPECT = [{
    "State": {"Status": "exited", "Running": False, "ExitCode": 137, "OOMKilled": True, "Error": ""},
    "RestartCount": 0,
    "Config": {
        "Image": "vllm/vllm-openai:v0.17.0",
        "Entrypoint": ["vllm", "serve"],
        "Cmd": ["/models/qwen", "--served-model-name", "qwen3.5", "--port", "8000", "--max-model-len", "65536"],
        "Env": ["VLLM_API_KEY=sk-very-secret", "VLLM_ENABLE_PREFIX_CACHING=1", "PATH=/usr/bin"],
    },
    "HostConfig": {"IpcMode": "host", "ShmSize": 67108864, "NetworkMode": "bridge",
                   "PortBindings": {"8000/tcp": [{"HostIp": "127.0.0.1", "HostPort": "18000"}]}},
    "Mounts": [{"Type": "bind", "Source": "/srv/llmfleet/models/qwen", "Destination": "/models/qwen"}],
}]


def test_container_facts_never_carry_environment_values():
    import json
    facts = container_facts_json(json.dumps(INSPECT))
    assert facts["exit_code"] == 137 and facts["oom_killed"] is True
    assert facts["port"] == 18000
    assert facts["served_model_name"] == "qwen3.5"
    assert facts["max_model_len"] == "65536"
    assert facts["model_mounts"] == [{"source": "/srv/llmfleet/models/qwen", "destination": "/models/qwen"}]
    assert "sk-very-secret" not in json.dumps(facts)
    assert "VLLM_API_KEY" in facts["env_names"]
    assert container_facts_json("[]") == {} and container_facts_json("Error: No such object") == {}


def test_diagnose_replica_reads_state_files_and_names_without_leaking_secrets():
    result = diagnose_replica({
        "replica": "0",
        "unit": "llmfleet-vllm@0.service",
        "unit_show": "LoadState=loaded\nActiveState=activating\nSubState=auto-restart\nNRestarts=4\n",
        "container": "llmfleet-vllm-0",
        "inspect": INSPECT,
        "journal": "INFO non-default args: {'api_key': ['sk-very-secret'], 'model': '/models/qwen'}\n",
        "model_files": ["config.json", "model-00001-of-00014.safetensors"],
        "served_names": ["qwen3.5"],
        "requested_model": "qwen35-a3b",
    }, {"suggested_max_num_seqs": 64})
    ids = [f["id"] for f in result["findings"]]
    assert ids[0] == "served_model_name_mismatch"
    assert set(ids) == {"served_model_name_mismatch", "container_oom_killed", "tokenizer_missing",
                        "unknown_vllm_env_var"}
    assert result["state"] == "unit activating/auto-restart, 4 restarts, container exited (exit code 137, OOM-killed)"
    text = "\n".join(result["report"])
    assert "sk-very-secret" not in text
    assert "/srv/llmfleet/models/qwen" in text  # the model dir comes from the container's mount
    assert "/etc/llmfleet/vllm-0.env" in text
    assert result["context"]["port"] == 18000


def test_missing_model_directory_and_missing_unit():
    result = diagnose_replica({"replica": "1", "unit": "llmfleet-vllm@1.service", "unit_show": "LoadState=not-found\n",
                               "container": "llmfleet-vllm-1", "inspect_json": "[]",
                               "model_dir": "/srv/models/x", "model_files": None})
    assert [f["id"] for f in result["findings"]] == ["model_path_missing", "unit_not_installed"]
    assert "container llmfleet-vllm-1 absent" in result["state"]


def test_gpu_host_without_nvidia_runtime_and_full_disk():
    result = diagnose_replica({"replica": "0", "accelerator": "gpu", "docker_runtimes": ["runc"],
                               "disk": parse_df("Filesystem 1024-blocks Used Available Capacity Mounted on\n"
                                                "/dev/sda1 100 99 1 99% /srv\n/dev/sdb 100 10 90 10% /var\n")})
    assert [f["id"] for f in result["findings"]] == ["nvidia_runtime_missing", "disk_full"]
    cpu = diagnose_replica({"replica": "0", "accelerator": "cpu", "docker_runtimes": ["runc"]})
    assert cpu["findings"] == []


def test_parse_helpers():
    assert parse_systemctl_show("A=1\nB=x=y\n") == {"A": "1", "B": "x=y"}
    assert replica_names("llmfleet-vllm@0.service loaded failed failed vLLM\n",
                         "llmfleet-vllm-0\nllmfleet-vllm-1\nother\n",
                         {"replicas": [{"name": "2"}, "0"]}) == ["2", "0", "1"]


def test_context_from_a_plan_that_does_not_fit_uses_its_suggestions():
    plan = {"model": "Qwen/Qwen3.5-35B-A3B", "max_model_len": 262144, "max_num_seqs": 256,
            "gpu_memory_utilization": 0.92, "min_vllm_version": "0.17.0", "fits": False,
            "suggestions": [{"set": {"max_model_len": 98304}, "text": "Lower max_model_len to 98304."},
                            {"set": {"model": "Qwen/Qwen3.5-35B-A3B-FP8"}, "text": "Use the FP8 variant."}]}
    ctx = context_from_plan(plan)
    assert ctx["suggested_max_model_len"] == 98304
    assert ctx["suggested_variant"] == "Qwen/Qwen3.5-35B-A3B-FP8"
    assert ctx["suggested_gpu_memory_utilization"] == 0.87 and ctx["suggested_max_num_seqs"] == 128
    assert ctx["min_vllm_version"] == "0.17.0"
    fix = classify("torch.OutOfMemoryError: CUDA out of memory.", ctx)[0]["fix"]
    assert "0.87" in fix and "98304" in fix and "128" in fix and "Qwen/Qwen3.5-35B-A3B-FP8" in fix


def test_context_from_a_fitting_plan_offers_the_next_conservative_step():
    ctx = context_from_plan({"max_model_len": 65536, "max_num_seqs": 64, "gpu_memory_utilization": 0.9,
                             "suggestions": []})
    assert (ctx["suggested_max_model_len"], ctx["suggested_max_num_seqs"], ctx["suggested_gpu_memory_utilization"]) \
        == (32768, 32, 0.85)
    assert context_from_plan(None) == {}


def test_redact_masks_keys_and_tokens():
    for line in ("--api-key sk-1234567890", "VLLM_API_KEY=abc", "Authorization: Bearer abc.def",
                 "token hf_abcdefghijklmnopqrstuvwxyz12", "'api_key': ['k1', 'k2']", "HF_TOKEN=hf_x"):
        out = redact(line)
        assert "<redacted>" in out
        for secret in ("sk-1234567890", "=abc", "abc.def", "hf_abcdefghijklmnopqrstuvwxyz12", "k1", "hf_x"):
            if secret in line:
                assert secret not in out, (line, out)


def test_journal_of_a_replica_that_cannot_bind_is_diagnosed():
    result = diagnose_replica({"replica": "0", "unit": "llmfleet-vllm@0.service",
                               "unit_state": {"ActiveState": "activating", "SubState": "auto-restart"},
                               "journal": "\n".join(JOURNAL)})
    assert [f["id"] for f in result["findings"]] == ["port_in_use"]
    assert not any("No known failure signature matched" in line for line in result["report"])
    assert "vllm_server_port_base" in result["findings"][0]["fix"]
