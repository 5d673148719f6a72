"""End-to-end checks on the served host: the unit, the container, the API, and recovery from faults.

Order matters: the untouched-container check runs before the fault tests restart it.
"""
import json
import time

API_KEY = "llmfleet-sentinel-api-key-4f1c"
UNIT = "llmfleet-vllm@0.service"
# The edge speaks TLS (llmfleet_tls, the default): every client here verifies it against the fleet's CA on the host.
BASE = "https://127.0.0.1:8000"
CA = "/etc/llmfleet/tls/ca.crt"
CURL = "curl --cacert %s" % CA


def container_state(host):
    out = host.check_output("docker inspect --format '{{.Id}} {{.State.StartedAt}}' llmfleet-vllm-0")
    return out.strip()


def wait_healthy(host, timeout=240):
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if host.run("%s -fsS -o /dev/null %s/health" % (CURL, BASE)).rc == 0:
            return time.monotonic() - started
        time.sleep(1)
    raise AssertionError("not healthy within %ss; journal:\n%s" % (
        timeout, host.run("journalctl -u %s -n 40 --no-pager" % UNIT).stdout))


def test_unit_is_enabled_and_active(host):
    service = host.service(UNIT)
    assert service.is_enabled
    assert service.is_running


def test_idempotent_rerun_left_the_container_untouched(host):
    first = host.file("/var/tmp/llmfleet-first-container").content_string.strip()
    assert container_state(host) == first


def test_secret_env_file_is_root_only_and_not_in_unit_or_inspect(host):
    env = host.file("/etc/llmfleet/vllm-0.env")
    assert env.mode == 0o600 and env.user == "root"
    assert API_KEY in env.content_string
    for path in ("/etc/systemd/system/llmfleet-vllm@.service", "/etc/llmfleet/vllm-0.run",
                 "/etc/llmfleet/vllm-0.unit.conf", "/etc/llmfleet/serving.json"):
        assert API_KEY not in host.file(path).content_string, path
    assert API_KEY not in host.check_output("docker inspect llmfleet-vllm-0")
    assert API_KEY not in host.check_output("cat /proc/*/cmdline 2>/dev/null | tr '\\0' ' '")


def test_model_is_mounted_read_only(host):
    mounts = json.loads(host.check_output("docker inspect --format '{{json .Mounts}}' llmfleet-vllm-0"))
    model = [m for m in mounts if m["Destination"] == "/models/tiny-qwen3-moe"]
    assert model and model[0]["RW"] is False


def test_engine_cache_is_a_host_directory_per_image(host):
    """vLLM's compile cache (and Triton's, inductor's, ...) survives the container: docs/OPERATIONS.md."""
    image_id = host.check_output("docker inspect --format '{{.Image}}' llmfleet-vllm-0").strip().split(":")[-1][:12]
    mounts = json.loads(host.check_output("docker inspect --format '{{json .Mounts}}' llmfleet-vllm-0"))
    cache = [m for m in mounts if m["Destination"] == "/var/cache/llmfleet-engine"]
    assert cache and cache[0]["RW"] is True and cache[0]["Source"] == "/var/cache/llmfleet/engine/" + image_id
    # What the image ships in its own VLLM_CACHE_ROOT was copied in; the image is recorded for pruning.
    assert host.file("/var/cache/llmfleet/engine/%s/vllm/modelinfos" % image_id).is_directory
    assert host.file("/var/cache/llmfleet/engine/.llmfleet-images").content_string.split()[0] == image_id
    env = host.check_output("docker exec llmfleet-vllm-0 sh -c 'set -a; . /run/llmfleet/vllm.env; env'")
    assert "VLLM_CACHE_ROOT=/var/cache/llmfleet-engine/vllm" in env
    assert "TRITON_CACHE_DIR=/var/cache/llmfleet-engine/triton" in env


