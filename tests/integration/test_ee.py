"""The execution environment (execution-environment.yml, `make ee`) as CI pipelines, AWX and ansible-navigator
run it: built by ansible-builder (cached by content hash), the plan through ansible-runner's container mode
(llmfleet-run --ee) and through `ansible-navigator run --mode stdout`, and site.yml deployed from inside the EE
onto a fresh systemd test host of the test bed, reached through community.docker.docker_api with the Docker socket
mounted into the EE. Secrets travel as ansible-runner expects (a 0600 vars file in the run's env/ directory, never
on a command line); the kept artifacts are searched for them.

Runs in `make test-full` (LLMFLEET_FULL=1): the first build takes minutes, the deployment many more.
Writes .cache/reliability/ee.json (build, plan and deploy times, image size) for the report.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability_common as C  # noqa: E402

pytestmark = C.full_deployment_marks()

TOP = Path(C.TOP)
BIN = Path(sys.executable).parent
EE_HOST = os.environ.get("LLMFLEET_TEST_EE_HOST", "llmfleet-ee-host")
RESULTS = {}


def record(**values):
    RESULTS.update(values)
    C.write_result("ee", RESULTS)


@pytest.fixture(scope="module")
def ee_image():
    """The EE image (ee/build.sh: built once, then found by its content hash)."""
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    started = time.monotonic()
    proc = subprocess.run([str(TOP / "ee" / "build.sh")], cwd=TOP, env=env, capture_output=True, text=True,
                          timeout=1800, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ref = proc.stdout.strip().splitlines()[-1]
    size = C.docker("image", "inspect", "-f", "{{.Size}}", ref).stdout.strip()
    record(image=ref, image_size_mb=round(int(size) / 1e6), build_s=round(time.monotonic() - started, 1),
           built_now="ee: building" in proc.stderr)
    return ref


def llmfleet_run(*args, env=None, timeout=600):
    """This checkout's llmfleet-run; (rc, summary, stderr, wall_s)."""
    run_env = dict(os.environ, PYTHONPATH=str(TOP / "collections"))
    run_env.update(env or {})
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "ansible_collections.llmfleet.vllm.plugins.cli.runner",
                           *map(str, args)], cwd=TOP, env=run_env, capture_output=True, text=True, timeout=timeout,
                          check=False)
    summary = json.loads(proc.stdout) if proc.stdout.strip() else None
    return proc.returncode, summary, proc.stderr, time.monotonic() - started


def plan_table(run_dir):
    """The table the plan printed (from the run's job events)."""
    for path in sorted(Path(run_dir).glob("artifacts/*/job_events/*.json")):
        event = json.loads(path.read_text())
        data = event.get("event_data") or {}
        if event.get("event") == "runner_on_ok" and data.get("task") == "Print the plan table":
            return data["res"]["msg"]
    raise AssertionError(f"no plan table in {run_dir}")


def test_ee_holds_the_collection_and_its_dependencies(ee_image):
    proc = C.docker("run", "--rm", ee_image, "ansible-galaxy", "collection", "list", "--format", "json")
    found = {name for path in json.loads(proc.stdout).values() for name in path}
    assert {"llmfleet.vllm", "community.docker", "community.general"} <= found
    proc = C.docker("run", "--rm", ee_image, "python3", "-c",
                    "import docker, huggingface_hub, modelscope, yaml, ansible_runner; print('ok')")
    assert proc.stdout.strip() == "ok"
    # The build machine's CA bundle and pip setting served the build only.
    assert C.docker("run", "--rm", ee_image, "ls", "/etc/pip.conf", check=False).returncode != 0


def test_plan_through_runner_in_the_ee_matches_the_plan_without_it(ee_image, tmp_path):
    common = ["playbooks/plan.yml", "-i", "localhost,", "-e", "plan_objective=latency", "--keep-artifacts",
              "--artifacts-dir", tmp_path, "-q"]
    rc, in_ee, err, ee_s = llmfleet_run(*common, "--ee", ee_image)
    assert rc == 0, err
    assert in_ee["status"] == "successful" and in_ee["playbook"] == "llmfleet.vllm.plan"
    rc, local, err, local_s = llmfleet_run(*common)
    assert rc == 0, err
    command = json.loads(next(Path(in_ee["artifacts_dir"]).glob("artifacts/*/command")).read_text())["command"]
    assert command[:2] == ["docker", "run"] and ee_image in command
    assert plan_table(in_ee["artifacts_dir"]) == plan_table(local["artifacts_dir"])
    record(plan_runner_ee_s=round(ee_s, 1), plan_runner_local_s=round(local_s, 1))


