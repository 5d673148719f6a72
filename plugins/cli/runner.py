# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""llmfleet-run: run one of this collection's playbooks from a CI pipeline and report in JSON.

    llmfleet-run PLAYBOOK -i INVENTORY [-e key=value | -e @file ...] [--limit PATTERN] [--tags TAGS]
                 [--check] [--artifacts-dir DIR] [--keep-artifacts] [--json-out FILE] [--timeout S]
                 [--ee IMAGE [--container-runtime docker|podman] [--ee-mount SRC:DST[:OPTS] ...]
                  [--pass-env NAME ...] [--ee-option OPTION ...]]

Each run gets a fresh ansible-runner private_data_dir (ansible-runner re-reads extra vars it finds in
an old one), runs with the collection root as its project directory (so llmfleet.vllm.* resolves to
this collection), prints a JSON summary on stdout (Ansible's own output goes to stderr) and exits
with the playbook's return code.

Secrets: extra vars whose names look secret (a word token, password, passwd, secret, apikey or api_key;
or ending in _pass)
are written to a 0600 file outside the run directory, handed to ansible-playbook as ``-e @file``
(so only the path appears in process arguments and in the runner's ``command`` artifact) and deleted
after the run. The run directory is removed unless --keep-artifacts; kept artifacts are scanned for
every secret value (secret extra vars and secret-named environment variables) and any hit is
overwritten in place and reported under ``warnings``.

--ee IMAGE runs the playbook inside an execution environment (ansible-runner's process isolation, the
container runtime starting IMAGE with the run directory mounted at /runner; docs/EE.md): this
collection's playbooks (site.yml, playbooks/<name>.yml, or a name such as llmfleet.vllm.plan) run by
name from the collection installed in the image; another playbook file is copied into the run's
project directory; inventories are copied into the run directory's inventory/. Only the environment variables named
with --pass-env reach the container. Secret extra vars go to a 0600 file in the run's env/ directory
(the container sees it at /runner/env/), given as ``-e @file`` and deleted after the run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
import time
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
MESSAGE_LIMIT = 2000
STREAM_TAIL_LIMIT = 600


# --------------------------------------------------------------------------------------------
# Pure helpers (unit-tested in tests/unit/plugins/cli/test_runner.py)
# --------------------------------------------------------------------------------------------
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


def parse_extra_var(arg: str, read_file=None) -> dict:
    """Parse one -e argument like ansible-playbook does: ``@file`` (YAML or JSON), a YAML/JSON
    mapping, or ``key=value`` pairs (values stay strings)."""
    import yaml

    arg = arg.strip()
    if arg.startswith("@"):
        path = arg[1:]
        reader = read_file or (lambda p: Path(p).read_text(encoding="utf-8"))
        try:
            text = reader(path)
        except OSError as exc:
            raise ValueError(f"-e {arg}: cannot read {path}: {exc.strerror}") from exc
        data = yaml.safe_load(text)
        if data is None:
            return {}
        if not isinstance(data, Mapping):
            raise ValueError(f"-e {arg}: the file must hold a mapping of variable names to values")
        return dict(data)
    if arg.startswith("{"):
        try:
            data = yaml.safe_load(arg)
        except yaml.YAMLError as exc:
            raise ValueError(f"-e {arg[:40]}...: not valid YAML/JSON: {exc}") from exc
        if not isinstance(data, Mapping):
            raise ValueError("-e: a YAML/JSON value must be a mapping of variable names to values")
        return dict(data)
    result = {}
    for token in shlex.split(arg):
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise ValueError(
                f"-e {token!r}: expected key=value, @file or a JSON/YAML mapping (e.g. -e llmfleet_model=org/name)"
            )
        result[key] = value
    return result


def _tail(text: str, limit: int) -> str:
    text = str(text).strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def failure_message(res) -> str:
    """A one-paragraph message from a failed/unreachable task result (event_data.res).

    A no_log result carries only ``censored``: that text is returned, nothing else.
    """
    if not isinstance(res, Mapping):
        return _tail(res, MESSAGE_LIMIT) if res else "task failed (no result recorded)"
    if "censored" in res:
        return str(res["censored"])
    parts = []
    msg = res.get("msg")
    if msg:
        parts.append(msg if isinstance(msg, str) else json.dumps(msg, sort_keys=True))
    rc = res.get("rc")
    if isinstance(rc, int) and rc != 0:
        parts.append(f"rc={rc}")
    results = res.get("results")
    if isinstance(results, list):
        for item in results:
            if isinstance(item, Mapping) and (item.get("failed") or item.get("unreachable")):
                label = item.get("_ansible_item_label", item.get("item"))
                parts.append(f"item {json.dumps(label, sort_keys=True, default=str)}: {failure_message(item)}")
    if res.get("stderr"):
        parts.append("stderr: " + _tail(res["stderr"], STREAM_TAIL_LIMIT))
    elif res.get("stdout") and isinstance(rc, int) and rc != 0:
        parts.append("stdout: " + _tail(res["stdout"], STREAM_TAIL_LIMIT))
    if not parts and res.get("exception"):
        parts.append(_tail(res["exception"], STREAM_TAIL_LIMIT))
    if not parts:
        return "task failed (no message)"
    return _tail("; ".join(parts), MESSAGE_LIMIT)


def host_stats(stats_event_data: Mapping | None) -> dict:
    """Per-host counters from a playbook_on_stats event's data."""
    if not stats_event_data:
        return {}
    fields = {
        "ok": "ok", "changed": "changed", "failed": "failures", "unreachable": "dark",
        "skipped": "skipped", "rescued": "rescued", "ignored": "ignored",
    }
    hosts = set()
    for source in list(fields.values()) + ["processed"]:
        hosts.update((stats_event_data.get(source) or {}).keys())
    return {
        host: {name: int((stats_event_data.get(source) or {}).get(host, 0)) for name, source in fields.items()}
        for host in sorted(hosts)
    }


def failed_tasks(events: Iterable[Mapping], hosts: Mapping[str, Mapping] | None = None) -> list[dict]:
    """Tasks that failed or found their host unreachable, in event order.

    Failures with ignore_errors are not failures. When the run's stats are known, failures on hosts
    whose stats count no failure and no unreachable (a ``rescue`` handled them) are left out too.
    """
    out = []
    for event in events:
        kind = event.get("event")
        if kind not in ("runner_on_failed", "runner_on_unreachable", "runner_on_async_failed"):
            continue
        data = event.get("event_data") or {}
        if data.get("ignore_errors"):
            continue
        host = data.get("host") or data.get("remote_addr") or "?"
        if hosts and host in hosts and not (hosts[host]["failed"] or hosts[host]["unreachable"]):
            continue
        msg = failure_message(data.get("res"))
        if kind == "runner_on_unreachable":
            msg = "UNREACHABLE: " + msg
        out.append({
            "host": host,
            "task": data.get("task") or "",
            "role": data.get("role") or None,
            "msg": msg,
        })
    return out


def build_summary(events: list[Mapping], *, status: str, rc: int, elapsed_s: float, playbook: str,
                  artifacts_dir: str | None, secrets: Iterable[str] = (), stdout_tail: str = "",
                  check: bool = False, warnings: Iterable[str] = ()) -> dict:
    """The JSON document llmfleet-run prints. Pure: events are ansible-runner event dicts."""
    secrets = list(secrets)
    stats = None
    for event in events:
        if event.get("event") == "playbook_on_stats":
            stats = event.get("event_data") or {}
    hosts = host_stats(stats)
    tasks = failed_tasks(events, hosts if stats is not None else None)
    for task in tasks:
        task["msg"] = redact(task["msg"], secrets)
    summary = {
        "status": status,
        "rc": rc,
        "elapsed_s": round(float(elapsed_s), 3),
        "playbook": playbook,
        "check_mode": bool(check),
        "hosts": hosts,
        "failed_tasks": tasks,
        "artifacts_dir": artifacts_dir,
    }
    if stats is None and rc != 0:
        # Ansible stopped before the play ran (syntax error, missing role, bad inventory...): the
        # only account of why is its output.
        summary["error"] = redact(_tail(stdout_tail, MESSAGE_LIMIT), secrets) or f"ansible-playbook exited {rc}"
    if warnings:
        summary["warnings"] = list(warnings)
    return summary


# --------------------------------------------------------------------------------------------
# Side effects: files, the run itself
# --------------------------------------------------------------------------------------------
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


def _write_private_json(directory: Path, name: str, data: Mapping) -> Path:
    path = directory / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    return path


def _resolve_path(value: str, root: Path, what: str) -> str:
    for candidate in (Path(value), root / value):
        if candidate.exists():
            return str(candidate.resolve())
    raise ValueError(f"{what} {value!r} not found (looked relative to {os.getcwd()} and to the collection root {root})")


FQCN_PLAYBOOK = re.compile(r"^[a-z0-9_]+\.[a-z0-9_]+\.[a-z0-9_]+$")
EE_SECRETS_FILE = "llmfleet-secret-extravars.json"


def ee_playbook(value: str, root: Path, fqcn_prefix: str) -> tuple[str, Path | None]:
    """How a playbook argument runs inside an execution environment: (name for ansible-playbook, file to
    copy into the run's project directory or None).

    This collection's own playbooks (site.yml, playbooks/<name>.yml, relative to the collection root or
    the current directory) run by name (``llmfleet.vllm.<name>``), so the copy installed in the image
    runs; a collection playbook name runs as given; any other existing file is copied (only that file).
    """
    if FQCN_PLAYBOOK.match(value) and not Path(value).exists():
        return value, None
    path = Path(_resolve_path(value, root, "playbook"))
    own = {(root / "site.yml").resolve(): "site"}
    playbooks = root / "playbooks"
    if playbooks.is_dir():
        own.update({p.resolve(): p.stem for p in playbooks.glob("*.yml")})
    if path in own:
        return f"{fqcn_prefix}.{own[path]}", None
    return path.name, path


def ee_mount(value: str) -> str:
    """Check one --ee-mount SRC:DST[:OPTS] (SRC must exist on this machine, DST be absolute)."""
    parts = value.split(":")
    if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
        raise ValueError(f"--ee-mount {value!r}: expected SRC:DST or SRC:DST:OPTIONS "
                         "(e.g. --ee-mount /var/run/docker.sock:/var/run/docker.sock)")
    if not Path(parts[0]).exists():
        raise ValueError(f"--ee-mount {value!r}: {parts[0]} does not exist on this machine")
    if not parts[1].startswith("/"):
        raise ValueError(f"--ee-mount {value!r}: the path in the container ({parts[1]}) must be absolute")
    return value


def passed_env(names: Iterable[str], environ: Mapping[str, str]) -> dict:
    """The variables --pass-env names (NAME, or PREFIX* for every variable starting with PREFIX) that are set."""
    out = {}
    for name in names:
        if name.endswith("*"):
            out.update({k: v for k, v in environ.items() if k.startswith(name[:-1])})
        elif name in environ:
            out[name] = environ[name]
    return out


def ee_options_error(args: argparse.Namespace) -> str | None:
    """The message for container options given without --ee (None when consistent)."""
    if args.ee:
        return None
    given = [flag for flag, value in (("--container-runtime", args.container_runtime), ("--ee-mount", args.ee_mount),
                                      ("--pass-env", args.pass_env), ("--ee-option", args.ee_option)) if value]
    if given:
        return f"{', '.join(given)} only apply with --ee IMAGE (a run in an execution environment)"
    return None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llmfleet-run",
        description="Run an llmfleet.vllm playbook through ansible-runner; print a JSON summary on stdout "
                    "(Ansible's output goes to stderr) and exit with the playbook's return code.",
    )
    parser.add_argument("playbook", help="playbook path (relative to the current directory or the collection root)")
    parser.add_argument("-i", "--inventory", action="append", required=True,
                        help="inventory path, or a comma-separated host list such as 'localhost,' (repeatable)")
    parser.add_argument("-e", "--extra-vars", action="append", default=[], metavar="VARS",
                        help="key=value, @file (YAML/JSON) or a JSON mapping (repeatable; later wins). Secret-looking "
                             "names (token, password, api_key, secret...) never reach the run's artifacts")
    parser.add_argument("--limit", help="limit the run to hosts matching this pattern")
    parser.add_argument("--tags", help="only run tasks tagged with these tags (comma-separated)")
    parser.add_argument("--skip-tags", help="skip tasks tagged with these tags (comma-separated)")
    parser.add_argument("--check", action="store_true", help="dry run (ansible-playbook --check)")
    parser.add_argument("--artifacts-dir", metavar="DIR",
                        help="directory in which each run's fresh private_data_dir is created (default: the system "
                             "temp dir); the run's directory is deleted afterwards unless --keep-artifacts")
    parser.add_argument("--keep-artifacts", action="store_true",
                        help="keep the run's private_data_dir (its artifacts are scrubbed of secret values)")
    parser.add_argument("--json-out", metavar="FILE", help="also write the JSON summary to FILE")
    parser.add_argument("--timeout", type=int, metavar="SECONDS",
                        help="cancel the playbook after this many seconds (status 'timeout', rc 254)")
    parser.add_argument("-q", "--quiet", action="store_true", help="do not stream Ansible's output to stderr")
    ee = parser.add_argument_group("execution environment (docs/EE.md)")
    ee.add_argument("--ee", metavar="IMAGE",
                    help="run inside this execution environment image (ansible-runner process isolation; "
                         "make ee builds one); the collection's playbooks run from the image")
    ee.add_argument("--container-runtime", choices=("docker", "podman"),
                    help="the container runtime that starts the EE (default: docker)")
    ee.add_argument("--ee-mount", action="append", default=[], metavar="SRC:DST[:OPTS]",
                    help="bind-mount into the EE (repeatable), e.g. /var/run/docker.sock:/var/run/docker.sock for "
                         "the community.docker connections, or a local model directory")
    ee.add_argument("--pass-env", action="append", default=[], metavar="NAME",
                    help="pass this environment variable into the EE (repeatable; PREFIX* for all that start "
                         "with PREFIX); nothing else of this environment reaches it")
    ee.add_argument("--ee-option", action="append", default=[], metavar="OPTION",
                    help="an extra option for the container runtime's run command (repeatable), e.g. --network=host")
    return parser


def _inventory_args(values: list[str], root: Path) -> tuple[list[str], list[str]]:
    """(inventory paths for ansible-runner, extra command-line words for host lists)."""
    paths, words = [], []
    for value in values:
        if "," in value and not Path(value).exists():
            words += ["-i", value]
        else:
            paths.append(_resolve_path(value, root, "inventory"))
    return paths, words


def _fqcn_prefix(root: Path) -> str:
    """namespace.name of the collection at root (galaxy.yml in a clone, MANIFEST.json when installed)."""
    import yaml

    if (root / "galaxy.yml").is_file():
        info = yaml.safe_load((root / "galaxy.yml").read_text(encoding="utf-8"))
    else:
        info = json.loads((root / "MANIFEST.json").read_text(encoding="utf-8"))["collection_info"]
    return f"{info['namespace']}.{info['name']}"


def _copy_inventories(paths: list[str], private_data_dir: Path) -> None:
    """Copy the inventories into the run directory's inventory/, the one path ansible-runner gives
    ansible-playbook in a container (/runner/inventory): one directory as it is, otherwise each into
    inventory/<n>-<name>/; a file inventory with its neighbouring group_vars/ and host_vars/."""
    target = private_data_dir / "inventory"
    for index, path in enumerate(paths):
        src = Path(path)
        if src.is_dir():
            dest = target if len(paths) == 1 else target / f"{index}-{src.name}"
            shutil.copytree(src, dest)
            continue
        dest = target if len(paths) == 1 else target / f"{index}-{src.stem}"
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / src.name)
        for neighbour in ("group_vars", "host_vars"):
            if (src.parent / neighbour).is_dir():
                shutil.copytree(src.parent / neighbour, dest / neighbour)


