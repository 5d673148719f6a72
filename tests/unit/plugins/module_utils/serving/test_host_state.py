"""host_state: files, Debian package states and unit states in one read-only call. The parsers
(module_utils.host_state) on output captured from the real tools; the module through ansible itself, with this
machine's own dpkg-query (a Debian system)."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.serving.host_state import dpkg_states, path_state, unit_properties

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))))
ANSIBLE_BIN = os.path.dirname(sys.executable)
DPKG_QUERY = shutil.which("dpkg-query")
NOT_A_PACKAGE = "llmfleet-no-such-package"

# `dpkg-query --show --showformat=<host_state.DPKG_FORMAT> dpkg iproute2 llmfleet-unpacked haproxy` on the
# Debian 12 test host image (llmfleet-testbed/debian12-systemd), after `dpkg -r iproute2` (removed, its
# configuration files left) and `dpkg --unpack` of a package built with dpkg-deb (unpacked, not configured).
# It exited 1 and printed "dpkg-query: no packages found matching haproxy" on stderr. The last two lines: a
# deployed test host after `apt-mark hold docker.io`, asked for docker.io, libc6:amd64 and libc6 (one line for both).
DPKG_CAPTURED = ("dpkg\tii \t1.21.23\n"
                 "iproute2\trc \t6.1.0-3\n"
                 "llmfleet-unpacked\tiU \t1.0-1\n"
                 "docker.io\thi \t20.10.24+dfsg1-1+deb12u1+b6\n"
                 "libc6\tii \t2.36-9+deb12u14\n")

# `systemctl show <unit> --property=LoadState,ActiveState,SubState,UnitFileState,NeedDaemonReload` on a booted
# test host of that image: a running service, and a unit that does not exist (systemctl exits 0 for it too).
SYSTEMCTL_JOURNALD = ("LoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=static\n"
                      "NeedDaemonReload=no\n")
SYSTEMCTL_NOT_FOUND = "LoadState=not-found\nActiveState=inactive\nSubState=dead\nUnitFileState=\nNeedDaemonReload=no\n"


def test_dpkg_states_reads_installed_half_installed_and_unknown_packages():
    states = dpkg_states(DPKG_CAPTURED, ["dpkg", "iproute2", "llmfleet-unpacked", "haproxy"])
    assert states["dpkg"] == {"installed": True, "status": "ii", "version": "1.21.23"}
    assert states["iproute2"] == {"installed": False, "status": "rc", "version": ""}
    assert states["llmfleet-unpacked"] == {"installed": False, "status": "iU", "version": ""}
    assert states["haproxy"] == {"installed": False, "status": "", "version": ""}


def test_dpkg_states_counts_a_held_package_and_a_name_with_its_architecture_as_installed():
    # A held docker.io is installed: docker_engine must not call apt for it on every run.
    states = dpkg_states(DPKG_CAPTURED, ["docker.io", "libc6:amd64"])
    assert states["docker.io"] == {"installed": True, "status": "hi", "version": "20.10.24+dfsg1-1+deb12u1+b6"}
    assert states["libc6:amd64"] == {"installed": True, "status": "ii", "version": "2.36-9+deb12u14"}


def test_unit_properties():
    assert unit_properties(SYSTEMCTL_JOURNALD) == {
        "LoadState": "loaded", "ActiveState": "active", "SubState": "running", "UnitFileState": "static",
        "NeedDaemonReload": "no"}
    assert unit_properties(SYSTEMCTL_NOT_FOUND)["LoadState"] == "not-found"
    assert unit_properties(SYSTEMCTL_NOT_FOUND)["UnitFileState"] == ""
    assert unit_properties("") == {}


def dpkg_version(package):
    return subprocess.run([DPKG_QUERY, "--show", "--showformat=${Version}", package], capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.skipif(not DPKG_QUERY, reason="no dpkg-query (not a Debian-family system): host_state reads dpkg's data")
def test_module_reads_files_and_packages_in_one_call(tmp_path):
    daemon_json = tmp_path / "daemon.json"
    daemon_json.write_text('{"log-driver": "json-file"}\n')
    not_text = tmp_path / "not-text"
    not_text.write_bytes(b"\xff\xfe\x00binary")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="json")
    args = dict(files=[str(daemon_json), str(tmp_path / "missing.json"), str(not_text)],
                paths=[str(tmp_path / "missing.json"), str(tmp_path)],
                packages=["dpkg", "coreutils", NOT_A_PACKAGE])
    r = subprocess.run([os.path.join(ANSIBLE_BIN, "ansible"), "localhost", "-c", "local",
                        "-e", "ansible_python_interpreter=%s" % sys.executable,
                        "-m", "llmfleet.vllm.host_state", "-a", json.dumps(args)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    result = json.loads(r.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert not result.get("failed") and not result["changed"], result
    assert result["files"] == {str(daemon_json): '{"log-driver": "json-file"}\n', str(tmp_path / "missing.json"): None,
                               str(not_text): None}
    # This machine's dpkg database, read by the real dpkg-query (which exits 1: one name is not a package).
    assert result["packages"] == {
        "dpkg": {"installed": True, "status": "ii", "version": dpkg_version("dpkg")},
        "coreutils": {"installed": True, "status": "ii", "version": dpkg_version("coreutils")},
        NOT_A_PACKAGE: {"installed": False, "status": "", "version": ""},
    }
    assert result["units"] == {}
    assert result["paths"][str(tmp_path / "missing.json")]["exists"] is False
    assert result["paths"][str(tmp_path)]["type"] == "directory"


def test_path_state_tells_a_file_a_directory_a_link_and_nothing_apart(tmp_path):
    (tmp_path / "f").write_text("12345")
    os.chmod(tmp_path / "f", 0o640)
    os.symlink(str(tmp_path / "gone"), str(tmp_path / "dangling"))
    f = path_state(str(tmp_path / "f"))
    assert (f["exists"], f["type"], f["size"], f["mode"]) == (True, "file", 5, "0640")
    assert f["mtime"] == os.stat(tmp_path / "f").st_mtime
    assert path_state(str(tmp_path))["type"] == "directory"
    # A link is reported as the link, even when what it points to is gone (a leftover is a leftover).
    assert path_state(str(tmp_path / "dangling"))["type"] == "link"
    nothing = {"exists": False, "type": None, "size": None, "mode": None, "mtime": None}
    assert path_state(str(tmp_path / "missing")) == nothing


def test_a_file_the_caller_cannot_do_without_fails_with_its_message_and_path(tmp_path):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="json")
    (tmp_path / "here.json").write_text("{}")
    args = dict(files=[str(tmp_path / "here.json"), str(tmp_path / "serving.json")],
                missing_msg="Run the serve stage first.")
    r = subprocess.run([os.path.join(ANSIBLE_BIN, "ansible"), "localhost", "-c", "local",
                        "-e", "ansible_python_interpreter=%s" % sys.executable,
                        "-m", "llmfleet.vllm.host_state", "-a", json.dumps(args)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    result = json.loads(r.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert result["failed"]
    assert result["msg"] == "Run the serve stage first. (missing or unreadable on this host: %s)" % (tmp_path / "serving.json")