def test_plan_through_ansible_navigator(ee_image, tmp_path):
    navigator = shutil.which("ansible-navigator", path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    assert navigator, "ansible-navigator is not installed: pip install -e '.[test]' (make venv)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    started = time.monotonic()
    proc = subprocess.run([navigator, "run", "llmfleet.vllm.plan", "-i", "localhost,", "--mode", "stdout",
                           "--pull-policy", "never", "--execution-environment-image", ee_image,
                           "--container-engine", "docker", "--log-file", str(tmp_path / "navigator.log"),
                           "--playbook-artifact-save-as", str(tmp_path / "{playbook_name}-artifact.json"),
                           "-e", "plan_objective=latency"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    wall = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "| 2x H200 NVLink | Qwen/Qwen3.5-35B-A3B | yes | 1 x TP2 EP NVLink |" in proc.stdout
    artifact = json.loads((tmp_path / "plan-artifact.json").read_text())
    assert artifact["status"] == "successful"
    record(plan_navigator_s=round(wall, 1))


def deploy(host, work, ee_image=None):
    """site.yml onto a fresh test host through llmfleet-run (in the EE when ee_image is given); secrets in a
    0600 vars file. Returns (rc, summary, stderr, wall_s)."""
    env = C.load_env()
    inventory = work / "inventory"
    shutil.copytree(TOP / "inventories" / "demo" / "group_vars", inventory / "group_vars")
    hosts = C.docker_inventory([host])
    hosts["all"]["children"]["gpu_nodes"]["hosts"][host]["ansible_connection"] = "community.docker.docker_api"
    (inventory / "hosts.yml").write_text(json.dumps(hosts))
    secrets = work / "secrets.json"
    fd = os.open(secrets, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"llmfleet_api_key": C.SENTINEL_API_KEY, "vllm_server_hf_token": C.SENTINEL_HUB_TOKEN,
                   "model_weights_token": C.SENTINEL_HUB_TOKEN}, fh)
    # The demo inventory's llmfleet_api_key (a key file's lookup) is never read: the vars file's value wins.
    run_env = {k: v for k, v in env.items() if k.startswith("LLMFLEET_TEST_")}
    args = ["site.yml", "-i", inventory, "-e", f"@{secrets}",
            "-e", json.dumps({"vllm_server_start_timeout": C.START_TIMEOUT_S}),
            "--artifacts-dir", work / "runs", "--keep-artifacts", "--timeout", "2700", "-q"]
    if ee_image:
        args += ["--ee", ee_image, "--pass-env", "LLMFLEET_TEST_*",
                 "--ee-mount", "/var/run/docker.sock:/var/run/docker.sock",
                 "--ee-mount", f"{env['LLMFLEET_TEST_MODEL_DIR']}:{env['LLMFLEET_TEST_MODEL_DIR']}:ro",
                 "--ee-mount", f"{work}:{work}:ro"]
    C.start_host(host, env["MOLECULE_HOST_IMAGE"])
    return llmfleet_run(*args, env=run_env, timeout=3000)


@pytest.fixture
def workdir():
    work = Path(tempfile.mkdtemp(prefix="llmfleet-ee-"))
    yield work
    if not os.environ.get("LLMFLEET_KEEP_TEST_HOST"):
        shutil.rmtree(work, ignore_errors=True)


def test_site_deploys_from_the_ee_and_its_artifacts_hold_no_secret(ee_image, workdir):
    try:
        rc, summary, err, wall = deploy(EE_HOST, workdir, ee_image)
        assert rc == 0, (summary or {}).get("failed_tasks") or err[-4000:]
        assert summary["status"] == "successful" and summary["playbook"] == "llmfleet.vllm.site"
        assert summary["hosts"][EE_HOST]["failed"] == 0
        # The endpoint serves, behind the sentinel API key that travelled in the vars file.
        assert C.wait_serving(C.host_ip(EE_HOST), 120, time.monotonic()) is not None
        # Nothing needed scrubbing, and no secret is left anywhere in the kept run directory.
        assert "warnings" not in summary, summary["warnings"]
        hits = {}
        for path in Path(summary["artifacts_dir"]).rglob("*"):
            if path.is_file():
                text = path.read_bytes().decode("utf-8", "replace")
                n = sum(text.count(s) for s in (C.SENTINEL_API_KEY, C.SENTINEL_HUB_TOKEN))
                if n:
                    hits[str(path)] = n
        assert hits == {}
        command = json.loads(next(Path(summary["artifacts_dir"]).glob("artifacts/*/command")).read_text())
        assert C.SENTINEL_API_KEY not in json.dumps(command["command"])
        record(deploy_ee_s=round(wall, 1), deploy_ee_changed=summary["hosts"][EE_HOST]["changed"])
    finally:
        if not os.environ.get("LLMFLEET_KEEP_TEST_HOST"):
            C.remove_host(EE_HOST)


@pytest.mark.skipif(os.environ.get("LLMFLEET_EE_BASELINE") != "1",
                    reason="the same deployment without the EE, for the timing comparison: LLMFLEET_EE_BASELINE=1")
def test_site_deploys_without_the_ee_for_comparison(workdir):
    host = EE_HOST + "-local"
    try:
        rc, summary, err, wall = deploy(host, workdir)
        assert rc == 0, (summary or {}).get("failed_tasks") or err[-4000:]
        record(deploy_local_s=round(wall, 1), deploy_local_changed=summary["hosts"][host]["changed"])
    finally:
        if not os.environ.get("LLMFLEET_KEEP_TEST_HOST"):
            C.remove_host(host)