def _resolve_args(args, parser, root):
    """The run's inputs from the command line: {playbook, playbook_copy, mounts, cpath, inventories,
    inventory_words, extravars}; a bad one ends the program through parser.error."""
    from ._collection import collections_path

    try:
        if args.ee:
            playbook, playbook_copy = ee_playbook(args.playbook, root, _fqcn_prefix(root))
            mounts = [ee_mount(m) for m in args.ee_mount]
            cpath = None
        else:
            playbook, playbook_copy = _resolve_path(args.playbook, root, "playbook"), None
            mounts, cpath = [], collections_path(root)
        inventories, inventory_words = _inventory_args(args.inventory, root)
        extravars: dict = {}
        for arg in args.extra_vars:
            extravars.update(parse_extra_var(arg))
        if args.timeout is not None and args.timeout <= 0:
            raise ValueError("--timeout must be a positive number of seconds")
    except (ValueError, RuntimeError) as exc:
        parser.error(str(exc))
    return {"playbook": playbook, "playbook_copy": playbook_copy, "mounts": mounts, "cpath": cpath,
            "inventories": inventories, "inventory_words": inventory_words, "extravars": extravars}


def _prepare_ee(args, root, run, secret_vars, private_data_dir):
    """The run directory an execution environment sees at /runner (secrets file, playbook, ansible.cfg,
    inventories); returns (extra command line words, ansible_runner's container options)."""
    words = []
    env_dir = private_data_dir / "env"
    env_dir.mkdir(mode=0o700)
    if secret_vars:
        _write_private_json(env_dir, EE_SECRETS_FILE, secret_vars)
        words += ["-e", "@/runner/env/" + EE_SECRETS_FILE]
    project = private_data_dir / "project"
    project.mkdir(mode=0o700)
    if run["playbook_copy"] is not None:
        shutil.copy2(run["playbook_copy"], project / run["playbook_copy"].name)
    if (root / "ansible.cfg").is_file():
        shutil.copy2(root / "ansible.cfg", project / "ansible.cfg")
    _copy_inventories(run["inventories"], private_data_dir)
    run["inventories"] = []  # in a container, ansible-runner always passes -i /runner/inventory
    container = {
        "process_isolation": True,
        "process_isolation_executable": args.container_runtime or "docker",
        "container_image": args.ee,
        "container_volume_mounts": run["mounts"] or None,
        "container_options": args.ee_option or None,
    }
    return words, container


