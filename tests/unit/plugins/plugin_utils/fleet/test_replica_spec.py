"""What each replica runs (plugin_utils/fleet/replica_spec.py): names, ports, URLs, environment, argv and order."""
import shlex

import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent import multinode as MN
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.replica_spec import (
    SpecError, container_script, host_spec, image_facts, started_replicas)

INSPECT = [{"Id": "sha256:0123456789abcdef0123", "Config": {"Entrypoint": ["/venv/bin/vllm", "serve"]}}]


def host(**over):
    base = {"accelerator": "gpu", "image": "img@sha256:1", "image_inspects": INSPECT, "bind_address": "127.0.0.1",
            "edge": True, "edge_bind_address": "0.0.0.0", "edge_port_offset": 10000, "config_dir": "/etc/llmfleet",
            "libexec_dir": "/usr/local/libexec/llmfleet", "docker_bin": "/usr/bin/docker", "cpu_amx_permission": True,
            "engine_cache": {"enabled": False, "dir": "/var/cache/llmfleet/engine"}, "container_hardening": {},
            "docker_run_args": [], "watchdog_textfile_dir": "", "multinode": {"layout": MN.single_layout("h1")}}
    base.update(over)
    return base


def model(**over):
    base = {"name": "chat", "path": "/srv/models/chat", "replicas": [{"name": "0", "port": 8000, "gpus": [0]}],
            "args": {"max-model-len": 4096}, "args_extra": {}, "shutdown_timeout": 60, "env": {},
            "accelerator_env": {"cpu": {"VLLM_TARGET_DEVICE": "cpu"}}, "engine_cache_accelerator_env": {}}
    base.update(over)
    return base


def words(lines):
    return [w for line in lines for w in line]


def test_names_come_from_the_replica_name():
    r = host_spec(host(), [model(replicas=[{"name": 3, "port": 8003, "gpus": []}])])["replicas"][0]
    assert (r["name"], r["unit"], r["container"]) == ("3", "llmfleet-vllm@3.service", "llmfleet-vllm-3")
    assert r["labels"]["llmfleet.vllm.replica"] == "3"
    assert r["files"] == {"unit.conf": "/etc/llmfleet/vllm-3.unit.conf", "run": "/etc/llmfleet/vllm-3.run",
                          "env": "/etc/llmfleet/vllm-3.env"}
    assert r["run"]["docker"][-2:] == ["--name", "llmfleet-vllm-3"]


def test_behind_the_edge_vllm_listens_offset_on_loopback_and_clients_use_the_edge():
    spec = host_spec(host(), [model()])
    r = spec["replicas"][0]
    assert r["ports"] == {"client": 8000, "vllm": 18000, "container": 8000}
    assert r["base_url"] == "http://127.0.0.1:8000/v1"  # the edge binds every address: reached on loopback
    assert r["health_url"] == "http://127.0.0.1:18000/health"
    assert ["--publish", "127.0.0.1:18000:8000"] in r["run"]["options"]
    assert spec["edge_members"] == [{"name": "0", "port": 8000, "address": "127.0.0.1", "backend_port": 18000, "model": "chat"}]
    assert spec["watchdog_targets"][0]["url"] == "http://127.0.0.1:18000"


def test_an_edge_that_speaks_tls_gives_clients_https_while_the_watchdog_stays_on_loopback_http():
    spec = host_spec(host(edge_tls=True), [model()])
    assert spec["base_urls"] == ["https://127.0.0.1:8000/v1"]
    assert spec["replicas"][0]["health_url"] == "http://127.0.0.1:18000/health"
    assert spec["watchdog_targets"][0]["url"] == "http://127.0.0.1:18000"
    # Without the edge there is no TLS listener: vLLM's own port, plain.
    assert host_spec(host(edge=False, edge_tls=True, bind_address="10.1.2.3"), [model()])["base_urls"] == [
        "http://10.1.2.3:8000/v1"]


def test_without_the_edge_clients_reach_vllm_on_its_own_port():
    spec = host_spec(host(edge=False, bind_address="10.1.2.3"), [model()])
    r = spec["replicas"][0]
    assert r["ports"]["vllm"] == 8000 and r["base_url"] == "http://10.1.2.3:8000/v1"
    assert ["--publish", "10.1.2.3:8000:8000"] in r["run"]["options"]
    assert spec["base_urls"] == ["http://10.1.2.3:8000/v1"]


