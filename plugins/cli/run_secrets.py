# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""llmfleet-run's secrets: which extra vars and environment variables look secret, the values to keep out of
output and artifacts, their redaction, and the 0600 file secret extra vars travel in (runner.py runs the play).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path


# A name is secret when one of its words (split on anything not a letter or digit) is one of these,
# or when it holds "api" followed by "key", or ends in "pass". Words, not substrings: max_tokens is
# a number that must stay readable (and unredacted) in the artifacts.
SECRET_WORDS = frozenset({"token", "password", "passwd", "apikey", "secret", "secrets"})
REDACTED = "********"
# Values shorter than this are not treated as secrets when scanning (redacting every "1" or "ab"
# in the artifacts would destroy them and protect nothing).
MIN_SECRET_LEN = 4


def is_secret_name(name: str) -> bool:
    """True when a variable name looks like it holds a secret (hub_token, HF_TOKEN, vllm_api_key,
    db_password, client_secret, ansible_become_pass; not max_tokens or llmfleet_model)."""
    words = [w for w in re.split(r"[^a-z0-9]+", str(name).lower()) if w]
    if any(w in SECRET_WORDS for w in words):
        return True
    if any(a == "api" and b == "key" for a, b in zip(words, words[1:])):
        return True
    return bool(words) and words[-1] == "pass"


def _contains_secret_key(value) -> bool:
    if isinstance(value, Mapping):
        return any(is_secret_name(k) or _contains_secret_key(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_contains_secret_key(v) for v in value)
    return False


def split_extravars(extravars: Mapping) -> tuple[dict, dict]:
    """Split extra vars into (public, secret) by top-level variable.

    A top-level variable is secret when its name looks secret or when it holds a mapping with a
    secret-looking key anywhere inside (``{"hub": {"token": ...}}`` travels whole in the secret file).
    """
    public, secret = {}, {}
    for key, value in extravars.items():
        if is_secret_name(key) or _contains_secret_key(value):
            secret[key] = value
        else:
            public[key] = value
    return public, secret


def _leaves(value, under_secret: bool) -> Iterable[str]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _leaves(v, under_secret or is_secret_name(k))
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v, under_secret)
    elif under_secret and value is not None and not isinstance(value, bool):
        yield str(value)


def secret_values(secret_vars: Mapping, environ: Mapping[str, str] | None = None) -> list[str]:
    """The strings to keep out of artifacts and output: the leaves under secret-named keys of the
    secret extra vars, and the values of secret-named environment variables. Longest first, so that
    redaction replaces a secret before any secret it contains."""
    found = set()
    for key, value in secret_vars.items():
        found.update(_leaves(value, is_secret_name(key)))
    for key, value in (environ or {}).items():
        if is_secret_name(key):
            found.add(str(value))
    return sorted((s for s in found if len(s) >= MIN_SECRET_LEN), key=lambda s: (-len(s), s))


def redact(text: str, secrets: Iterable[str]) -> str:
    """Replace every secret (and its JSON-escaped form) in text."""
    for secret in secrets:
        text = text.replace(secret, REDACTED)
        escaped = json.dumps(secret)[1:-1]
        if escaped != secret:
            text = text.replace(escaped, REDACTED)
    return text


# ---- the run's files: secrets written where only the owner reads them, artifacts scrubbed of them ----
def scrub_tree(root: Path, secrets: list[str]) -> list[str]:
    """Overwrite every secret found in files under root; return the files that held one (relative)."""
    hits = []
    if not secrets:
        return hits
    needles = []
    for secret in secrets:
        for form in sorted({secret, json.dumps(secret)[1:-1]}):
            needles.append(form.encode("utf-8"))
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        data = path.read_bytes()
        if not any(n in data for n in needles):
            continue
        for needle in needles:
            data = data.replace(needle, REDACTED.encode())
        path.write_bytes(data)
        hits.append(str(path.relative_to(root)))
    return hits


def redact_command_env(artifacts: Path) -> None:
    """ansible-runner records the whole environment of the run in artifacts/<ident>/command:
    blank the values of secret-named variables there (CI secrets usually arrive as environment)."""
    for command_file in artifacts.glob("*/command"):
        try:
            data = json.loads(command_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        env = data.get("env") if isinstance(data, dict) else None
        if isinstance(env, dict):
            for key in env:
                if is_secret_name(key):
                    env[key] = REDACTED
            command_file.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def write_private_json(directory: Path, name: str, data: Mapping) -> Path:
    """Write data as JSON to a new file directory/name readable by its owner only; return its path."""
    path = directory / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    return path
