"""Role task files read as data (#32): checks are declarative rules (input_rule_problems), list-building lives in
tested filters. Counted from the files, as the issue counts them."""
import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TASK_FILES = sorted(glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "*.yml")))


def statement_lines():
    return [(os.path.relpath(path, ROOT), number, line.strip())
            for path in TASK_FILES for number, line in enumerate(open(path), 1) if "{%" in line]


def test_the_task_files_are_found():
    assert len(TASK_FILES) > 20


def test_at_most_ten_jinja_statement_lines_in_all_role_task_files():
    found = statement_lines()
    assert len(found) <= 10, "Jinja statements in task files (put the logic in a filter / rule):\n%s" % "\n".join(
        "%s:%d: %s" % item for item in found)


def test_no_list_is_built_with_the_append_idiom():
    idiom = re.compile(r"\{%-?\s*set\s+_\s*=\s*\w+\.(append|update|extend)\(")
    found = [item for item in statement_lines() if idiom.search(item[2])]
    assert found == [], found
