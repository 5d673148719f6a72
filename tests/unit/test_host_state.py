"""host_state: files, Debian package states and unit states in one read-only call (module_utils.host_state and the
module through ansible itself, with a dpkg-query double on PATH)."""
import json
import os
import subprocess
import sys

from ansible_collections.llmfleet.vllm.plugins.module_utils.host_state import dpkg_states, unit_properties

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSIBLE_BIN = os.path.dirname(sys.executable)


def test_dpkg_states_reads_installed_half_installed_and_unknown_packages():
    text = ("docker.io\tii \t20.10.24+dfsg1-1+deb12u1\n"
            "python3-docker\trc \t5.0.3-1\n"          # removed, its configuration files left
            "containerd:amd64\tiU \t1.6.20~ds1-1\n")  # unpacked, not configured (multi-arch name)
    states = dpkg_states(text, ["docker.io", "python3-docker", "containerd", "haproxy"])
    assert states["docker.io"] == {"installed": True, "status": "ii", "version": "20.10.24+dfsg1-1+deb12u1"}
    assert states["python3-docker"]["installed"] is False and states["python3-docker"]["status"] == "rc"
    assert states["containerd"]["installed"] is False and states["containerd"]["status"] == "iU"
    assert states["haproxy"] == {"installed": False, "status": "", "version": ""}


def test_unit_properties():
    assert unit_properties("ActiveState=active\nSubState=running\nUnitFileState=enabled\n") == {
        "ActiveState": "active", "SubState": "running", "UnitFileState": "enabled"}
    assert unit_properties("") == {}


def test_module_reads_files_and_packages_in_one_call(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # A dpkg-query double: knows docker.io only, and exits 1 as the real one does when a package is unknown.
    (bin_dir / "dpkg-query").write_text("#!/bin/sh\nprintf 'docker.io\\tii \\t20.10.24\\n'\n"
                                        "echo 'dpkg-query: no packages found matching haproxy' >&2\nexit 1\n")
    (bin_dir / "dpkg-query").chmod(0o755)
    daemon_json = tmp_path / "daemon.json"
    daemon_json.write_text('{"log-driver": "json-file"}\n')
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="json", PATH=str(bin_dir) + os.pathsep + os.environ["PATH"])
    args = dict(files=[str(daemon_json), str(tmp_path / "missing.json")], packages=["docker.io", "haproxy"])
    r = subprocess.run([os.path.join(ANSIBLE_BIN, "ansible"), "localhost", "-c", "local",
                        "-e", "ansible_python_interpreter=%s" % sys.executable,
                        "-m", "llmfleet.vllm.host_state", "-a", json.dumps(args)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    result = json.loads(r.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert not result.get("failed") and not result["changed"], result
    assert result["files"] == {str(daemon_json): '{"log-driver": "json-file"}\n', str(tmp_path / "missing.json"): None}
    assert result["packages"]["docker.io"]["installed"] is True
    assert result["packages"]["haproxy"]["installed"] is False
    assert result["units"] == {}
