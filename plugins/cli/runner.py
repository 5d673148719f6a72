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
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from ._collection import resolve_path
from .ee_setup import EE_SECRETS_FILE, ee_mount, ee_options_error, ee_playbook, fqcn_prefix, passed_env, prepare_ee
from .run_secrets import redact, redact_command_env, scrub_tree, secret_values, split_extravars, write_private_json
from .run_summary import build_summary


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
            paths.append(resolve_path(value, root, "inventory"))
    return paths, words


def _resolve_args(args, parser, root):
    """The run's inputs from the command line: {playbook, playbook_copy, mounts, cpath, inventories,
    inventory_words, extravars}; a bad one ends the program through parser.error."""
    from ._collection import collections_path

    try:
        if args.ee:
            playbook, playbook_copy = ee_playbook(args.playbook, root, fqcn_prefix(root))
            mounts = [ee_mount(m) for m in args.ee_mount]
            cpath = None
        else:
            playbook, playbook_copy = resolve_path(args.playbook, root, "playbook"), None
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


def _parse_command_line(argv):
    """(args, parser, the collection root); a bad combination of options ends the program through parser.error."""
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
    return args, parser, root


def _make_run_dirs(artifacts_dir):
    """A fresh run directory (under artifacts_dir, else the system temp dir) and a 0700 directory for the secret
    extra vars, never inside the run directory."""
    base = Path(artifacts_dir).resolve() if artifacts_dir else Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    private_data_dir = Path(tempfile.mkdtemp(prefix="llmfleet-run-", dir=base))
    secret_dir = Path(tempfile.mkdtemp(prefix="llmfleet-run-secrets-"))
    return private_data_dir, secret_dir


def _command_line(args, root, run, secret_vars, private_data_dir, secret_dir):
    """(the extra words of the ansible-playbook command line, ansible_runner's container options)."""
    cmdline = list(run["inventory_words"])
    container: dict = {}
    if args.ee:
        # Everything the container needs lies in the run directory, which it sees at /runner.
        words, container = prepare_ee(args, root, run, secret_vars, private_data_dir)
        cmdline += words
    elif secret_vars:
        cmdline += ["-e", "@" + str(write_private_json(secret_dir, "extravars.json", secret_vars))]
    if args.check:
        cmdline.append("--check")
    return cmdline, container


def _run_playbook(runner_run, args, root, run, public_vars, private_data_dir, output):
    """The playbook run through ansible-runner (runner_run: ansible_runner.run), cancelled on SIGTERM:
    (status, rc); ("error", 1) with the reason in the output when ansible-runner could not start it."""
    cmdline, container = run["cmdline"], run["container"]
    cancel = {"requested": False}

    def on_sigterm(signum, frame):  # CI cancels jobs with SIGTERM: stop Ansible, then clean up
        cancel["requested"] = True

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        result = runner_run(
            private_data_dir=str(private_data_dir), project_dir=None if args.ee else str(root),
            playbook=run["playbook"], inventory=run["inventories"] if run["inventories"] else [],
            extravars=public_vars or None, cmdline=shlex.join(cmdline) if cmdline else None,
            limit=args.limit, tags=args.tags, skip_tags=args.skip_tags, envvars=run["envvars"],
            suppress_env_files=True, quiet=True, event_handler=output.on_event,
            cancel_callback=lambda: cancel["requested"], timeout=args.timeout, **container,
        )
        return result.status, result.rc
    except Exception as exc:  # ansible-runner could not start the run: report it like a failed run
        output.lines.append(f"ansible-runner failed before the playbook ran: {type(exc).__name__}: {exc}")
        return "error", 1
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    # Imported here so that the pure helpers work without ansible-runner.
    import ansible_runner

    args, parser, root = _parse_command_line(argv)
    run = _resolve_args(args, parser, root)
    public_vars, secret_vars = split_extravars(run["extravars"])
    secrets = secret_values(secret_vars, os.environ)
    private_data_dir, secret_dir = _make_run_dirs(args.artifacts_dir)
    run["cmdline"], run["container"] = _command_line(args, root, run, secret_vars, private_data_dir, secret_dir)
    run["envvars"] = _envvars(args, root, run["cpath"])

    output = _Output(secrets, args.quiet)
    started = time.monotonic()
    warnings: list[str] = []
    try:
        status, rc = _run_playbook(ansible_runner.run, args, root, run, public_vars, private_data_dir, output)
    finally:
        elapsed = time.monotonic() - started
        kept = _clean_up(args, private_data_dir, secret_dir, secrets, warnings)

    summary = build_summary(
        output.events, status=status, rc=rc, elapsed_s=elapsed, playbook=run["playbook"], artifacts_dir=kept,
        secrets=secrets, stdout_tail="\n".join(output.lines), check=args.check, warnings=warnings,
    )
    text = json.dumps(summary, indent=2, sort_keys=True)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text + "\n", encoding="utf-8")
    return rc


if __name__ == "__main__":
    sys.exit(main())