def test_stop_drains_in_flight_requests(host):
    """vLLM drains on SIGTERM (--shutdown-timeout), docker and systemd wait longer than the drain."""
    assert "--shutdown-timeout 60" in host.file("/etc/llmfleet/vllm-0.run").content_string
    assert host.check_output("systemctl show -p TimeoutStopUSec --value %s" % UNIT).strip() == "2min"
    assert "stop --time 90 " in host.file("/etc/systemd/system/llmfleet-vllm@.service").content_string


def test_watchdog_probes_the_replica_with_a_completion(host):
    assert host.service("llmfleet-watchdog.timer").is_enabled
    assert host.service("llmfleet-watchdog.timer").is_running
    host.run_expect([0], "systemctl start llmfleet-watchdog.service")
    metrics = host.file("/var/lib/prometheus/node-exporter/llmfleet_watchdog.prom").content_string
    assert 'llmfleet_watchdog_probe_success{replica="0"} 1' in metrics, metrics
    assert 'llmfleet_watchdog_consecutive_failures{replica="0"} 0' in metrics, metrics
    assert API_KEY not in metrics and API_KEY not in host.file("/etc/llmfleet/watchdog.json").content_string


def test_api_requires_the_key_and_serves_chat(host):
    unauthorized = host.run("%s -s -o /dev/null -w '%%{http_code}' %s/v1/models" % (CURL, BASE))
    assert unauthorized.stdout.strip() == "401"
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8})
    reply = json.loads(host.check_output(
        "%s -fsS -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '%s' %s/v1/chat/completions"
        % (CURL, API_KEY, body, BASE)))
    assert reply["choices"][0]["message"]["content"]


def test_recovers_from_container_kill(host):
    before = container_state(host)
    host.run_expect([0], "docker kill llmfleet-vllm-0")
    time.sleep(2)
    elapsed = wait_healthy(host)
    print("recovery after docker kill: %.1fs to healthy" % elapsed)
    assert container_state(host) != before


def test_recovers_from_unit_restart(host):
    started = time.monotonic()
    host.run_expect([0], "systemctl restart %s" % UNIT)  # returns once /health answers (ExecStartPost)
    elapsed = wait_healthy(host)
    print("systemctl restart: %.1fs until healthy" % (time.monotonic() - started + elapsed))
    assert host.service(UNIT).is_running


def test_no_route_answers_without_the_key_from_the_network(host):
    """Every route of the server's own /openapi.json, from another container on the test network, no key."""
    import os
    import subprocess
    import sys
    sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "tests"))
    import security_probe
    spec = json.loads(host.check_output("curl -fsS http://127.0.0.1:18000/openapi.json"))
    name = host.backend.get_hostname()
    ip = subprocess.run(["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name],
                        capture_output=True, text=True, check=True).stdout.strip()
    network = subprocess.run(["docker", "inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}}",
                              name], capture_output=True, text=True, check=True).stdout.strip()
    edge, replica = "https://%s:8000" % ip, "http://%s:18000" % ip
    report = security_probe.run_in_container(network, os.environ["MOLECULE_HOST_IMAGE"], spec, [edge, replica], "tiny",
                                             ca_pem=host.file(CA).content_string)
    print("route probe: %d routes, %d requests, reachable %s, violations %d" % (
        len(security_probe.routes(spec)), report["requests"], report["reachable_targets"], len(report["violations"])))
    assert report["reachable_targets"] == [edge], "vLLM's own port must not be reachable from the network"
    assert report["violations"] == [], report["violations"]


def _network_of(host):
    import subprocess
    name = host.backend.get_hostname()
    inspect = ["docker", "inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{$v.IPAddress}}{{end}}", name]
    network, ip = subprocess.run(inspect, capture_output=True, text=True, check=True).stdout.split()
    return name, network, ip


def _probe_module():
    import os
    import sys
    sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "tests"))
    import security_probe
    return security_probe


