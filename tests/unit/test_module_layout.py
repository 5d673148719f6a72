"""The layout of plugins/ (#32): helpers with one job, split by where they run, and data kept as data.

Counted from the files, as the issue counts them: no module_utils file over 600 lines, no function in plugins/
over 80 lines (none left: KNOWN_LONG stays empty),
the diagnostic signatures a module of plain data, and the host-side GPU readers free of controller-side imports.
"""
import ast
import os

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PLUGINS = os.path.join(ROOT, "plugins")
MODULE_UTILS = os.path.join(PLUGINS, "module_utils")

# Exceptions, each with its reason (none: the planner was split into plan_hosts / plan_reasons / plan_suggestions).
KNOWN_LONG_FILES = set()
KNOWN_LONG = set()


def python_files():
    for base, _dirs, names in os.walk(PLUGINS):
        for name in names:
            if name.endswith(".py"):
                yield os.path.join(base, name)


def test_no_module_utils_file_is_over_600_lines():
    long = {}
    for name in os.listdir(MODULE_UTILS):
        if name.endswith(".py") and name not in KNOWN_LONG_FILES:
            with open(os.path.join(MODULE_UTILS, name)) as fh:
                count = len(fh.read().splitlines())
            if count > 600:
                long[name] = count
    assert long == {}


def test_no_function_is_over_80_lines():
    long = {}
    for path in python_files():
        with open(path) as fh:
            tree = ast.parse(fh.read())
        where = os.path.relpath(path, PLUGINS)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (where, node.name) not in KNOWN_LONG:
                lines = node.end_lineno - node.lineno + 1
                if lines > 80:
                    long["%s:%s" % (where, node.name)] = lines
    assert long == {}


def test_the_signatures_are_plain_data():
    with open(os.path.join(MODULE_UTILS, "diagnose_signatures.py")) as fh:
        tree = ast.parse(fh.read())
    code = [type(node).__name__ for node in tree.body
            if not isinstance(node, (ast.Assign, ast.ImportFrom, ast.Expr))]
    assert code == []
    assigned = sorted(t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets)
    assert assigned == ["FALLBACKS", "SIGNATURES", "__metaclass__"]
    for node in tree.body:
        if isinstance(node, ast.Assign) and node.targets[0].id in ("FALLBACKS", "SIGNATURES"):
            ast.literal_eval(node.value)  # raises on anything but literals


@pytest.mark.parametrize("name", ["gpu_probe", "gpu_nvml", "gpu_links"])
def test_the_host_side_gpu_readers_import_nothing_controller_side(name):
    with open(os.path.join(MODULE_UTILS, name + ".py")) as fh:
        tree = ast.parse(fh.read())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.rsplit(".", 1)[-1])
            imported.update(alias.name for alias in node.names)
    assert not imported & {"topology", "gpu_catalogue", "planner"}, imported


def test_old_names_stay_importable_where_they_were():
    from ansible_collections.llmfleet.vllm.plugins.module_utils import diagnostics, hub_fetch, topology
    from ansible_collections.llmfleet.vllm.plugins.module_utils import diagnose_signatures, fetch_place, gpu_probe

    assert diagnostics.SIGNATURES is diagnose_signatures.SIGNATURES
    assert hub_fetch.FetchError is fetch_place.FetchError and hub_fetch.place is fetch_place.place
    assert topology.parse_topo_matrix is gpu_probe.parse_topo_matrix
    assert topology.collect_gpu_facts is gpu_probe.collect_gpu_facts
