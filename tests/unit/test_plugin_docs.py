"""Docs are the contract: every plugin and role the collection ships renders with ansible-doc, without error.

For each type ansible-doc documents, the collection's plugins are listed with `ansible-doc -l llmfleet.vllm -t
TYPE` and then rendered, as JSON and as text (the text renderer is where a malformed description fails), in one
call per type. A plugin listed as UNDOCUMENTED, a warning or an error fails the test.
"""
import ast
import glob
import json
import os
import subprocess
import sys

import pytest
from ansible.constants import DOCUMENTABLE_PLUGINS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSIBLE_DOC = os.path.join(os.path.dirname(sys.executable), "ansible-doc")
COLLECTION = "llmfleet.vllm"
TYPES = tuple(DOCUMENTABLE_PLUGINS) + ("role",)


def ansible_doc(*args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_DEPRECATION_WARNINGS="1")
    r = subprocess.run([ANSIBLE_DOC, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, "ansible-doc %s failed (rc %d):\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr)
    problems = [line for line in r.stderr.splitlines() if "[ERROR]" in line or "[WARNING]" in line or "[DEPRECATION" in line]
    assert not problems, "ansible-doc %s:\n%s" % (" ".join(args), "\n".join(problems))
    return r.stdout


def listed(plugin_type):
    return json.loads(ansible_doc("-l", COLLECTION, "-t", plugin_type, "--json"))


def filters_defined():
    """Filter names the collection's filter plugins return from FilterModule.filters() (read from the source)."""
    names = set()
    for path in glob.glob(os.path.join(ROOT, "plugins", "filter", "*.py")):
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.FunctionDef) and node.name == "filters":
                for ret in ast.walk(node):
                    if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Dict):
                        names.update(k.value for k in ret.value.keys)
    return names


@pytest.mark.parametrize("plugin_type", TYPES)
def test_every_plugin_of_the_type_renders(plugin_type):
    plugins = listed(plugin_type)
    if not plugins:
        return
    if plugin_type != "role":
        undocumented = sorted(n for n, d in plugins.items() if d == "UNDOCUMENTED")
        assert not undocumented, "%s plugins without documentation: %s" % (plugin_type, undocumented)
    names = sorted(plugins)
    docs = json.loads(ansible_doc("-t", plugin_type, "--json", *names))
    for name in names:
        assert name in docs, "ansible-doc -t %s %s rendered nothing" % (plugin_type, name)
        if plugin_type == "role":
            entry_points = docs[name].get("entry_points") or {}
            assert entry_points, "role %s has no meta/argument_specs.yml entry point" % name
            for entry, spec in entry_points.items():
                assert spec.get("short_description"), "role %s entry point %s: no short_description" % (name, entry)
        else:
            doc = docs[name].get("doc") or {}
            assert doc.get("short_description") and doc.get("description"), "%s %s: no description" % (plugin_type, name)
            assert doc.get("author"), "%s %s: no author" % (plugin_type, name)
            assert docs[name].get("examples"), "%s %s: no EXAMPLES" % (plugin_type, name)
            if plugin_type in ("module", "filter", "test", "lookup"):
                assert docs[name].get("return"), "%s %s: no RETURN" % (plugin_type, name)
    # The text renderer is where a malformed description (a dict among the bullets, ...) blows up.
    text = ansible_doc("-t", plugin_type, *names)
    for name in names:
        assert name in text


def test_the_listings_hold_everything_the_collection_ships():
    modules = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py"))}
    assert {n.split(".")[-1] for n in listed("module")} == modules - {"__init__"}
    assert {n.split(".")[-1] for n in listed("filter")} == filters_defined()
    roles = {os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(ROOT, "roles", "*", "tasks"))}
    assert {n.split(".")[-1] for n in listed("role")} == roles
