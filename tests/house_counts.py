"""The house's counts (issue "The house, second step"), printed for a closing note and compared across commits:

  python3 tests/house_counts.py [ROOT]

- expressions in role tasks and vars over 160 characters, or chaining more than 4 filters;
- private variables (``__<role>_*``) per role and where they are defined (vars, set_fact, task vars, register);
- defaults restated across roles (``<other role>_<var> | default(...)`` in a role that does not own the variable);
- names spelt out more than once (unit names in roles/ and playbooks/);
- layer-kind branches in the planner (``kind ==`` / ``kind in`` / ``["kind"] ==``);
- unit test files that mirror the file they test;
- filters defined but used nowhere.
Reads files only; prints numbers, asserts nothing (the limits live in tests/unit).
"""
import glob
import os
import re
import sys

import yaml


def expression_rows(root):
    """The test's own measure (tests/unit/roles/expressions.py) where the tree has it, else a plain reading."""
    sys.path.insert(0, os.path.join(root, "tests", "unit", "roles"))
    try:
        import expressions as measure_module
    except ImportError:
        return [(p, len(e), e.count("|"), e) for p, e in _plain_expressions(root)]
    finally:
        sys.path.pop(0)
    paths = sorted(glob.glob(os.path.join(root, "roles", "*", "tasks", "*.yml"))
                   + glob.glob(os.path.join(root, "roles", "*", "vars", "*.yml"))
                   + glob.glob(os.path.join(root, "roles", "*", "handlers", "*.yml")))
    return measure_module.measure(paths, root)


def _plain_expressions(root):
    for path in sorted(glob.glob(os.path.join(root, "roles", "*", "tasks", "*.yml"))
                       + glob.glob(os.path.join(root, "roles", "*", "vars", "*.yml"))):
        with open(path) as fh:
            data = yaml.safe_load(fh)
        for text in _strings(data):
            for m in re.finditer(r"\{\{(.*?)\}\}", text, re.S):
                yield os.path.relpath(path, root), " ".join(m.group(1).split())


def _strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for k, v in node.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _strings(v)


def private_variables(root):
    out = {}
    for role_dir in sorted(glob.glob(os.path.join(root, "roles", "*"))):
        role = os.path.basename(role_dir)
        names, places = set(), {}
        pattern = re.compile(r"\b(__%s_\w+)" % role)
        for path in glob.glob(os.path.join(role_dir, "**", "*.yml"), recursive=True):
            text = open(path).read()
            kind = "vars" if "/vars/" in path else "tasks"
            for line in text.splitlines():
                s = line.strip()
                m = re.match(r"^-?\s*(register:\s*)?(__%s_\w+):?" % role, s)
                if not m:
                    continue
                name = m.group(2)
                if s.startswith(("register:", "- register:")) or m.group(1):
                    where = "register"
                elif kind == "vars":
                    where = "vars"
                else:
                    where = "set_fact/task vars"
                names.add(name)
                places.setdefault(where, set()).add(name)
        out[role] = (len(names), {k: len(v) for k, v in places.items()})
    return out


def restated_defaults(root):
    roles = [os.path.basename(p) for p in glob.glob(os.path.join(root, "roles", "*"))]
    found = []
    for role in roles:
        for path in glob.glob(os.path.join(root, "roles", role, "**", "*.yml"), recursive=True):
            text = open(path).read()
            for other in roles:
                if other == role:
                    continue
                for m in re.finditer(r"\b%s_\w+\s*\|\s*default\(" % other, text):
                    found.append((os.path.relpath(path, root), m.group(0)))
    return found


def spelt_names(root):
    names = ("llmfleet-edge.service", "llmfleet-vllm@", "llmfleet-watchdog.service", "llmfleet-watchdog.timer")
    counts = {}
    for path in glob.glob(os.path.join(root, "roles", "**", "*"), recursive=True) + \
            glob.glob(os.path.join(root, "playbooks", "**", "*"), recursive=True):
        if os.path.isfile(path) and not path.endswith(".md"):
            text = open(path, errors="replace").read()
            for n in names:
                counts[n] = counts.get(n, 0) + text.count(n)
    return counts


def kind_branches(root):
    pattern = re.compile(r"""kind\W{0,3}\s*(==|!=|\bin\b)|\[["']kind["']\]\s*(==|!=|\bin\b)|get\(["']kind["']\)\s*(==|!=|\bin\b)""")
    n = 0
    for path in glob.glob(os.path.join(root, "plugins", "**", "*.py"), recursive=True):
        if "planner" in path or "kv_specs" in path or "engine_memory" in path or "model_arch" in path or "plan_" in path:
            n += sum(1 for line in open(path) if pattern.search(line))
    return n


def mirrored_tests(root):
    tests = os.path.join(root, "tests", "unit", "plugins")
    total = mirrored = 0
    for folder, _dirs, names in os.walk(tests):
        source_dir = os.path.join(root, "plugins", os.path.relpath(folder, tests))
        sources = {n[:-3] for n in os.listdir(source_dir) if n.endswith(".py")} if os.path.isdir(source_dir) else set()
        for name in names:
            if name.startswith("test_") and name.endswith(".py"):
                total += 1
                stem = name[5:-3]
                mirrored += any(stem == s or stem.startswith(s + "_") for s in sources)
    return mirrored, total


def unused_filters(root):
    defined = set()
    for path in glob.glob(os.path.join(root, "plugins", "filter", "*.py")):
        text = open(path).read()
        defined.update(re.findall(r"""["'](\w+)["']\s*:\s*\w+""", text.split("def filters", 1)[-1]))
    used_text = ""
    for pattern in ("roles/**/*", "playbooks/**/*", "molecule/**/*", "tests/**/*.py", "tests/**/*.yml",
                    "plugins/**/*.py", "inventories/**/*"):
        for path in glob.glob(os.path.join(root, pattern), recursive=True):
            if os.path.isfile(path) and "/filter/" not in path:
                used_text += open(path, errors="replace").read()
    return sorted(f for f in defined if not re.search(r"\b%s\b" % re.escape(f), used_text))


def main(root):
    rows = expression_rows(root)
    print("role task/vars/handlers expressions: %d; over 160 chars: %d (longest %d); chains over 4 filters: %d"
          % (len(rows), sum(r[1] > 160 for r in rows), max((r[1] for r in rows), default=0),
             sum(r[2] > 4 for r in rows)))
    for role, (n, places) in private_variables(root).items():
        if n:
            print("private variables %-26s %3d  %s" % (role, n, places))
    restated = restated_defaults(root)
    print("defaults restated across roles: %d" % len(restated))
    print("names spelt out in roles/playbooks: %s" % spelt_names(root))
    print("layer-kind string branches in the planner: %d" % kind_branches(root))
    print("unit test files that mirror their file: %d of %d" % mirrored_tests(root))
    unused = unused_filters(root)
    print("filters used nowhere: %d %s" % (len(unused), unused))


if __name__ == "__main__":
    main(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")))