def _envvars(args, root, cpath):
    """The environment of the ansible-playbook run (in an execution environment: only what --pass-env names)."""
    if args.ee:
        envvars = passed_env(args.pass_env, os.environ)
        if (root / "ansible.cfg").is_file():
            envvars["ANSIBLE_CONFIG"] = "/runner/project/ansible.cfg"
    else:
        env_collections = [str(cpath)]
        if os.environ.get("ANSIBLE_COLLECTIONS_PATH"):
            env_collections.append(os.environ["ANSIBLE_COLLECTIONS_PATH"])
        envvars = {"ANSIBLE_COLLECTIONS_PATH": ":".join(env_collections)}
        # The ansible-playbook next to this interpreter first: the one installed with ansible-runner,
        # also when the virtualenv is not activated (CI calling .venv/bin/llmfleet-run directly).
        envvars["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", os.defpath)])
        if (root / "ansible.cfg").is_file():
            envvars["ANSIBLE_CONFIG"] = str(root / "ansible.cfg")
    if not sys.stderr.isatty():  # Ansible writes to a pty here; colours only help a terminal reader
        envvars["ANSIBLE_NOCOLOR"] = "1"
    return envvars


def _clean_up(args, private_data_dir, secret_dir, secrets, warnings):
    """After the run: secret files removed, artifacts scrubbed of secret values; the run directory kept
    (--keep-artifacts: its path returned) or removed (None)."""
    shutil.rmtree(secret_dir, ignore_errors=True)
    (private_data_dir / "env" / EE_SECRETS_FILE).unlink(missing_ok=True)
    # Scan also when the directory is about to go: a leak is worth a warning either way.
    redact_command_env(private_data_dir / "artifacts")
    hits = scrub_tree(private_data_dir, secrets)
    if hits:
        warnings.append("secret values were found in these artifacts and overwritten (mark the tasks that "
                        "print them no_log: true): " + ", ".join(hits))
    if args.keep_artifacts:
        return str(private_data_dir)
    shutil.rmtree(private_data_dir, ignore_errors=True)
    return None