def test_an_outsider_gets_no_completion_over_plain_http_nor_old_tls(host):
    """Issue 41, from another container on the test network: plain HTTP with a valid key gets no completion,
    TLS 1.0 and 1.1 are refused, TLS 1.2 and 1.3 verify against the fleet's CA (the host's address as SAN)."""
    import os
    probe = _probe_module()
    _name, network, ip = _network_of(host)
    report = probe.transport_in_container(network, os.environ["MOLECULE_HOST_IMAGE"], ["%s:8000" % ip],
                                          host.file(CA).content_string, API_KEY, "tiny")
    target = report["targets"][0]
    print("transport probe %s: plain HTTP %s, TLS 1.0 %s, TLS 1.1 %s, TLS 1.2 %s, default %s" % (
        target["target"], target["plain_http"], target["TLSv1"]["error"][:60], target["TLSv1.1"]["error"][:60],
        target["TLSv1.2"]["version"], target["default"]["version"]))
    assert report["violations"] == [], report


def test_no_key_crosses_the_network_in_clear_during_a_chat(host):
    """Issue 41: every frame of the host's interface on the test network during a chat from another container
    (over TLS) is searched for the key; the same capture during one plain-HTTP attempt finds it (the capture sees)."""
    import os
    probe = _probe_module()
    name, network, ip = _network_of(host)
    image, ca = os.environ["MOLECULE_HOST_IMAGE"], host.file(CA).content_string
    started = probe.start_capture(name, image, API_KEY, 20)
    chat = probe.chat_in_container(network, image, ["%s:8000" % ip], ca, API_KEY, "tiny")
    over_tls = probe.capture_result(started)
    assert chat["violations"] == [], chat
    started = probe.start_capture(name, image, API_KEY, 8)
    probe.transport_in_container(network, image, ["%s:8000" % ip], ca, API_KEY, "tiny")
    in_clear = probe.capture_result(started)
    print("packet capture on the test network: chat over TLS %s; plain-HTTP attempt %s" % (over_tls, in_clear))
    assert over_tls["frames"] > 0 and not over_tls["found"], over_tls
    assert in_clear["found"], "the capture did not see the key sent in clear: it proves nothing"


def test_recovers_when_vllm_exits_0(host):
    """vLLM stopping by itself with exit code 0 (a clean shutdown nobody asked for) is restarted too."""
    restarts = int(host.check_output("systemctl show -p NRestarts --value %s" % UNIT) or 0)
    host.run_expect([0], "docker kill --signal TERM llmfleet-vllm-0")
    host.run_expect([0], "timeout 120 docker wait llmfleet-vllm-0")
    code = host.check_output("docker inspect -f '{{.State.ExitCode}}' llmfleet-vllm-0").strip()
    time.sleep(2)
    elapsed = wait_healthy(host, timeout=300)
    print("recovery after vLLM exited %s: %.1fs to healthy" % (code, elapsed))
    assert int(host.check_output("systemctl show -p NRestarts --value %s" % UNIT)) > restarts


def _site(*extra):
    """site.yml against this scenario's host, from the controller, as a user re-runs it (rc, output)."""
    import os
    import subprocess
    inventory = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "inventory")
    cmd = ["ansible-playbook", os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "site.yml"), "-i", inventory]
    for key, value in extra:
        cmd += ["-e", json.dumps({key: value})]
    started = time.monotonic()
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    return run.returncode, run.stdout + run.stderr, time.monotonic() - started


def _chat(host):
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8,
                       "temperature": 0})
    return json.loads(host.check_output(
        "%s -fsS -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '%s' %s/v1/chat/completions"
        % (CURL, API_KEY, body, BASE)))["choices"][0]["message"]["content"]


MODEL_DIR = "/srv/llmfleet/models/tiny-qwen3-moe"
LABEL = "{{index .Config.Labels \"llmfleet.vllm.model-manifest\"}}"
# The model the later tests serve (the retrained copy once the weights test ran), as site.yml's extra vars.
SERVED_MODEL = []