def test_the_user_environment_wins_and_weights_are_read_offline():
    env = host_spec(host(accelerator="cpu"), [model(env={"VLLM_TARGET_DEVICE": "mine", "HF_HUB_OFFLINE": "0"})])["env"]
    assert env == {"VLLM_TARGET_DEVICE": "mine", "HF_HUB_OFFLINE": "0"}
    assert host_spec(host(accelerator="cpu"), [model()])["env"] == {"VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1"}


def test_the_engine_cache_mounts_one_directory_per_image_and_points_the_caches_into_it():
    cache = {"enabled": True, "dir": "/var/cache/llmfleet/engine", "container_path": "/cache",
             "env": {"VLLM_CACHE_ROOT": "vllm"}}
    spec = host_spec(host(engine_cache=cache), [model()])
    assert spec["engine_cache"]["id"] == "0123456789ab"
    assert spec["env"]["VLLM_CACHE_ROOT"] == "/cache/vllm"
    assert ["--volume", "/var/cache/llmfleet/engine/0123456789ab:/cache:rw"] in spec["replicas"][0]["run"]["options"]
    assert [d["path"] for d in spec["directories"]][:3] == [
        "/var/cache/llmfleet", "/var/cache/llmfleet/engine", "/var/cache/llmfleet/engine/0123456789ab"]


def test_the_graceful_shutdown_flag_and_dropped_flags():
    argv = host_spec(host(), [model(args_extra={"max-model-len": None, "enforce-eager": True})])["vllm_argv"]
    assert argv == ["--enforce-eager", "--shutdown-timeout", "60"]
    assert "--shutdown-timeout" not in host_spec(host(), [model(shutdown_timeout=None)])["vllm_argv"]


def test_the_command_is_the_image_entrypoint_then_the_model_then_the_flags():
    r = host_spec(host(), [model()])["replicas"][0]
    assert r["run"]["command"] == [["/venv/bin/vllm", "serve"], ["/models/chat"], ["--served-model-name", "chat"],
                                   ["--host", "0.0.0.0"], ["--port", "8000"], ["--max-model-len", "4096"],
                                   ["--shutdown-timeout", "60"]]
    assert image_facts("img", [{"Id": "x", "Config": {"Entrypoint": None}}])["entrypoint"] == ["vllm", "serve"]


def test_an_image_counts_as_found_only_when_exactly_one_matched():
    assert image_facts("img", INSPECT)["found"] is True
    assert image_facts("img", [])["found"] is False
    assert image_facts("img", INSPECT * 2)["found"] is False


def test_the_container_shell_runs_as_one_argv_word_that_sh_parses():
    script = container_script(True, True, "ray start --head --port 6379")
    assert "'" not in script  # quoted once, by the template, as one word
    assert shlex.split("sh -c %s x" % shlex.quote(script))[2] == script
    assert 'export PYTHONPATH="/opt/llmfleet/python${PYTHONPATH:+:$PYTHONPATH}"' in script
    assert "; ray start --head --port 6379 || exit 1" in script
    assert container_script(False, False, "") == 'set -a; . /run/llmfleet/vllm.env; set +a; exec "$@"'


def test_gpus_are_passed_as_docker_device_list():
    r = host_spec(host(), [model(replicas=[{"name": "0", "port": 8000, "gpus": [2, 3]}])])["replicas"][0]
    assert ["--gpus", '"device=2,3"'] in r["run"]["options"] and r["gpus"] == [2, 3]


def test_many_models_start_in_order_each_with_its_own_name_flags_and_environment():
    spec = host_spec(host(), [
        model(replicas=[{"name": "chat-0", "port": 8000, "gpus": [0]}, {"name": "chat-1", "port": 8001, "gpus": [1]}]),
        model(name="embed", path="/srv/models/e5", args={"max-model-len": 512}, env={"X": "1"},
              replicas=[{"name": "embed-0", "port": 8100, "gpus": [2]}])])
    assert [(r["name"], r["model"], r["start_order"]) for r in spec["replicas"]] == [
        ("chat-0", "chat", 0), ("chat-1", "chat", 1), ("embed-0", "embed", 2)]
    embed = spec["replicas"][2]
    assert ["--served-model-name", "embed"] in embed["run"]["command"] and ["/models/e5"] in embed["run"]["command"]
    assert embed["env"]["X"] == "1" and "X" not in spec["replicas"][0]["env"]
    assert embed["labels"]["llmfleet.vllm.served-model-name"] == "embed"


