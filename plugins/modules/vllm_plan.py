#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_plan
short_description: Plan a vLLM deployment for a model on given GPUs (pure planning, changes nothing)
version_added: "1.0.0"
description:
  - Decides the layout (tensor-parallel size, replicas and their GPUs, expert parallelism), sizes the KV cache
    and the concurrency it allows, and builds the vLLM arguments from the model profile's serving features.
  - Runs on the Ansible controller (action plugin); touches no host. Model profiles are data files shipped in
    the collection's C(profiles/) directory, one per checkpoint variant, named after the Hugging Face repo id.
  - "Capacity is vLLM's own arithmetic (docs/PLANNER.md): memory per GPU = CUDA memory x gpu_memory_utilization
    - weights / TP - non-torch memory - activation peak - CUDA-graph estimate; hybrid models pad the attention
    block until its page holds a linear-attention state page, group layers into groups sharing one block pool,
    and charge each request its attention blocks plus 1 (2 with prefix caching) state blocks per group.
    C(kv_cache_tokens) and C(max_concurrency) mean what vLLM logs as 'GPU KV cache size' and 'Maximum
    concurrency'."
  - "Across hosts (I(hosts) or several hosts' I(gpu_facts)): TP inside a host over NVLink, PP across hosts;
    C(plan.nodes), C(plan.pipeline_parallel_size) and C(plan.stages) say how."
  - "Layout: a tensor-parallel group never spans GPUs without NVLink between them when a replica fits inside one
    NVLink domain; the TP size divides the attention heads; with objective C(throughput) each layout (replicas x
    TP) is scored by the full-context sequences it serves, discounted for TP traffic, and C(reasons) compares
    them; expert parallelism only inside an NVLink domain."
