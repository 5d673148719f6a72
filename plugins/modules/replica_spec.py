#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
---
module: replica_spec
short_description: Work out what each vLLM replica of a serving host runs (one place, changes nothing)
version_added: "1.1.0"
description:
  - For each replica of the host returns its argv (the C(docker run) options and the command, as words), its
    environment (non-secret), its files, ports, base URL, health URL, container labels, container and unit names,
    its GPUs, its model and its start order. The vllm_server role renders its unit, settings, environment and run
    files from this and nothing else.
  - Names of units, containers and labels come from the collection's conventions
    (C(plugins/module_utils/conventions.py)); the logic is C(plugins/plugin_utils/fleet/replica_spec.py).
  - Runs on the Ansible controller (action plugin); touches no host. Secrets (the API key, the hub token) are never
    an input; they go to the 0600 environment file of the replica only.
  - I(models) is a list so that a host can carry several models; each model brings its replicas, flags and
    environment. Replicas start in the order of I(models), then of each model's replicas.
author:
  - llmfleet maintainers (!UNKNOWN)
options:
  models:
    description: The models this host serves, each with its replicas.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The served model name (what clients send as C(model)).
        type: str
        required: true
      path:
        description: The model directory on the host (mounted read-only at C(/models/<its name>)).
        type: str
        required: true
      manifest:
        description: The digest of what the model directory holds, when known (else the host fills the label).
        type: str
      replicas:
        description: The replicas, C([{name, port, gpus}]) (vllm_server_replicas).
        type: list
        elements: dict
        required: true
      args:
        description: vLLM flags as a dict (the plan's, vllm_server_args).
        type: dict
        default: {}
      args_extra:
        description: vLLM flags merged on top (vllm_server_args_extra; a null value drops a flag).
        type: dict
        default: {}
      shutdown_timeout:
        description: vLLM's C(--shutdown-timeout) in seconds; null for none (no graceful shutdown).
        type: int
      env:
        description: The user's environment (vllm_server_env), over everything else.
        type: dict
        default: {}
      accelerator_env:
        description: Environment by accelerator profile (vllm_server_accelerator_env).
        type: dict
        default: {}
      engine_cache_accelerator_env:
        description: Engine cache environment by accelerator profile (vllm_server_engine_cache_accelerator_env).
        type: dict
        default: {}
      runner:
        description: vLLM's runner, C(generate) or C(pooling) (embedding, classification and score models).
        type: str
        choices: [generate, pooling]
        default: generate
        version_added: 1.1.0
  serve_list:
    description:
      - The models of C(llmfleet_models) (issue 39). When C(entries) is given, they replace I(models), whose first
        entry then gives only the role-wide C(args_extra), C(env), C(accelerator_env),
        C(engine_cache_accelerator_env) and C(shutdown_timeout) (an entry's C(args_extra) and C(env) merged over
        them).
      - "Keys: C(entries) (the llmfleet.vllm.model_list filter's models), C(model_paths) ({name: host directory},
        model_weights_paths), C(placement) (llmfleet_placement: each GPU instance's GPUs, flags and start_after),
        C(cpu_args) (the CPU engine's plan flags: C(kv-cache-memory-bytes), C(max-model-len)), C(recorded_ports)
        (the host's port record, {instance: port}), C(first_port) (where new instances' ports start) and C(edge_port)
        (with the edge, its one client port that routes by model: every replica's base URL)."
      - "C(adapter_paths) ({model: {adapter: host directory}}, model_weights_adapter_paths) and C(adapter_configs)
        ({path: text}, each adapter's adapter_config.json as read on the host) serve an entry's C(adapters) with
        C(--enable-lora) and C(--lora-modules), mounted read-only under C(/adapters/<name>); C(flag_cache_dir) (the
        controller's flag cache, vllm_server_flag_cache_controller_dir) gives the pinned image's flag table, so the
        runner and LoRA flags are spelled as the image spells them (vLLM 0.10.0's spelling while it is not kept yet)."
    type: dict
    default: {}
    version_added: 1.1.0
  accelerator:
    description: The accelerator profile (C(gpu) or C(cpu)).
    type: str
    required: true
  image:
    description: The image reference the replicas run.
    type: str
    required: true
  image_inspects:
    description: What C(docker image inspect) said of I(image) on the host (none when it is not there).
    type: list
    elements: dict
    default: []
  bind_address:
    description: The address vLLM listens on (vllm_server_bind_address).
    type: str
    required: true
  edge:
    description: Whether the edge fronts the replicas (vllm_server_edge).
    type: bool
    default: true
  edge_bind_address:
    description: The edge's address (vllm_server_edge_bind_address).
    type: str
    default: 0.0.0.0
  edge_port_offset:
    description: With the edge, vLLM listens on the replica's port plus this (vllm_server_edge_port_offset).
    type: int
    default: 10000
  edge_tls:
    description: Whether the edge speaks TLS (llmfleet_tls); the clients' base URLs are then C(https://).
    type: bool
    default: false
    version_added: 1.1.0
  config_dir:
    description: Where the replicas' settings, run and environment files live (vllm_server_config_dir).
    type: str
    required: true
  libexec_dir:
    description: Where the host tools live (vllm_server_libexec_dir).
    type: str
    required: true
  docker_bin:
    description: The docker client on the host.
    type: str
    default: /usr/bin/docker
  cpu_amx_permission:
    description: On the cpu profile, mount the sitecustomize that asks Linux for AMX (vllm_server_cpu_amx_permission).
    type: bool
    default: true
  engine_cache:
    description: The persistent engine cache, C({enabled, dir, container_path, env}) (vllm_server_engine_cache_*).
    type: dict
    default: {}
  container_hardening:
    description: C(docker run) options by accelerator profile (vllm_server_container_hardening).
    type: dict
    default: {}
  docker_run_args:
    description: Extra C(docker run) options (vllm_server_docker_run_args).
    type: list
    elements: str
    default: []
  watchdog_textfile_dir:
    description: The node exporter's textfile directory the watchdog writes to (empty where the host runs no watchdog).
    type: str
    default: ""
  multinode:
    description: The host's rank of a model served over several hosts, C({layout, backend, master_port, ray_port,
      interface, plan}); C(layout) from the C(llmfleet.vllm.multinode_layout) filter.
    type: dict
    default: {}
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
attributes:
  check_mode:
    support: full
    details: It only computes.
  diff_mode:
    support: none
  platform:
    platforms: all
  action:
    support: full
    details: Runs on the controller; the module part only documents the options.
  async:
    support: none
  bypass_host_loop:
    support: none
"""

EXAMPLES = r"""
- name: Work out what each replica runs
  llmfleet.vllm.replica_spec:
    models:
      - name: tiny
        path: /srv/llmfleet/models/tiny-qwen3-moe
        replicas: [{name: "0", port: 8000, gpus: []}]
        args: {max-model-len: 512}
    accelerator: cpu
    image: registry.example/vllm-cpu:0.32.0@sha256:0123abcd
    bind_address: 127.0.0.1
    config_dir: /etc/llmfleet
    libexec_dir: /usr/local/libexec/llmfleet
  register: spec

- name: Show each replica's container and the URL clients use
  ansible.builtin.debug:
    msg: "{{ spec.replicas | map(attribute='container') | zip(spec.base_urls) | list }}"
"""

RETURN = r"""
replicas:
  description: One entry per replica, in start order.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: The replica's name., type: str}
    model: {description: The served model name it runs., type: str}
    unit: {description: Its systemd unit (C(llmfleet-vllm@<name>.service))., type: str}
    container: {description: Its container (C(llmfleet-vllm-<name>))., type: str}
    gpus: {description: Its GPU indexes (empty on the cpu profile)., type: list, elements: int}
    start_order: {description: Its place in the start order (0 first)., type: int}
    serves_api:
      description: Whether it serves the API (false on a headless rank of a multi-host group).
      type: bool
    ports:
      description: C(client) (what clients and the edge use), C(vllm) (where vLLM listens on the host), C(container).
      type: dict
    base_url: {description: The OpenAI base URL clients use (the edge's or vLLM's)., type: str}
    vllm_url: {description: "vLLM's own address on this host (C(http://<address>:<port>)), past the edge.", type: str}
    health_url: {description: vLLM's own /health on this host., type: str}
    labels:
      description: The container's labels, name to value; the manifest's value is null when the host fills it.
      type: dict
    env: {description: The non-secret environment of vLLM., type: dict}
    files: {description: "Paths of its C(unit.conf), C(run) and C(env) files.", type: dict}
    run:
      description: The run file's words - C(docker) (the docker run command up to the name), C(options) (one list
        of words per line), C(command) (what the container execs, one list per line), C(follow) (the follower).
      type: dict
models:
  description: The models, each with C(name), C(path), C(container_path), C(vllm_argv), C(check_argv) (vLLM's
    arguments as a replica of one host gets them, for the flag check), C(env) and C(replicas).
  returned: always
  type: list
  elements: dict
image:
  description: The image, C({ref, found, id, hex, entrypoint}); C(found) is false unless exactly one local image
    matched; C(hex) is the ID without its C(sha256:) prefix.
  returned: always
  type: dict
vllm_argv:
  description: vLLM's flags after the model (the first model's), as the flag check sees them.
  returned: always
  type: list
  elements: str
env:
  description: The first model's non-secret environment.
  returned: always
  type: dict
base_urls:
  description: The OpenAI base URLs of the replicas that serve the API (the first model's, with I(serve_list); each
    model's are in RV(models_described)).
  returned: always
  type: list
  elements: str
edge_members:
  description: The edge's replicas, C([{name, port, address, backend_port, model}]).
  returned: always
  type: list
  elements: dict
watchdog_targets:
  description: What the hang watchdog probes, C([{name, url, unit, container, env_file}]).
  returned: always
  type: list
  elements: dict
directories:
  description: The directories the host needs, parents first, C([{path}]) (for llmfleet.vllm.config_files).
  returned: always
  type: list
  elements: dict
engine_cache:
  description: C({enabled, dir, id, host_dir, container_path, env}) of this image's engine cache.
  returned: always
  type: dict
multinode:
  description: The rank's layout (C(nnodes), C(node_rank), C(is_leader), ...) with C(master_port) and C(ray_port).
  returned: always
  type: dict
ray:
  description: The Ray alternative's C(head) (shell words the leader runs first) and C(worker) (a worker's argv).
  returned: always
  type: dict
unit_template:
  description: The names inside the replica unit template (C(%i) for the replica), C({unit, container, settings,
    run, env}).
  returned: always
  type: dict
replica_inputs:
  description: Each replica's C(name), C(port) and C(gpus), over all models (the shape of vllm_server_replicas).
  returned: always
  type: list
  elements: dict
  version_added: 1.1.0
ports:
  description: "The port record to keep, C({instance: port}) (empty for the one-model shorthand)."
  returned: always
  type: dict
  version_added: 1.1.0
sequential:
  description: The replicas that start one after another (co-tenants of a GPU), in start order.
  returned: always
  type: list
  elements: str
  version_added: 1.1.0
models_described:
  description: "Per model C(name), C(runner), C(model_path), C(replicas) ({name, port, gpus}), C(base_urls), C(adapters)
    (serving.json's C(models))."
  returned: always
  type: list
  elements: dict
  version_added: 1.1.0
model_dirs:
  description: "With I(serve_list), each replica's model directory, C({name: directory}) (empty without)."
  returned: always
  type: dict
  version_added: 1.1.0
many:
  description: Whether the replicas come from C(llmfleet_models) (I(serve_list)).
  returned: always
  type: bool
  version_added: 1.1.0
port_offset: {description: What vLLM's port adds to the replica's (0 without the edge)., returned: always, type: int}
health_base: {description: "C(http://<address>:) where this host reaches vLLM.", returned: always, type: str}
client_base: {description: "C(http(s)://<address>:) where clients reach the replicas (https through an edge with TLS).", returned: always, type: str}
amx_python: {description: Whether the AMX sitecustomize is mounted., returned: always, type: bool}
"""

_MODEL = dict(
    name=dict(type="str", required=True),
    path=dict(type="str", required=True),
    manifest=dict(type="str"),
    replicas=dict(type="list", elements="dict", required=True),
    args=dict(type="dict", default={}),
    args_extra=dict(type="dict", default={}),
    shutdown_timeout=dict(type="int"),
    env=dict(type="dict", default={}),
    accelerator_env=dict(type="dict", default={}),
    engine_cache_accelerator_env=dict(type="dict", default={}),
    runner=dict(type="str", default="generate", choices=["generate", "pooling"]),
)
ARGUMENT_SPEC = dict(
    models=dict(type="list", elements="dict", required=True, options=_MODEL),
    accelerator=dict(type="str", required=True),
    image=dict(type="str", required=True),
    image_inspects=dict(type="list", elements="dict", default=[]),
    bind_address=dict(type="str", required=True),
    edge=dict(type="bool", default=True),
    edge_bind_address=dict(type="str", default="0.0.0.0"),
    edge_port_offset=dict(type="int", default=10000),
    edge_tls=dict(type="bool", default=False),
    config_dir=dict(type="str", required=True),
    libexec_dir=dict(type="str", required=True),
    docker_bin=dict(type="str", default="/usr/bin/docker"),
    cpu_amx_permission=dict(type="bool", default=True),
    engine_cache=dict(type="dict", default={}),
    container_hardening=dict(type="dict", default={}),
    docker_run_args=dict(type="list", elements="str", default=[]),
    watchdog_textfile_dir=dict(type="str", default=""),
    multinode=dict(type="dict", default={}),
    serve_list=dict(type="dict", default={}),
)

from ansible.module_utils.basic import AnsibleModule  # noqa: E402


def main():
    # The spec is worked out on the controller by the action plugin of the same name.
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(msg="llmfleet.vllm.replica_spec runs on the controller through its action plugin")


if __name__ == "__main__":
    main()