def test_a_headless_rank_serves_no_api():
    layout = MN.group_layout(["h1", "h2"], "h2", {"h1": "10.0.0.1", "h2": "10.0.0.2"}, "grp", None)
    spec = host_spec(host(multinode={"layout": layout}), [model()])
    r = spec["replicas"][0]
    assert r["serves_api"] is False and spec["base_urls"] == [] and spec["edge_members"] == []
    assert ["--network", "host"] in r["run"]["options"] and "--headless" in spec["vllm_argv"]
    assert ["--host", "127.0.0.1"] in r["run"]["command"] and ["--port", "18000"] in r["run"]["command"]


def test_a_ray_worker_runs_ray_instead_of_vllm():
    layout = MN.group_layout(["h1", "h2"], "h2", {"h1": "10.0.0.1", "h2": "10.0.0.2"}, "grp", None)
    spec = host_spec(host(multinode={"layout": layout, "backend": "ray"}), [model()])
    assert spec["replicas"][0]["run"]["command"][0][:2] == ["ray", "start"]


def test_no_secret_is_an_input_or_an_output():
    spec = host_spec(host(), [model()])
    assert "VLLM_API_KEY" not in spec["env"] and "HF_TOKEN" not in spec["env"]


@pytest.mark.parametrize("models, message", [
    ([], "no model"),
    ([model(name="")], "served name"),
    ([model(args_extra={"port": 9000})], "vllm_server_args_extra"),
])
def test_bad_input_is_refused_with_what_to_fix(models, message):
    with pytest.raises(SpecError, match=message):
        host_spec(host(), models)


def test_a_ray_port_that_is_not_a_port_is_refused():
    layout = MN.group_layout(["h1", "h2"], "h1", {"h1": "10.0.0.1", "h2": "10.0.0.2"}, "grp", None)
    with pytest.raises(SpecError, match="ray_port"):
        host_spec(host(multinode={"layout": layout, "backend": "ray", "ray_port": "x"}), [model()])


def test_the_replicas_started_now_are_the_changed_restarts_background_starts_and_check_mode_starts():
    a, b, c, d = ({"name": n} for n in "abcd")
    restarted = {"results": [{"item": a, "changed": True}, {"item": b, "changed": False}]}
    jobs = {"results": [{"item": c, "ansible_job_id": "j1", "changed": True}, {"item": d, "changed": True}]}
    waited = {"results": [{"item": {"item": c, "ansible_job_id": "j1"}, "changed": True}]}
    assert started_replicas(restarted, waited, jobs) == [a, c, d]
    assert started_replicas({}, None, {"results": [{"item": c, "ansible_job_id": "j1", "changed": True}]}) == []


def test_the_flag_check_sees_vllm_arguments_as_a_single_host_replica_gets_them():
    spec = host_spec(host(), [model(replicas=[{"name": "0", "port": 8100, "gpus": []}])])
    assert spec["models"][0]["check_argv"] == ["/models/chat", "--served-model-name", "chat", "--host", "0.0.0.0",
                                               "--port", "8100", "--max-model-len", "4096", "--shutdown-timeout", "60"]
    assert spec["image"]["hex"] == "0123456789abcdef0123"


def test_many_models_each_get_their_own_units_ports_flags_and_runner():
    serve = {"entries": [{"name": "qwen", "model": "q", "replicas": 1, "runner": "generate", "shorthand": False},
                         {"name": "emb", "model": "e", "replicas": 1, "runner": "pooling", "shorthand": False}],
             "model_paths": {"qwen": "/srv/m/qwen", "emb": "/srv/m/emb"}, "first_port": 8001,
             "cpu_args": {"kv-cache-memory-bytes": 64, "max-model-len": 512}, "recorded_ports": {"gone-0": 8003}}
    spec = host_spec(host(accelerator="cpu", serve_list=serve), [model(args_extra={"enforce-eager": True})])
    assert [(r["name"], r["container"], r["ports"]["client"], r["model"]) for r in spec["replicas"]] == [
        ("qwen-0", "llmfleet-vllm-qwen-0", 8001, "qwen"), ("emb-0", "llmfleet-vllm-emb-0", 8002, "emb")]
    emb = spec["replicas"][1]
    assert emb["vllm_argv"][emb["vllm_argv"].index("--runner") + 1] == "pooling"
    assert "--enforce-eager" in emb["vllm_argv"] and "/models/emb" in words(emb["run"]["command"])
    assert emb["gate_url"] == "http://127.0.0.1:18002/v1"  # vLLM itself: the edge routes by model on one port
    assert spec["ports"] == {"qwen-0": 8001, "emb-0": 8002}
    assert [m["name"] for m in spec["models_described"]] == ["qwen", "emb"]
    assert spec["models_described"][1]["replicas"] == [{"name": "emb-0", "port": 8002, "gpus": []}]
    assert [m["model"] for m in spec["edge_members"]] == ["qwen", "emb"]
    assert [(t["model"], t["runner"], t["gpus"]) for t in spec["watchdog_targets"]] == [
        ("qwen", "generate", []), ("emb", "pooling", [])]