options:
  model:
    description:
      - A profile name (the Hugging Face repo id, e.g. C(Qwen/Qwen3.5-35B-A3B), C(Qwen/Qwen3.5-35B-A3B-FP8),
        C(Qwen/Qwen3.5-35B-A3B-GPTQ-Int4), C(llmfleet-test/tiny-qwen3-moe)), a controller path to a model
        directory or its config.json (weights from model.safetensors.index.json or the *.safetensors sizes), or any
        Hugging Face / ModelScope repo id (C(org/name)); its config.json, generation_config.json and
        model.safetensors.index.json are read from the hub at I(hub_revision) (see I(hub_source)) and cached in
        I(metadata_cache_dir); without a profile the plan uses the engine options every model has (prefix_caching,
        enforce_eager) and vLLM's defaults. An architecture or layer type the planner does not model is refused.
    type: str
    required: true
  hub_source:
    description: The hub a repo id is read from, as the model_weights role's C(model_weights_source).
    type: str
    choices: [hf, modelscope]
    default: hf
  hub_endpoint:
    description: Hub endpoint or mirror (C(model_weights_endpoint)); empty for the public hub.
    type: str
  hub_revision:
    description: Branch, tag or commit to read (C(model_weights_revision)); empty for the default branch. A commit
      already in I(metadata_cache_dir) is read from there without asking the hub.
    type: str
  hub_token:
    description: Token for gated or private repositories (C(model_weights_token)); never logged.
    type: str
  metadata_cache_dir:
    description: Controller directory where hub metadata is cached, one directory per repo and commit.
    type: path
    default: ~/.cache/llmfleet/hub-metadata
  model_config:
    description:
      - The model's config.json contents (e.g. slurped from a remote host). Overrides the architecture of the
        profile named by I(model); needs I(weights_bytes) when I(model) is not a known profile.
    type: dict
  weights_bytes:
    description: Size of the checkpoint's weights in bytes (overrides the profile's number).
    type: int
  gpu_facts:
    description:
      - The C(gpu_facts) returned by M(llmfleet.vllm.gpu_facts) (one host), or a list of several hosts' gpu_facts in
        node-rank order (the hosts of one C(llmfleet_model_group)). Several hosts are planned as one vLLM instance
        only when one host does not hold the model (see I(hosts)).
    type: raw
  hosts:
    description:
      - "Plan for this many identical hosts like the one described by I(gpu_facts), I(gpu_facts_file) or
        I(hardware). A model that one host holds is planned on one host (C(plan.nodes) 1; each host serves its own
        replicas). A model larger than one host is planned across the fewest hosts that hold it, as vLLM serves it:
        tensor parallel inside each host over NVLink, pipeline parallel across the hosts (one stage per host, the
        layers split as vLLM's C(get_pp_indices) splits them, each stage sized on its own and the smallest KV pool
        setting the capacity)."
      - With one host (the default) such a model does not fit and C(suggestions) names the host count
        (C(Use 2 hosts like this one ...)).
    type: int
  gpu_facts_file:
    description: A JSON or YAML file on the controller holding gpu_facts (or a registered gpu_facts result).
    type: path
  hardware:
    description:
      - Described hardware instead of gpu_facts, to plan before buying. Either C(<count>x <GPU>[ PCIe|NVLink]) with
        a GPU of the collection's catalogue (C(catalogue/gpus.yml)), e.g. C(4x L40S), C(8x H100 SXM),
        C(2x RTX 4090 PCIe), C(1x H200), C(8x H20), C(2x H200 NVLink); an unknown name fails with the list of
        known ones. Or a dict with count, memory_mib, link (NV<n>, PIX, PXB, PHB, NODE or SYS between every
        pair), name (a catalogue name fills memory and links).
    type: raw
  accelerator:
    description: C(gpu), or C(cpu) for the vLLM CPU engine (development / CI; needs I(kv_cache_memory_bytes)).
    type: str
    choices: [gpu, cpu]
    default: gpu
  kv_cache_memory_bytes:
    description:
      - KV cache budget of the CPU engine (C(--kv-cache-memory-bytes)), needed with accelerator cpu.
      - On a GPU, only for a model whose architecture or layer types the planner does not understand (it refuses
        them otherwise) - vLLM's C(--kv-cache-memory-bytes), bytes of KV cache per GPU, set by hand. The model is
        then planned with these bytes and the weights from its safetensors index (or I(weights_bytes)); the plan
        says C(verified=false), what was not understood, and leaves the KV tokens and concurrency to vLLM.
      - A model the planner understands is refused with it on a GPU (the planner sizes its KV cache itself).
    type: int
  objective:
    description:
      - C(throughput) (the layout that serves the most full-context sequences at once, TP traffic discounted) or
        C(latency) (TP over NVLink up to the KV head count).
    type: str
    choices: [throughput, latency]
    default: throughput
  max_model_len:
    description: Context length to plan for (default the model's native context).
    type: int
  max_num_seqs:
    description: Sequences in flight per replica (default chosen by the plan; hybrid models are capped by state).
    type: int
  max_num_batched_tokens:
    description: Tokens per scheduler step (default 8192 on GPUs with 70 GiB or more, else 2048).
    type: int
  gpu_memory_utilization:
    description: Share of each GPU's memory vLLM may use.
    type: float
    default: 0.9
  tensor_parallel_size:
    description: Force a TP size (default chosen by the plan).
    type: int
  replicas:
    description:
      - Force the number of replicas (default every group of GPUs the layout makes). With I(tensor_parallel_size)
        this forces the whole layout, e.g. 4 replicas of TP2; GPUs left over stay unused.
    type: int
  enable_expert_parallel:
    description: Force expert parallelism on or off (default on for MoE models with TP inside an NVLink domain).
    type: bool
  kv_cache_dtype:
    description: KV cache dtype; C(auto) follows the model dtype.
    type: str
    choices: [auto, fp8, fp8_e4m3, fp8_e5m2, bfloat16, float16]
    default: auto
  features:
    description:
      - Serving features to turn on or off (true / false) over the profile's defaults. The Qwen3.5 profiles define
        reasoning, thinking, tool_calling, mtp, prefix_caching, text_only, enforce_eager, eplb, trust_remote_code.
    type: dict
  vllm_version:
    description: The vLLM version that will serve; the plan does not fit when it is older than the profile's minimum.
    type: str
  engine_args:
    description:
      - The flags the replicas get beyond the plan's own (the vllm_server role's C(vllm_server_args_extra), which
        win over the plan's in the container's argv). The ones that change vLLM's memory or KV layout are planned as
        vLLM will run them, over the inputs above - C(max-model-len), C(max-num-seqs), C(max-num-batched-tokens),
        C(gpu-memory-utilization), C(kv-cache-dtype), C(tensor-parallel-size), C(kv-cache-memory-bytes),
        C(enable-prefix-caching) and C(enforce-eager) (when the model's features have them) and
        C(disable-hybrid-kv-cache-manager); C(reasons) lists what was read. Other flags do not change the plan.
    type: dict
    default: {}
  engine_args_var:
    description: The variable name I(engine_args) came from, for messages (preflight passes C(vllm_server_args_extra)).
    type: str
    default: engine_args
  engine_env:
    description:
      - The replicas' environment (C(vllm_server_env)); only C(VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1)
        is read (vLLM's hybrid KV cache manager for chunked local attention, which vLLM otherwise turns off).
        Never logged.
    type: dict
    default: {}
  profiles_path:
    description:
      - Extra directories of profile files (searched after the collection's own profiles/). A profile there may
        say C(extends) with a collection profile's id and hold only its differences (e.g. a local re-quantisation).
    type: list
    elements: path
    default: []
  hardware_label:
    description: Label of the hardware in C(table_row) (default the preset name or the GPU model).
    type: str
  fail_if_not_fits:
    description: Fail the task, with the reasons and suggestions, when the model does not fit.
    type: bool
    default: false
author:
  - llmfleet maintainers (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.vllm.attributes
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
  - ansible.builtin.action_common_attributes.flow
attributes:
  check_mode:
    support: full
    details: It only plans.
  platform:
    platforms: all
  action:
    support: full
    details: Plans on the controller; the module part only documents the options.
  async:
    support: none
  bypass_host_loop:
    support: none
"""

EXAMPLES = r"""
- name: Plan the FP8 checkpoint on this host's GPUs
  llmfleet.vllm.vllm_plan:
    model: Qwen/Qwen3.5-35B-A3B-FP8
    gpu_facts: "{{ gpu.gpu_facts }}"
    max_model_len: 65536
    features:
      tool_calling: true
  register: plan

- name: Plan before you buy
  llmfleet.vllm.vllm_plan:
    model: Qwen/Qwen3.5-35B-A3B
    hardware: 2x H200 NVLink
    objective: latency

- name: Plan DeepSeek-V3 on two hosts of 8x H100 SXM (TP8 inside each host, PP2 across them)
  llmfleet.vllm.vllm_plan:
    model: deepseek-ai/DeepSeek-V3
    hardware: 8x H100 SXM
    hosts: 2
    max_model_len: 32768

- name: Plan one model over the hosts of an inventory group, from each host's own gpu_facts
  llmfleet.vllm.vllm_plan:
    model: meta-llama/Llama-3.1-405B-Instruct
    gpu_facts: "{{ groups['llama405b'] | map('extract', hostvars, ['gpu', 'gpu_facts']) | list }}"

- name: Plan the tiny test model on the CPU engine
  llmfleet.vllm.vllm_plan:
    model: llmfleet-test/tiny-qwen3-moe
    accelerator: cpu
    kv_cache_memory_bytes: 67108864
    max_model_len: 512
"""

RETURN = r"""
hub_metadata:
  description: Where a repo id's metadata came from (source, commit, cached, path, generation_config); null for
    profiles and local directories.
  returned: always
  type: dict
plan:
  description: The plan; later stages read it and re-derive nothing.
  returned: always
  type: dict
  contains:
    fits: {description: The model fits with these settings., type: bool}
    tensor_parallel_size: {description: GPUs per replica (TP group); across hosts the TP group inside each host., type: int}
    pipeline_parallel_size: {description: Pipeline stages (1 on one host; across hosts one stage per host)., type: int}
    nodes:
      description: Hosts one instance spans (1 on one host; C(--nnodes) of vLLM's multi-node mode).
      type: int
    hosts: {description: Hosts the plan was given (I(hosts) or the length of the I(gpu_facts) list)., type: int}
    stages:
      description: >-
        Across hosts, one entry per pipeline stage (node rank): node_rank, host, layers ([start, end) as vLLM's
        get_pp_indices), num_layers, gpus, weights_bytes, weights_bytes_per_gpu, overhead_bytes_per_gpu,
        available_kv_cache_memory_bytes, kv_cache_blocks, fits, problem; null on one host.
      type: list
      elements: dict
    data_parallel_size: {description: Number of replicas (one vLLM container each; 1 across hosts)., type: int}
    replicas: {description: GPU indices of each replica (one empty list on the CPU engine)., type: list}
    enable_expert_parallel: {description: Expert parallelism inside each replica., type: bool}
    weights_bytes: {description: Weight bytes loaded per replica (checkpoint less parts not loaded)., type: int}
    weights_bytes_per_gpu: {description: Weight bytes on each GPU., type: int}
    overhead_bytes_per_gpu: {description: Conservative non-weight non-KV estimate per GPU., type: int}
    kv_cache_bytes_per_token: {description: KV bytes per token for the whole model (all ranks)., type: int}
    state_bytes_per_sequence: {description: Linear-attention state per running sequence (0 for plain attention)., type: int}
    kv_cache_tokens:
      description: "vLLM's 'GPU KV cache size' of one replica: max_concurrency x max_model_len."
      type: int
    available_kv_cache_memory_bytes: {description: "vLLM's 'Available KV cache memory' per GPU (planned).", type: int}
    kv_cache_blocks: {description: Blocks in one replica's KV cache pool (vLLM's num_gpu_blocks)., type: int}
    kv_cache_block_size: {description: Tokens per attention block (vLLM raises it for hybrid models)., type: int}
    max_concurrency:
      description: "vLLM's 'Maximum concurrency for max_model_len tokens per request' (one replica)."
      type: float
    kv_cache_tokens_total: {description: kv_cache_tokens x replicas., type: int}
    max_num_seqs: {description: Sequences in flight per replica., type: int}
    max_num_batched_tokens: {description: Tokens per scheduler step (GPU)., type: int}
    max_model_len: {description: Context length planned for., type: int}
    gpu_memory_utilization: {description: Share of GPU memory vLLM may use (null on CPU)., type: float}
    max_concurrency_at_max_model_len:
      description: Whole full-context sequences one replica runs at once (max_concurrency bounded by max_num_seqs).
      type: int
    max_concurrency_total: {description: The same over all replicas., type: int}
    layout: {description: 'Short layout text, e.g. C(2 x TP1) or C(1 x TP2 EP NVLink).', type: str}
    interconnect: {description: NVLink or the worst PCIe link inside a TP group (null for TP1)., type: str}
    unused_gpus: {description: GPUs left out of every replica., type: list}
    features: {description: Profile features on (true) or off (false)., type: dict}
    min_vllm_version: {description: First vLLM release that serves the model., type: str}
    reasons: {description: Sentences that explain each decision., type: list, elements: str}
    verified:
      description:
        - Present and false only for a model the planner does not understand, planned with the KV cache set by hand
          (I(kv_cache_memory_bytes)); its kv_cache_tokens and max_concurrency are null (vLLM reports them).
      type: bool
    not_understood: {description: "With verified=false: what the planner did not understand.", type: str}
    warnings: {description: "With verified=false: what the plan does not know (also in reasons).", type: list,
               elements: str}
    suggestions:
      description: When it does not fit, the smallest changes that would ({set, text}).
      type: list
      elements: dict
    vllm_args:
      description: >-
        vLLM CLI flags without leading dashes, kebab-case: True -> --flag, False -> --no-flag, None -> omitted,
        dict -> JSON, list -> repeated. Per replica; excludes model, served name, host, port and API key.
      type: dict
table_header:
  description: Markdown header of the plan table.
  returned: always
  type: str
table_row:
  description: This plan as one Markdown table row (hardware, model, fits, layout, KV, concurrency, max_num_seqs).
  returned: always
  type: str
"""

ARGUMENT_SPEC = dict(
    model=dict(type="str", required=True),
    hub_source=dict(type="str", choices=["hf", "modelscope"], default="hf"),
    hub_endpoint=dict(type="str"),
    hub_revision=dict(type="str"),
    hub_token=dict(type="str", no_log=True),
    metadata_cache_dir=dict(type="path", default="~/.cache/llmfleet/hub-metadata"),
    model_config=dict(type="dict"),
    weights_bytes=dict(type="int"),
    gpu_facts=dict(type="raw"),
    gpu_facts_file=dict(type="path"),
    hosts=dict(type="int"),
    hardware=dict(type="raw"),
    accelerator=dict(type="str", choices=["gpu", "cpu"], default="gpu"),
    kv_cache_memory_bytes=dict(type="int"),
    objective=dict(type="str", choices=["throughput", "latency"], default="throughput"),
    max_model_len=dict(type="int"),
    max_num_seqs=dict(type="int"),
    max_num_batched_tokens=dict(type="int", no_log=False),
    gpu_memory_utilization=dict(type="float", default=0.9),
    tensor_parallel_size=dict(type="int"),
    replicas=dict(type="int"),
    enable_expert_parallel=dict(type="bool"),
    kv_cache_dtype=dict(type="str", choices=["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "float16"],
                        default="auto"),
    features=dict(type="dict"),
    vllm_version=dict(type="str"),
    profiles_path=dict(type="list", elements="path", default=[]),
    hardware_label=dict(type="str"),
    fail_if_not_fits=dict(type="bool", default=False),
    engine_args=dict(type="dict", default={}),
    engine_args_var=dict(type="str", default="engine_args"),
    engine_env=dict(type="dict", default={}, no_log=True),
)
MUTUALLY_EXCLUSIVE = [("gpu_facts", "gpu_facts_file", "hardware")]

from ansible.module_utils.basic import AnsibleModule  # noqa: E402


def main():
    # The planning runs on the controller in the action plugin of the same name (it reads the collection's
    # profile files).  Reaching this code means the action plugin was bypassed.
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, mutually_exclusive=MUTUALLY_EXCLUSIVE,
                           supports_check_mode=True)
    module.fail_json(msg="llmfleet.vllm.vllm_plan runs on the controller through its action plugin; call it as "
                         "llmfleet.vllm.vllm_plan (not through ansible.builtin.raw or a module path)")


if __name__ == "__main__":
    main()
