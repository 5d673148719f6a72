"""Role task files read as data (#32, #38): checks are declarative rules (input_rule_problems), list-building lives in
tested filters, and every `{{ }}` expression of a role's tasks, vars and handlers is one a reader can hold: at most
160 characters and at most 4 filters chained (what needs more is a named, tested filter). Counted from the files,
as the issues count them: the YAML is loaded and its strings walked (tests/unit/roles/expressions.py), so an
expression folded over several lines is measured as one."""
import glob
import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import expressions as E  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TASK_FILES = sorted(glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "*.yml")))
EXPRESSION_FILES = sorted(TASK_FILES + glob.glob(os.path.join(ROOT, "roles", "*", "vars", "*.yml"))
                          + glob.glob(os.path.join(ROOT, "roles", "*", "handlers", "*.yml")))
MAX_CHARS = 160
MAX_FILTERS = 4


def statement_lines():
    return [(os.path.relpath(path, ROOT), number, line.strip())
            for path in TASK_FILES for number, line in enumerate(open(path), 1) if "{%" in line]


def over_the_limits():
    """{file: ([too long], [too many filters])} for every file with an expression over a limit."""
    found = {}
    for path, chars, filters, text in E.measure(EXPRESSION_FILES, ROOT):
        long_, chained = found.setdefault(path, ([], []))
        if chars > MAX_CHARS:
            long_.append("%d characters: %s" % (chars, text))
        if filters > MAX_FILTERS:
            chained.append("%d filters: %s" % (filters, text))
    return found


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


def test_every_expression_is_one_a_reader_can_hold():
    problems = []
    for path, (long_, chained) in sorted(over_the_limits().items()):
        problems += ["%s: %s" % (path, item) for item in long_ + chained]
    assert problems == [], ("Expressions over %d characters or %d filters (name the logic: a filter in plugins/filter "
                            "with its test, or a rule):\n%s" % (MAX_CHARS, MAX_FILTERS, "\n".join(problems)))


# ---- the measure itself ------------------------------------------------------------------------------------------


def test_an_expression_folded_over_lines_is_one_expression_measured_with_single_spaces():
    text = "{{ a if b\n   else c }} and {{ d }}"
    assert E.expressions(text) == [" a if b\n   else c ", " d "]
    assert E.length(E.expressions(text)[0]) == len("a if b else c")


def test_braces_and_quotes_inside_an_expression_do_not_end_it():
    text = "{{ {'a': '}}', 'b': [1, {'c': 2}]} | to_json }} tail"
    assert E.expressions(text) == [" {'a': '}}', 'b': [1, {'c': 2}]} | to_json "]


@pytest.mark.parametrize("expression, chained", [
    ("a", 0),
    ("a | b", 1),
    ("a | map('x') | select | unique | list", 4),
    ("a | dirname | dirname | dirname | dirname | dirname", 5),
    # A filter inside another's arguments starts its own chain; so does each side of if / else / ~ / and.
    ("a | f(b | g | h) | list", 2),
    ("a | x | y if c | z else d | u | v | w", 3),
    ("(a | x | y) ~ (b | u | v)", 2),
    ("'a | b | c | d | e | f'", 0),
])
def test_a_filter_chain_is_the_longest_run_of_filters_applied_one_after_another(expression, chained):
    assert E.filter_chain(expression) == chained


def test_the_loader_keeps_ansible_tagged_values_as_text(tmp_path):
    path = tmp_path / "vars.yml"
    path.write_text("a: !unsafe '{{ not templated }}'\nb: ['{{ x | y }}']\n")
    assert sorted(E.strings(E.load(str(path)))) == ["a", "b", "{{ not templated }}", "{{ x | y }}"]


# Jinja's map(attribute=..., default=X) puts X in for a missing attribute only when X is not None: default=none keeps
# the Undefined, and a host that lacks the fact (one that did not run the include: a model served on some hosts only)
# fails the expression.
NONE_DEFAULT = re.compile(r"map\(\s*attribute=[^)]*default=(none|None)\b")


def test_map_attribute_defaults_are_not_none():
    found = ["%s: %s" % (os.path.relpath(path, ROOT), text) for path in EXPRESSION_FILES
             for text in E.strings(E.load(path)) if NONE_DEFAULT.search(text)]
    assert found == [], "default=none is no default in map(attribute=...): use false, {} or []:\n%s" % "\n".join(found)


def test_jinja_map_leaves_a_none_default_out():
    """Why the rule above: with default=none a missing attribute stays undefined; with false it is false."""
    import jinja2
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    hosts = [{"info": {"host": "a"}}, {}]
    assert env.from_string("{{ hosts | map(attribute='info', default=false) | list }}").render(hosts=hosts) == \
        "[{'host': 'a'}, False]"
    left = "{{ (hosts | map(attribute='info', default=%s) | list)[1] is undefined }}"
    assert env.from_string(left % "none").render(hosts=hosts) == "True"
    assert env.from_string(left % "false").render(hosts=hosts) == "False"
