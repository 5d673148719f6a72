"""The host package (plugins/plugin_utils/host_package.py): what the serving host runs stands alone.

The watchdog, wait-healthy and follow-container run on a host that has neither Ansible nor the collection: the
package the role installs must import only itself and the standard library, and the launchers must run from it
with site-packages out of reach (python3 -S).
"""
import ast
import json
import os
import subprocess
import sys

import pytest

from ansible.errors import AnsibleLookupError
from ansible_collections.llmfleet.vllm.plugins.lookup.host_package import LookupModule
from ansible_collections.llmfleet.vllm.plugins.plugin_utils import host_package

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
HOST_AGENT = os.path.join(ROOT, "plugins", "module_utils", "host_agent")


def imports(name):
    """(relative module names, absolute top-level names) that module_utils file `name` imports."""
    tree = ast.parse(host_package.source(name))
    relative, absolute = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            relative.add(node.module or "")
        elif isinstance(node, ast.ImportFrom):
            absolute.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            absolute.update(alias.name.split(".")[0] for alias in node.names)
    return relative, absolute


@pytest.mark.parametrize("name", host_package.host_modules())
def test_each_module_imports_only_the_package_and_the_standard_library(name):
    relative, absolute = imports(name)
    assert relative <= set(host_package.host_modules()), "%s imports %s, outside the package" % (name, relative)
    assert absolute <= set(sys.stdlib_module_names), "%s imports %s" % (name, absolute - set(sys.stdlib_module_names))


def test_the_lookup_lists_every_module_as_it_is_in_the_collection(tmp_path):
    files = LookupModule().run(["/usr/local/libexec/llmfleet/"])
    paths = [f["path"] for f in files]
    assert paths[0] == "/usr/local/libexec/llmfleet/llmfleet_host/__init__.py"
    shipped = sorted(n for n in os.listdir(HOST_AGENT) if n.endswith(".py") and n != "__init__.py")
    assert len(shipped) >= 9
    assert sorted(paths[1:]) == ["/usr/local/libexec/llmfleet/llmfleet_host/%s" % n for n in shipped]
    for entry in files:
        with open(os.path.join(HOST_AGENT, os.path.basename(entry["path"]))) as fh:
            assert entry["content"] == fh.read()


@pytest.mark.parametrize("terms", [[], ["relative/dir"], ["/a", "/b"]])
def test_the_lookup_refuses_anything_but_one_absolute_directory(terms):
    with pytest.raises(AnsibleLookupError, match="one absolute directory"):
        LookupModule().run(terms)


def test_the_installed_watchdog_runs_without_site_packages(tmp_path, host_install):
    libexec = host_install(tmp_path / "libexec")
    config = tmp_path / "watchdog.json"
    state = tmp_path / "state" / "watchdog.json"
    config.write_text(json.dumps({"model": "tiny", "replicas": [], "state": str(state),
                                  "textfile": str(tmp_path / "watchdog.prom")}))
    r = subprocess.run([sys.executable, "-S", str(libexec / "llmfleet-watchdog"), str(config)],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert json.loads(state.read_text()) == {}
    assert "llmfleet_watchdog_last_run_timestamp_seconds" in (tmp_path / "watchdog.prom").read_text()
    probe = ("import sys; sys.path.insert(0, %r)\n"
             "import llmfleet_host.replica_watchdog, llmfleet_host.replica_gate, llmfleet_host.replica_follow\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('ansible', 'ansible_collections')))"
             % str(libexec))
    r = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr


def test_no_role_reaches_into_the_collection_plugins_and_no_host_tool_fakes_modules():
    for base, _dirs, names in os.walk(os.path.join(ROOT, "roles")):
        for name in names:
            with open(os.path.join(base, name), errors="replace") as fh:
                text = fh.read()
            where = os.path.relpath(os.path.join(base, name), ROOT)
            assert "../../plugins" not in text, where
    for name in ("llmfleet-watchdog", "wait-healthy", "follow-container"):
        with open(os.path.join(ROOT, "roles", "vllm_server", "files", name)) as fh:
            assert "sys.modules" not in fh.read(), name
    for name in host_package.host_modules():
        assert "sys.modules" not in host_package.source(name), name
