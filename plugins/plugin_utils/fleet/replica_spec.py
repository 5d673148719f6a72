# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What each replica of a serving host runs, worked out once on the controller (pure functions, no I/O).

  host_spec(host, models)   -> {image, env, vllm_argv, ..., replicas: [replica spec, in start order]}

The vllm_server role renders its files from this and nothing else: the run command as argv words (the template only
quotes them), the environment as a dict, the names of units, containers and labels from conventions. ``models`` is a
list so that a host may carry several models (issue #39); each model brings its own replicas, flags and environment,
and every name, port and file of a replica is derived from the replica's own name.
"""

from __future__ import annotations

import posixpath

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks import vllm_args as VA
from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent import conventions as CV
from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent import multinode as MN
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import replica_lists as SL
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import serve_list as SV
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.fleet import address_port

# The name the container's /bin/sh gives its $0 (it shows in `ps` inside the container).
SHELL_NAME = "llmfleet-vllm"
# Where the replica's secret environment file is mounted and sourced inside the container.
CONTAINER_ENV_FILE = "/run/llmfleet/vllm.env"
# The CPU profile's sitecustomize (asks Linux for AMX), mounted first on PYTHONPATH.
CONTAINER_PYTHON_DIR = "/opt/llmfleet/python"
# The entrypoint when the image names none.
DEFAULT_ENTRYPOINT = ("vllm", "serve")
# Where the model directory is mounted: /models/<the host directory's name>.
CONTAINER_MODELS_DIR = "/models"


class SpecError(ValueError):
    """An input the spec cannot be built from (the message names the variable and the fix)."""


def image_facts(ref, inspects):
    """The image the replicas run: {ref, found (exactly one local image), id, hex (the ID without its sha256:
    prefix), entrypoint}. inspects: what docker_image_info (or the image role's inspect) returned for ref."""
    inspects = [i for i in (inspects or []) if isinstance(i, dict)]
    first = inspects[0] if inspects else {}
    entrypoint = list(((first.get("Config") or {}).get("Entrypoint")) or DEFAULT_ENTRYPOINT)
    image_id = str(first.get("Id") or "")
    return {"ref": str(ref or ""), "found": len(inspects) == 1, "id": image_id,
            "hex": image_id[len("sha256:"):] if image_id.startswith("sha256:") else image_id, "entrypoint": entrypoint}


def engine_cache(settings, image_id):
    """The persistent engine cache of this image: {enabled, dir, id (12 hex of the image ID), host_dir,
    container_path, env (the cache variables pointed into the mount)}; disabled: enabled false, the rest empty."""
    settings = dict(settings or {})
    if not settings.get("enabled"):
        return {"enabled": False, "dir": str(settings.get("dir") or ""), "id": "", "host_dir": "",
                "container_path": "", "env": {}}
    cache_id = str(image_id or "")
    if cache_id.startswith("sha256:"):
        cache_id = cache_id[len("sha256:"):]
    cache_id = cache_id[:12]
    container_path = str(settings["container_path"])
    env = {k: "%s/%s" % (container_path, v) for k, v in dict(settings.get("env") or {}).items()}
    return {"enabled": True, "dir": str(settings["dir"]), "id": cache_id,
            "host_dir": "%s/%s" % (settings["dir"], cache_id), "container_path": container_path, "env": env}


def replica_env(accelerator, accelerator_env, cache, cache_accelerator_env, multinode_env, user_env):
    """The non-secret environment of a replica, later layers winning: the engine cache's variables and its
    accelerator settings, the accelerator profile's, HF_HUB_OFFLINE=1 (weights are local), the multinode rank's,
    and the user's (vllm_server_env). Secrets never pass here: they go to the 0600 env file."""
    env = {}
    if cache["enabled"]:
        env.update(cache["env"])
        env.update(dict(cache_accelerator_env or {}).get(accelerator) or {})
    env.update(dict(accelerator_env or {}).get(accelerator) or {})
    env["HF_HUB_OFFLINE"] = "1"
    env.update(multinode_env or {})
    env.update(user_env or {})
    return env


def vllm_flags(args, args_extra, shutdown_timeout, multinode_args):
    """vLLM's flags after the model path, as argv: the plan's, the graceful shutdown's --shutdown-timeout
    (None: off), the user's (vllm_server_args_extra; None drops a flag) and the multinode rank's."""
    graceful = {"shutdown-timeout": int(shutdown_timeout)} if shutdown_timeout is not None else {}
    try:
        return VA.render_vllm_args(VA.merge_vllm_args(args, graceful, args_extra, multinode_args))
    except VA.VllmArgsError as exc:
        raise SpecError("vllm_server_args / vllm_server_args_extra: %s" % exc)


def container_script(cache_enabled, amx_python, ray_head):
    """The text /bin/sh -c runs in the container before vLLM: read the secret env file, with the engine cache copy
    what the image ships in its own VLLM_CACHE_ROOT into the mount (missing files only), put the AMX sitecustomize
    first on PYTHONPATH, start the Ray head, then exec the command ("$@")."""
    amx = '; export PYTHONPATH="%s${PYTHONPATH:+:$PYTHONPATH}"' % CONTAINER_PYTHON_DIR if amx_python else ""
    ray = "; %s || exit 1" % ray_head if ray_head else ""
    source = "set -a; . %s; set +a%s%s" % (CONTAINER_ENV_FILE, amx, ray)
    if not cache_enabled:
        return '%s; exec "$@"' % source
    return ('image_cache="${VLLM_CACHE_ROOT:-}"; %s\n'
            '      if [ -d "$image_cache" ] && [ "$image_cache" != "$VLLM_CACHE_ROOT" ]; then\n'
            '        mkdir -p "$VLLM_CACHE_ROOT" && cp -Rn "$image_cache"/. "$VLLM_CACHE_ROOT"/ 2>/dev/null || true; fi\n'
            '      exec "$@"' % source)


def _labels(replica_name, model, image_id):
    """The container's labels, in the order docker run gets them (replica_state reads the manifest and image
    labels back). A manifest of None is the host's to fill: only the host reads what its model directory holds."""
    return {CV.REPLICA_LABEL: str(replica_name), CV.SERVED_MODEL_LABEL: model["name"],
            CV.MANIFEST_LABEL: model.get("manifest") or None, CV.IMAGE_LABEL: image_id or "none"}


def _run_options(host, model, replica, ports):
    """docker run's options after the labels, one list of words per line of the run file."""
    lines = [[arg] for arg in host["container_hardening"]]
    if replica["gpus"]:
        lines.append(["--gpus", '"device=%s"' % ",".join(str(g) for g in replica["gpus"])])
    if host["multinode"]["nnodes"] > 1:
        lines.append(["--network", "host"])
    else:
        lines.append(["--publish", "%s:%d" % (address_port(host["bind_address"], ports["vllm"]), ports["container"])])
    lines.append(["--volume", "%s:%s:ro" % (model["path"], model["container_path"])])
    # LoRA adapters (serve_list.entry_adapters), read-only like the weights.
    lines.extend(["--volume", "%s:%s:ro" % (host_path, path)] for host_path, path in model["volumes"])
    lines.append(["--volume", "%s:%s:ro" % (SL.replica_file(host["config_dir"], replica["name"], ".env"),
                                            CONTAINER_ENV_FILE)])
    cache = host["engine_cache"]
    if cache["enabled"]:
        lines.append(["--volume", "%s:%s:rw" % (cache["host_dir"], cache["container_path"])])
    if host["amx_python"]:
        lines.append(["--volume", "%s/python:%s:ro" % (host["libexec_dir"], CONTAINER_PYTHON_DIR)])
    lines.extend([arg] for arg in host["docker_run_args"])
    lines.append(["--entrypoint", "/bin/sh"])
    lines.append([host["image"]["ref"]])
    lines.append(["-c", container_script(cache["enabled"], host["amx_python"], host["ray"]["head"]), SHELL_NAME])
    return lines


def _command(host, model, ports, argv):
    """What the container's shell execs, one list of words per line: vLLM with the model, its served name, the
    address and port it listens on and its flags; a Ray worker's command on a worker host of a Ray group."""
    if host["ray"]["worker"]:
        return [list(host["ray"]["worker"])]
    if host["multinode"]["nnodes"] > 1:
        listen = [["--host", host["bind_address"]], ["--port", str(ports["vllm"])]]
    else:
        listen = [["--host", "0.0.0.0"], ["--port", str(ports["container"])]]
    return ([list(host["image"]["entrypoint"]), [model["container_path"]], ["--served-model-name", model["name"]]]
            + listen + VA.argv_groups(argv))


def _replica(host, model, replica, order):
    name = str(replica["name"])
    port = int(replica["port"])
    ports = {"client": port, "vllm": port + host["port_offset"], "container": port}
    # A placed instance may carry its own flags (its share of a GPU): else the model's.
    argv = model["vllm_argv"] if replica.get("args") is None else _argv(model, replica["args"], model["mn_args"])
    spec = {
        "name": name, "model": model["name"], "unit": CV.replica_unit(name), "container": CV.replica_container(name),
        "gpus": [int(g) for g in replica.get("gpus") or []], "start_order": order,
        "start_after": [str(a) for a in replica.get("start_after") or []], "runner": model["runner"],
        "model_path": model["path"], "vllm_argv": argv,
        "serves_api": bool(host["multinode"]["is_leader"]), "ports": ports,
        # Many models behind the edge: its one client port, which routes by model; else the replica's own port.
        "base_url": "%s%d/v1" % (host["client_base"], host["edge_port"] or port),
        "vllm_url": "%s%d" % (host["health_base"], ports["vllm"]),
        "health_url": "%s%d/health" % (host["health_base"], ports["vllm"]),
        "labels": _labels(name, model, host["image"]["id"]), "env": model["env"],
        "files": {suffix: SL.replica_file(host["config_dir"], name, "." + suffix) for suffix in ("unit.conf", "run", "env")},
    }
    # Where the completion gate asks: the edge's port of the replica (one model), else vLLM itself (many models:
    # the edge routes by model on one port, so a replica is reached on its own).
    spec["gate_url"] = spec["vllm_url"] + "/v1" if host["many"] else spec["base_url"]
    spec["run"] = {"docker": [host["docker_bin"], "run", "--detach", "--name", spec["container"]],
                   "options": _run_options(host, model, replica, ports), "command": _command(host, model, ports, argv),
                   "follow": [host["libexec_dir"] + "/follow-container", spec["container"]]}
    return spec


def _argv(entry, args, multinode_args):
    """One model's (or placed instance's) vLLM flags (a list entry's runner and LoRA flags are in its args:
    serve_list.served_flags)."""
    return vllm_flags(dict(args or {}), entry.get("args_extra"), entry.get("shutdown_timeout"), multinode_args)


def _model(host, entry, multinode_args, multinode_env):
    path = str(entry.get("path") or "")
    name = str(entry.get("name") or "")
    if not name:
        raise SpecError("a model without a served name (vllm_server_served_model_name): %r" % (entry,))
    container_path = "%s/%s" % (CONTAINER_MODELS_DIR, posixpath.basename(path))
    argv = _argv(entry, entry.get("args"), multinode_args)
    replicas = list(entry.get("replicas") or [])
    port = str(replicas[0]["port"]) if replicas else ""
    return {
        "name": name, "path": path, "manifest": entry.get("manifest") or None, "container_path": container_path,
        "vllm_argv": argv, "runner": entry.get("runner") or "generate", "convert": entry.get("convert"),
        "adapters": list(entry.get("adapters") or []), "volumes": list(entry.get("volumes") or []),
        "mn_args": multinode_args,
        "args_extra": entry.get("args_extra"), "shutdown_timeout": entry.get("shutdown_timeout"),
        # vLLM's arguments as a replica of one host gets them: what the flag check runs against the image.
        "check_argv": [container_path, "--served-model-name", name, "--host", "0.0.0.0", "--port", port] + argv,
        "env": replica_env(host["accelerator"], entry.get("accelerator_env"), host["engine_cache"],
                           entry.get("engine_cache_accelerator_env"), multinode_env, entry.get("env")),
        "replicas": replicas,
    }


def _multinode(settings, accelerator):
    """The rank's layout plus its vLLM flags, environment and Ray commands (all empty on a host alone)."""
    settings = dict(settings or {})
    layout = dict(settings.get("layout") or MN.single_layout(settings.get("hostname", "")))
    backend = settings.get("backend") or "mp"
    try:
        tp, pp = MN.plan_sizes(layout, settings.get("plan") or {})
        args = MN.rank_args(layout, settings.get("master_port", 29500), accelerator, tp, pp, backend)
        ray = MN.ray_commands(layout, backend, settings.get("ray_port", 6379))
    except MN.MultinodeError as exc:
        raise SpecError(str(exc))
    env = MN.rank_env(layout, settings.get("interface") or "", accelerator)
    layout["nnodes"] = int(layout.get("nnodes", 1))
    layout.update(master_port=settings.get("master_port", 29500), ray_port=settings.get("ray_port", 6379))
    return layout, args, env, ray


def started_replicas(restarted, waited, jobs):
    """The replicas this run started or restarted, from the serve tasks' registered loops: the foreground loop's
    changed items (restarted), the background starts that finished changed (waited: async_status over the jobs),
    and the starts that ran in the foreground because check mode runs no job (jobs without an ansible_job_id)."""
    def results(register):
        return [r for r in (register or {}).get("results") or [] if isinstance(r, dict)]
    started = [r["item"] for r in results(restarted) if r.get("changed")]
    started += [r["item"]["item"] for r in results(waited) if r.get("changed")]
    started += [r["item"] for r in results(jobs) if "ansible_job_id" not in r and r.get("changed")]
    return started


def _directories(spec, textfile_dir):
    """The directories the host needs, parents first, as [{path}] for the config_files module: the engine cache's
    (its root, this image's), the settings', the host tools' (and the host package's, the AMX sitecustomize's), and
    the watchdog's metrics directory when there is one."""
    cache = spec["engine_cache"]
    paths = [posixpath.dirname(cache["dir"]), cache["dir"], cache["host_dir"]] if cache["enabled"] else []
    paths += [spec["config_dir"], spec["libexec_dir"], spec["libexec_dir"] + "/llmfleet_host"]
    if spec["amx_python"]:
        paths.append(spec["libexec_dir"] + "/python")
    if textfile_dir:
        paths.append(textfile_dir)
    return [{"path": p} for p in paths]


def _list_models(host, models):
    """The models of llmfleet_models (host["serve_list"]: {entries, ...}, see serve_list.list_models), the role's
    one model (models[0]) giving the role-wide settings; None, [] without a list (the one-model shorthand)."""
    serve = host.get("serve_list") or {}
    if not serve.get("entries"):
        return models, None
    base = {k: v for k, v in dict(models[0] if models else {}).items()
            if k in ("args_extra", "env", "accelerator_env", "engine_cache_accelerator_env", "shutdown_timeout")}
    try:
        return SV.list_models(serve["entries"], base, serve, host["accelerator"])
    except SV.ServeListError as exc:
        raise SpecError(str(exc))


def _models_described(out):
    """serving.json's models: per model its runner, model path, replicas ({name, port, gpus}) and base URLs."""
    described = []
    for model in out["models"]:
        mine = [r for r in out["replicas"] if r["model"] == model["name"]]
        described.append({"name": model["name"], "runner": model["runner"], "model_path": model["path"],
                          "replicas": [{"name": r["name"], "port": r["ports"]["client"], "gpus": r["gpus"]}
                                       for r in mine],
                          "base_urls": _unique(r["base_url"] for r in mine if r["serves_api"]),
                          "adapters": list(model["adapters"])})
    return described


def _unique(items):
    out = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def _sequential(replicas):
    """The replicas that start one after another (co-tenants of a GPU: each waits for the one before it, placement's
    start_after), in start order."""
    waited_for = set(a for r in replicas for a in r["start_after"])
    return [r["name"] for r in replicas if r["start_after"] or r["name"] in waited_for]


def host_spec(host, models):
    """Everything the serving host runs, from the role's inputs (see plugins/modules/replica_spec.py for each
    key). Replicas come in start order: the models' order, then each model's replicas' order."""
    host = dict(host)
    accelerator = host["accelerator"]
    image = image_facts(host.get("image"), host.get("image_inspects"))
    layout, mn_args, mn_env, ray = _multinode(host.get("multinode"), accelerator)
    edge = bool(host.get("edge"))
    bind = str(host["bind_address"])
    out = {
        "accelerator": accelerator, "image": image, "multinode": layout, "ray": ray,
        "bind_address": bind, "edge": edge, "port_offset": int(host.get("edge_port_offset") or 0) if edge else 0,
        "config_dir": str(host["config_dir"]), "libexec_dir": str(host["libexec_dir"]),
        "docker_bin": str(host.get("docker_bin") or "/usr/bin/docker"),
        "health_base": "http://%s:" % CV.reach_address(bind),
        "client_base": "%s://%s:" % ("https" if edge and host.get("edge_tls") else "http",
                                     CV.reach_address(str(host["edge_bind_address"]) if edge else bind)),
        "amx_python": accelerator == "cpu" and bool(host.get("cpu_amx_permission")),
        "engine_cache": engine_cache(host.get("engine_cache"), image["id"]),
        "container_hardening": [str(a) for a in dict(host.get("container_hardening") or {}).get(accelerator) or []],
        "docker_run_args": [str(a) for a in host.get("docker_run_args") or []],
        "unit_template": {"unit": CV.replica_unit("%i"), "container": CV.replica_container("%i"),
                          "settings": SL.replica_file(host["config_dir"], "%i", ".unit.conf"),
                          "run": SL.replica_file(host["config_dir"], "%i", ".run"),
                          "env": SL.replica_file(host["config_dir"], "%i", ".env")},
    }
    models, ports = _list_models(host, models)
    out["many"] = ports is not None
    edge_port = (host.get("serve_list") or {}).get("edge_port")
    out["edge_port"] = int(edge_port) if out["many"] and edge and edge_port else 0
    if not models:
        raise SpecError("no model to serve on this host")
    out["models"] = [_model(out, entry, mn_args, mn_env) for entry in models]
    replicas = [_replica(out, model, replica, 0) for model in out["models"] for replica in model["replicas"]]
    # Many models on GPUs start in the placement's order (a co-tenant after the one it waits for).
    placed = list(((host.get("serve_list") or {}).get("placement") or {}).get("start_order") or [])
    if out["many"] and placed:
        replicas.sort(key=lambda r: placed.index(r["name"]) if r["name"] in placed else len(placed))
    for order, replica in enumerate(replicas):
        replica["start_order"] = order
    out["replicas"] = replicas
    _host_lists(out, host, ports)
    return out


def _host_lists(out, host, ports):
    """The lists other tasks take from the replicas: base URLs, the edge's members, the watchdog's targets, the
    directories, the port record, serving.json's models."""
    bind, replicas = out["bind_address"], out["replicas"]
    api = [r for r in replicas if r["serves_api"]]
    # The edge's and the watchdog's view of the replicas (a headless rank has neither).
    plain = [{"name": r["name"], "port": r["ports"]["client"]} for r in api]
    out["edge_members"] = [dict(m, model=r["model"]) for m, r in zip(SL.edge_members(plain, bind, out["port_offset"]), api)]
    if out["many"]:
        # The edge routes an adapter's name to its base model's replicas (and lists it in /v1/models).
        adapters = {m["name"]: list(m["adapters"]) for m in out["models"]}
        out["edge_members"] = [dict(m, adapters=adapters[m["model"]]) for m in out["edge_members"]]
    out["watchdog_targets"] = SL.watchdog_targets(plain, out["health_base"], out["port_offset"], out["config_dir"])
    if out["many"]:
        # Each replica is probed with its own model's name, by its kind, and never restarted while a co-tenant of
        # its GPUs (re)starts (the one-model watchdog.json stays as it was).
        out["watchdog_targets"] = [dict(t, model=r["model"], runner=r["runner"], gpus=r["gpus"])
                                   for t, r in zip(out["watchdog_targets"], api)]
    out["directories"] = _directories(out, str(host.get("watchdog_textfile_dir") or ""))
    # The flags and environment the image is checked against (the first model's).
    out["vllm_argv"] = out["models"][0]["vllm_argv"]
    out["env"] = out["models"][0]["env"]
    # Each replica's name, port and GPUs (vllm_server_replicas' shape), over all models.
    out["replica_inputs"] = [{"name": r["name"], "port": r["ports"]["client"], "gpus": r["gpus"]} for r in replicas]
    # The port record to keep ({instance: port}) and each replica's model directory (known-good copies and
    # rollback); none for the one-model shorthand, whose replicas all mount the one model directory.
    out["ports"] = ports or {}
    out["model_dirs"] = {r["name"]: r["model_path"] for r in replicas} if out["many"] else {}
    out["sequential"] = _sequential(replicas)
    out["models_described"] = _models_described(out)
    # The first model's (the one model's): what serving.json's top level and the one-model stages read.
    out["base_urls"] = out["models_described"][0]["base_urls"]
    for model in out["models"]:
        model.pop("mn_args", None)
