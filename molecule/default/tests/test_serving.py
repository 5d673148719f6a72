"""End-to-end checks on the served host: the unit, the container, the API, and recovery from faults.

Order matters: the untouched-container check runs before the fault tests restart it.
"""
import json
import time

API_KEY = "llmfleet-sentinel-api-key-4f1c"
UNIT = "llmfleet-vllm@0.service"
BASE = "http://127.0.0.1:8000"


def container_state(host):
    out = host.check_output("docker inspect --format '{{.Id}} {{.State.StartedAt}}' llmfleet-vllm-0")
    return out.strip()


def wait_healthy(host, timeout=240):
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if host.run("curl -fsS -o /dev/null %s/health" % BASE).rc == 0:
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


def test_api_requires_the_key_and_serves_chat(host):
    unauthorized = host.run("curl -s -o /dev/null -w '%%{http_code}' %s/v1/models" % BASE)
    assert unauthorized.stdout.strip() == "401"
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8})
    reply = json.loads(host.check_output(
        "curl -fsS -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '%s' %s/v1/chat/completions"
        % (API_KEY, body, BASE)))
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