def test_the_shorthand_keeps_its_replicas_and_records_no_port():
    spec = host_spec(host(serve_list={"recorded_ports": {"qwen-0": 8001}}), [model()])
    assert [r["name"] for r in spec["replicas"]] == ["0"] and spec["ports"] == {}
    assert "model" not in spec["watchdog_targets"][0]
    assert spec["replicas"][0]["gate_url"] == spec["replicas"][0]["base_url"] and not spec["many"]


def test_co_tenants_of_a_gpu_start_one_after_another():
    placement = {"instances": [
        {"model": "a", "instance": "a-0", "gpus": [0], "vllm_args": {"kv-cache-memory-bytes": 5}, "start_after": []},
        {"model": "b", "instance": "b-0", "gpus": [0], "vllm_args": {"kv-cache-memory-bytes": 7}, "start_after": ["a-0"]},
        {"model": "c", "instance": "c-0", "gpus": [1], "vllm_args": {}, "start_after": []}],
        "start_order": ["a-0", "b-0", "c-0"]}
    serve = {"entries": [{"name": n, "model": n, "runner": "generate"} for n in ("c", "b", "a")],
             "model_paths": {"a": "/a", "b": "/b", "c": "/c"}, "placement": placement, "first_port": 8001}
    spec = host_spec(host(serve_list=serve), [model()])
    assert spec["sequential"] == ["a-0", "b-0"]
    assert [r["name"] for r in spec["replicas"]] == ["a-0", "b-0", "c-0"]
    b = spec["replicas"][1]
    assert b["vllm_argv"][b["vllm_argv"].index("--kv-cache-memory-bytes") + 1] == "7" and b["gpus"] == [0]


def test_many_models_publish_the_first_models_urls_at_the_top_level():
    serve = {"entries": [{"name": "qwen", "model": "q", "replicas": 2}, {"name": "llama", "model": "l"}],
             "model_paths": {"qwen": "/q", "llama": "/l"}, "first_port": 8001, "edge_port": 8000, "cpu_args": {}}
    spec = host_spec(host(accelerator="cpu", serve_list=serve), [model()])
    # Behind the edge every model is reached on its one client port (it routes by model).
    assert spec["base_urls"] == ["http://127.0.0.1:8000/v1"]
    assert spec["models_described"][1]["base_urls"] == ["http://127.0.0.1:8000/v1"]
    assert [r["ports"]["vllm"] for r in spec["replicas"]] == [18001, 18002, 18003]
    # Without the edge each replica is its own endpoint.
    plain = host_spec(host(accelerator="cpu", edge=False, serve_list=serve), [model()])
    assert plain["models_described"][0]["base_urls"] == ["http://127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1"]


def test_a_models_adapters_are_mounted_read_only_flagged_and_described():
    serve = {"entries": [{"name": "qwen", "model": "q", "replicas": 1, "runner": "generate", "shorthand": False,
                          "adapters": [{"name": "sql", "model": "o/sql"}]}],
             "model_paths": {"qwen": "/srv/m/qwen"}, "first_port": 8001, "cpu_args": {},
             "adapter_paths": {"qwen": {"sql": "/srv/m/qwen.adapters/sql"}},
             "adapter_configs": {"/srv/m/qwen.adapters/sql/adapter_config.json": '{"r": 8}'}}
    spec = host_spec(host(accelerator="cpu", serve_list=serve), [model()])
    replica = spec["replicas"][0]
    assert ["--volume", "/srv/m/qwen.adapters/sql:/adapters/sql:ro"] in replica["run"]["options"]
    argv = replica["vllm_argv"]
    assert argv[argv.index("--lora-modules") + 1] == "sql=/adapters/sql" and "--enable-lora" in argv
    assert spec["models"][0]["check_argv"][-len(argv):] == argv
    assert spec["models_described"][0]["adapters"] == ["sql"]
    # The edge routes the adapter's name to its base model's replica.
    assert [(m["model"], m["adapters"]) for m in spec["edge_members"]] == [("qwen", ["sql"])]
    # The shorthand mounts nothing more.
    assert not [o for o in host_spec(host(), [model()])["replicas"][0]["run"]["options"] if "/adapters/" in str(o)]