def _retrained_copy(tmp_dir):
    """The test model with other weights in its last shard (the low byte of each bf16 value changed: other
    numbers, none of them NaN or inf), as a checkpoint updated in place would be."""
    import os
    import shutil
    import struct
    src = os.environ["LLMFLEET_TEST_MODEL_DIR"]
    dest = os.path.join(str(tmp_dir), "tiny-qwen3-moe")
    shutil.copytree(src, dest)
    shard = sorted(n for n in os.listdir(dest) if n.endswith(".safetensors"))[-1]
    with open(os.path.join(dest, shard), "r+b") as fh:
        data = bytearray(fh.read())
        start = 8 + struct.unpack("<Q", bytes(data[:8]))[0]
        for offset in range(start, len(data), 2):
            data[offset] ^= 0x5A
        fh.seek(0)
        fh.write(bytes(data))
    return dest


def _manifest(host):
    return host.check_output("docker inspect -f '%s' llmfleet-vllm-0" % LABEL).strip()


def test_new_weights_in_the_same_model_directory_restart_the_replica(host, tmp_path_factory):
    """Issue 28: other weights deployed into the same model_weights_dir are served (the container restarts, its
    label names the new manifest); the same deployment again changes nothing."""
    before, manifest_before = container_state(host), _manifest(host)
    assert manifest_before.startswith("sha256:"), "the container does not say which manifest it serves"
    retrained = _retrained_copy(tmp_path_factory.mktemp("retrained"))
    rc, out, wall = _site(("model_weights_local_path", retrained))
    print("new weights in the same directory: %.0fs" % wall)
    assert rc == 0, out[-3000:]
    assert container_state(host) != before, "the replica still runs the old weights"
    assert _manifest(host) not in ("", manifest_before)
    assert host.file(MODEL_DIR + "/.llmfleet-weights.json").exists
    _chat(host)
    SERVED_MODEL.append(("model_weights_local_path", retrained))
    rc, out, wall = _site(*SERVED_MODEL)
    assert rc == 0 and all("changed=0" in line for line in out.splitlines() if "changed=" in line), out[-2000:]


def test_a_model_that_cannot_serve_is_rolled_back_and_the_previous_one_serves(host):
    """Issue 28: a model the CPU engine cannot serve (the test bed's tiny model with head size 16: it starts and passes
    /health, then dies on its first request), deployed into the same model directory over the serving replica, with
    the serve stage's check of the head size against the image turned off (vllm_server_check_flags: false, as an
    image that cannot tell): the run fails with the diagnosis, the previous configuration and weights serve again,
    and one good re-run changes nothing. Last: it restarts the replica."""
    import os
    bad_model = os.environ["LLMFLEET_TEST_UNSERVABLE_MODEL_DIR"]
    greedy_before, manifest_before = _chat(host), _manifest(host)

    rc, out, wall = _site(("model_weights_local_path", bad_model), ("vllm_server_check_flags", False))
    rolled_back = [line.strip() for line in out.splitlines() if "Rolled back in" in line]
    print("bad deploy + rollback: %.0fs; %s" % (wall, rolled_back[:1]))
    assert rc != 0, "a model the engine cannot serve was reported as deployed:\n" + out[-3000:]
    assert "is serving again" in out, out[-4000:]
    # The previous weights are back in the model directory, and the container serves them (same greedy output).
    assert '"head_dim": 64' in host.file(MODEL_DIR + "/config.json").content_string
    assert _manifest(host) == manifest_before
    assert _chat(host) == greedy_before
    assert host.service(UNIT).is_running

    rc, out, wall = _site(*SERVED_MODEL)
    print("good re-run after the rollback: %.0fs" % wall)
    assert rc == 0, out[-3000:]
    recap = [line for line in out.splitlines() if "changed=" in line]
    assert recap and all("changed=0" in line for line in recap), recap
