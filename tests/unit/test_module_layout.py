"""The layout of plugins/: code in rooms by where it runs, helpers with one job, and data kept as data.

- plugins/plugin_utils/: code only the controller runs (planner/, fleet/, the host package builder);
- plugins/module_utils/: code the modules import on the hosts, in subpackages by concern, and host_agent/, the
  self-contained package shipped whole to the hosts; no flat file, and nothing there imports plugin_utils;
- limits a reader can hold: no utils file over MAX_FILE_LINES, no function over MAX_FUNCTION_LINES;
- the diagnostic signatures a module of plain data, the host-side GPU readers free of controller-side imports.
"""
import ast
import os

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PLUGINS = os.path.join(ROOT, "plugins")
MODULE_UTILS = os.path.join(PLUGINS, "module_utils")
PLUGIN_UTILS = os.path.join(PLUGINS, "plugin_utils")
MODULE_UTILS_ROOMS = {"checks", "gpu", "host_agent", "serving", "weights"}
PLUGIN_UTILS_ROOMS = {"fleet", "planner"}
MAX_FILE_LINES = 450
MAX_FUNCTION_LINES = 60

# Exceptions, each with its reason (none left: test_each_exemption_is_still_needed keeps the lists honest).
KNOWN_LONG_FILES = set()
KNOWN_LONG = set()


def python_files():
    for base, _dirs, names in os.walk(PLUGINS):
        for name in names:
            if name.endswith(".py"):
                yield os.path.join(base, name)


def imported_modules(path):
    with open(path) as fh:
        tree = ast.parse(fh.read())
    return {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}


@pytest.mark.parametrize("top, rooms", [(MODULE_UTILS, MODULE_UTILS_ROOMS), (PLUGIN_UTILS, PLUGIN_UTILS_ROOMS)])
def test_code_lives_in_rooms_not_in_a_flat_folder(top, rooms):
    entries = set(os.listdir(top)) - {"__init__.py", "__pycache__"}
    flat = {e for e in entries if e.endswith(".py")}
    assert {e for e in entries if os.path.isdir(os.path.join(top, e))} - {"__pycache__"} == rooms
    assert flat <= {"host_package.py"}, "put %s in a room" % sorted(flat)
    for room in rooms:
        assert os.path.isfile(os.path.join(top, room, "__init__.py")), room


def test_nothing_the_hosts_run_imports_controller_code():
    reaching = {}
    for base in (MODULE_UTILS, os.path.join(PLUGINS, "modules")):
        for folder, _dirs, names in os.walk(base):
            for name in names:
                path = os.path.join(folder, name)
                if name.endswith(".py") and any(".plugin_utils" in m for m in imported_modules(path)):
                    reaching[os.path.relpath(path, PLUGINS)] = sorted(imported_modules(path))
    assert reaching == {}


def test_no_utils_file_is_over_the_line_limit():
    long = {}
    for path in python_files():
        if not path.startswith((MODULE_UTILS, PLUGIN_UTILS)):
            continue
        with open(path) as fh:
            count = len(fh.read().splitlines())
        if count > MAX_FILE_LINES and os.path.relpath(path, PLUGINS) not in KNOWN_LONG_FILES:
            long[os.path.relpath(path, PLUGINS)] = count
    assert long == {}


def test_no_function_is_over_the_line_limit():
    long = {}
    for path in python_files():
        with open(path) as fh:
            tree = ast.parse(fh.read())
        where = os.path.relpath(path, PLUGINS)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (where, node.name) not in KNOWN_LONG:
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long["%s:%s" % (where, node.name)] = lines
    assert long == {}


def test_each_exemption_is_still_needed():
    """An exemption whose file or function is back under the limit goes, so that the limit holds for it again."""
    fine = []
    for where in KNOWN_LONG_FILES:
        with open(os.path.join(PLUGINS, where)) as fh:
            if len(fh.read().splitlines()) <= MAX_FILE_LINES:
                fine.append(where)
    lengths = {}
    for where, _name in KNOWN_LONG:
        path = os.path.join(PLUGINS, where)
        if os.path.isfile(path):
            with open(path) as fh:
                for node in ast.walk(ast.parse(fh.read())):
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        key = (where, node.name)
                        lengths[key] = max(lengths.get(key, 0), node.end_lineno - node.lineno + 1)
    fine += ["%s:%s" % key for key in KNOWN_LONG if lengths.get(key, 0) <= MAX_FUNCTION_LINES]
    assert sorted(fine) == [], "remove these from KNOWN_LONG_FILES / KNOWN_LONG"


def test_the_signatures_are_plain_data():
    with open(os.path.join(MODULE_UTILS, "host_agent", "diagnose_signatures.py")) as fh:
        tree = ast.parse(fh.read())
    code = [type(node).__name__ for node in tree.body
            if not isinstance(node, (ast.Assign, ast.ImportFrom, ast.Expr))]
    assert code == []
    assigned = sorted(t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets)
    assert assigned == ["FALLBACKS", "SIGNATURES", "__metaclass__"]
    for node in tree.body:
        if isinstance(node, ast.Assign) and node.targets[0].id in ("FALLBACKS", "SIGNATURES"):
            ast.literal_eval(node.value)  # raises on anything but literals


@pytest.mark.parametrize("name", ["gpu_probe", "smi_output", "gpu_nvml", "gpu_links"])
def test_the_host_side_gpu_readers_import_nothing_controller_side(name):
    with open(os.path.join(MODULE_UTILS, "gpu", name + ".py")) as fh:
        tree = ast.parse(fh.read())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.rsplit(".", 1)[-1])
            imported.update(alias.name for alias in node.names)
    assert not imported & {"topology", "gpu_catalogue", "planner"}, imported


def test_old_names_stay_importable_where_they_were():
    from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu import gpu_probe, smi_output, topology
    from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent import diagnose_signatures, diagnostics
    from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import fetch_place, hub_fetch

    assert diagnostics.SIGNATURES is diagnose_signatures.SIGNATURES
    assert hub_fetch.FetchError is fetch_place.FetchError and hub_fetch.place is fetch_place.place
    assert topology.parse_topo_matrix is smi_output.parse_topo_matrix
    assert topology.collect_gpu_facts is gpu_probe.collect_gpu_facts


def test_unit_tests_mirror_the_files_they_test():
    """tests/unit/plugins/<room>/test_<file>[_<aspect>].py tests plugins/<room>/<file>.py."""
    tests = os.path.join(ROOT, "tests", "unit", "plugins")
    orphans = []
    for folder, _dirs, names in os.walk(tests):
        source_dir = os.path.join(PLUGINS, os.path.relpath(folder, tests))
        sources = {n[:-3] for n in os.listdir(source_dir) if n.endswith(".py")} if os.path.isdir(source_dir) else set()
        for name in names:
            if name.startswith("test_") and name.endswith(".py"):
                stem = name[len("test_"):-3]
                if not any(stem == s or stem.startswith(s + "_") for s in sources):
                    orphans.append(os.path.relpath(os.path.join(folder, name), ROOT))
    assert orphans == [], "name each test after the file it tests, in the mirrored folder: %s" % orphans