class _Output:
    """The run's events, and the last 40 lines of its output with secrets masked (shown on stderr unless quiet)."""

    def __init__(self, secrets, quiet):
        self.secrets, self.quiet = secrets, quiet
        self.events: list[dict] = []
        self.lines: list[str] = []

    def on_event(self, event: dict) -> bool:
        self.events.append(event)
        text = event.get("stdout")
        if text:
            text = redact(text, self.secrets)
            self.lines.append(text)
            del self.lines[:-40]
            if not self.quiet:
                print(text, file=sys.stderr, flush=True)
        return True


def main(argv: list[str] | None = None) -> int:
    # Imported here so that --help and the pure helpers work without ansible-runner.
    import ansible_runner

    from ._collection import collection_root

    parser = build_parser()
    args = parser.parse_args(argv)
    problem = ee_options_error(args)
    if problem:
        parser.error(problem)
    try:
        root = collection_root()
    except (ValueError, RuntimeError) as exc:
        parser.error(str(exc))
    run = _resolve_args(args, parser, root)
    public_vars, secret_vars = split_extravars(run["extravars"])
    secrets = secret_values(secret_vars, os.environ)

    base = Path(args.artifacts_dir).resolve() if args.artifacts_dir else Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    private_data_dir = Path(tempfile.mkdtemp(prefix="llmfleet-run-", dir=base))
    secret_dir = Path(tempfile.mkdtemp(prefix="llmfleet-run-secrets-"))  # 0700, never inside the run dir

    cmdline = list(run["inventory_words"])
    container: dict = {}
    if args.ee:
        # Everything the container needs lies in the run directory, which it sees at /runner.
        words, container = _prepare_ee(args, root, run, secret_vars, private_data_dir)
        cmdline += words
    elif secret_vars:
        cmdline += ["-e", "@" + str(_write_private_json(secret_dir, "extravars.json", secret_vars))]
    if args.check:
        cmdline.append("--check")
    envvars = _envvars(args, root, run["cpath"])

    output = _Output(secrets, args.quiet)
    events, stdout_lines = output.events, output.lines
    cancel = {"requested": False}

    def on_sigterm(signum, frame):  # CI cancels jobs with SIGTERM: stop Ansible, then clean up
        cancel["requested"] = True

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    started = time.monotonic()
    warnings: list[str] = []
    status, rc = "error", 1
    try:
        result = ansible_runner.run(
            private_data_dir=str(private_data_dir), project_dir=None if args.ee else str(root),
            playbook=run["playbook"], inventory=run["inventories"] if run["inventories"] else [],
            extravars=public_vars or None, cmdline=shlex.join(cmdline) if cmdline else None,
            limit=args.limit, tags=args.tags, skip_tags=args.skip_tags, envvars=envvars,
            suppress_env_files=True, quiet=True, event_handler=output.on_event,
            cancel_callback=lambda: cancel["requested"], timeout=args.timeout, **container,
        )
        status, rc = result.status, result.rc
    except Exception as exc:  # ansible-runner could not start the run: report it like a failed run
        stdout_lines.append(f"ansible-runner failed before the playbook ran: {type(exc).__name__}: {exc}")
    finally:
        elapsed = time.monotonic() - started
        signal.signal(signal.SIGTERM, previous)
        kept = _clean_up(args, private_data_dir, secret_dir, secrets, warnings)

    summary = build_summary(
        events, status=status, rc=rc, elapsed_s=elapsed, playbook=run["playbook"], artifacts_dir=kept,
        secrets=secrets, stdout_tail="\n".join(stdout_lines), check=args.check, warnings=warnings,
    )
    text = json.dumps(summary, indent=2, sort_keys=True)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text + "\n", encoding="utf-8")
    return rc


if __name__ == "__main__":
    sys.exit(main())
