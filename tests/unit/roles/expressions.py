"""The `{{ }}` expressions of role files, measured as a reader meets them (tests/unit/roles/test_task_files_are_data.py):
the YAML is loaded and every string walked, so an expression over several lines of a folded value is one
expression; its length is counted with runs of white space as one space; its filter chain is the longest run of
`| filter` applied one after another (a filter inside another's arguments, or either side of `if`/`and`/`~`/...,
starts a chain of its own)."""
import re

import yaml


class _Loader(yaml.SafeLoader):
    """YAML as Ansible reads it, for measuring: !unsafe and !vault values are kept as their text."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: (
    loader.construct_scalar(node) if isinstance(node, yaml.ScalarNode) else None))


def load(path):
    with open(path) as fh:
        return yaml.load(fh, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


def strings(data):
    """Every string of loaded YAML (mapping keys too)."""
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from strings(key)
            yield from strings(value)
    elif isinstance(data, list):
        for item in data:
            yield from strings(item)


def expressions(text):
    """The `{{ ... }}` expressions in a string, each as its inside text (quotes and nested braces respected)."""
    found, i = [], 0
    while True:
        start = text.find("{{", i)
        if start < 0:
            return found
        depth, quote, j = 0, None, start + 2
        while j < len(text):
            c = text[j]
            if quote:
                if c == "\\":
                    j += 1
                elif c == quote:
                    quote = None
            elif c in "'\"":
                quote = c
            elif c in "([{":
                depth += 1
            elif c in ")]}":
                if depth == 0 and text.startswith("}}", j):
                    break
                depth -= 1
            j += 1
        found.append(text[start + 2:j])
        i = j + 2


_TOKEN = re.compile(r"""\s*(?:('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|([A-Za-z_][A-Za-z0-9_.]*)|(\d[\d.]*)|(//|\*\*|==|!=|<=|>=|[-+*/%~<>=|,:.()\[\]{}!?]))""")
_BREAKS = {"if", "else", "and", "or", "not", "in", "is"}


def _tokens(expression):
    out, pos = [], 0
    while pos < len(expression):
        m = _TOKEN.match(expression, pos)
        if not m or m.end() == pos:
            pos += 1
            continue
        out.append(m.group(0).strip())
        pos = m.end()
    return out


def filter_chain(expression):
    """The longest run of filters applied one after another in an expression."""
    tokens = _tokens(expression)
    longest, chains, i = 0, [0], 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in ("(", "[", "{"):
            chains.append(0)
        elif tok in (")", "]", "}"):
            if len(chains) > 1:
                chains.pop()
        elif tok == "|" and i + 1 < len(tokens):
            chains[-1] += 1
            longest = max(longest, chains[-1])
            i += 1  # the filter's name; its arguments open a level of their own
        elif tok in _BREAKS or tok in (",", ":", "~", "+", "-", "*", "/", "//", "%", "==", "!=", "<", ">", "<=", ">="):
            chains[-1] = 0
        i += 1
    return longest


def length(expression):
    """The expression's length as read: runs of white space (a folded value's line breaks) count as one space."""
    return len(" ".join(expression.split()))


def measure(paths, root):
    """[(relative path, length, filters, expression)] for every expression of the files."""
    import os
    rows = []
    for path in paths:
        for text in strings(load(path)):
            for expression in expressions(text):
                rows.append((os.path.relpath(path, root), length(expression), filter_chain(expression),
                             " ".join(expression.split())))
    return rows
