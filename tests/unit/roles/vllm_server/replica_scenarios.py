"""Replica spec inputs of the rendered-file fixtures (fixtures/rendered/<scenario>-<host>/), as the vllm_server role
passes them to llmfleet.vllm.replica_spec. The fixtures were rendered by the role's templates before the spec
existed (commit 1cc5b1e), from the same inventory values: a deployment made then must see the same files now."""
import os

import yaml

from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent import multinode as MN

ROLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "roles", "vllm_server")
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "rendered")


def role_defaults():
    with open(os.path.join(ROLE, "defaults", "main.yml")) as fh:
        return yaml.safe_load(fh)


def _host(defaults, **over):
    host = {
        "accelerator": "gpu", "image": "", "image_inspects": [], "bind_address": "127.0.0.1", "edge": True,
        "edge_bind_address": "0.0.0.0", "edge_port_offset": 10000, "config_dir": "/etc/llmfleet",
        "libexec_dir": "/usr/local/libexec/llmfleet", "docker_bin": "/usr/bin/docker", "cpu_amx_permission": True,
        "engine_cache": {"enabled": True, "dir": "/var/cache/llmfleet/engine",
                         "container_path": "/var/cache/llmfleet-engine", "env": defaults["vllm_server_engine_cache_env"]},
        "container_hardening": defaults["vllm_server_container_hardening"], "docker_run_args": [],
        "watchdog_textfile_dir": "", "multinode": {"layout": MN.single_layout("h1")},
    }
    host.update(over)
    return host


def _model(defaults, **over):
    model = {"name": "", "path": "", "replicas": [], "args": {}, "args_extra": {}, "shutdown_timeout": 60, "env": {},
             "accelerator_env": defaults["vllm_server_accelerator_env"],
             "engine_cache_accelerator_env": defaults["vllm_server_engine_cache_accelerator_env"]}
    model.update(over)
    return model


def _group(hostname, backend):
    addresses = {"h1": "10.0.0.1", "h2": "10.0.0.2"}
    layout = MN.group_layout(["h1", "h2"], hostname, addresses, "grp", None)
    return {"layout": layout, "backend": backend, "master_port": 29500, "ray_port": 6379, "interface": "eth1",
            "plan": {"tensor_parallel_size": 8, "pipeline_parallel_size": 2, "min_vllm_version": "0.10.0"}}


def scenarios():
    """{fixture name: (host, models, template variables)}."""
    d = role_defaults()
    cpu = (_host(d, accelerator="cpu", image="registry.local:5000/vllm-cpu:0.32.0@sha256:1111",
                 image_inspects=[{"Id": "sha256:abcdef0123456789abcdef",
                                  "Config": {"Entrypoint": ["/opt/venv/bin/vllm", "serve"]}}]),
           [_model(d, name="tiny", path="/srv/llmfleet/models/tiny-qwen3-moe",
                   replicas=[{"name": "0", "port": 8000, "gpus": []}],
                   args={"max-model-len": 512, "kv-cache-memory-bytes": 67108864, "enable-prefix-caching": True,
                         "max-num-seqs": 8},
                   args_extra={"enforce-eager": True, "distributed-executor-backend": "uni"})],
           {"model_manifest": "0f0e0d0c0b0a", "vllm_server_api_key": "sentinel-key-4f1c", "vllm_server_hf_token": "",
            "vllm_server_start_timeout": 600})
    gpu = (_host(d, image="vllm/vllm-openai:v0.33.0@sha256:2222", edge=False, bind_address="0.0.0.0",
                 engine_cache={"enabled": False, "dir": "/var/cache/llmfleet/engine"},
                 docker_run_args=["--shm-size", "16g"],
                 image_inspects=[{"Id": "sha256:99887766554433221100", "Config": {"Entrypoint": None}}]),
           [_model(d, name="Qwen/Qwen3-8B", path="/srv/models/Qwen3-8B", shutdown_timeout=None,
                   replicas=[{"name": "0", "port": 8000, "gpus": [0, 1]}, {"name": "1", "port": 8001, "gpus": [2, 3]}],
                   args={"max-model-len": 32768, "tensor-parallel-size": 2, "gpu-memory-utilization": 0.9,
                         "limit-mm-per-prompt": {"image": 0}},
                   args_extra={"max-num-seqs": 64, "kv-cache-dtype": "fp8"},
                   env={"NCCL_DEBUG": "WARN", "SOME_TEXT": "a b c"})],
           {"model_manifest": "", "vllm_server_api_key": "", "vllm_server_hf_token": "hf_secret",
            "vllm_server_start_timeout": 1800})

    def group(hostname, backend):
        return (_host(d, image="vllm/vllm-openai:v0.33.0@sha256:3333", multinode=_group(hostname, backend),
                      image_inspects=[{"Id": "sha256:5555", "Config": {"Entrypoint": ["vllm", "serve"]}}]),
                [_model(d, name="big", path="/srv/models/big", replicas=[{"name": "0", "port": 8000, "gpus": list(range(8))}],
                        args={"max-model-len": 8192, "tensor-parallel-size": 8})],
                {"model_manifest": "aa", "vllm_server_api_key": "", "vllm_server_hf_token": "",
                 "vllm_server_start_timeout": 1800})
    return {"cpu-h1": cpu, "gpu-h1": gpu, "group-h2": group("h2", "mp"), "ray-h1": group("h1", "ray"),
            "ray-h2": group("h2", "ray")}
