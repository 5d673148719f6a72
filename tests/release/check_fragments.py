# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A change to plugins/ or roles/ comes with a changelog fragment (make changelog-lint; docs/RELEASING.md).

    python tests/release/check_fragments.py [--base REF] [--repo DIR]

Compares the working tree (committed, staged, unstaged and untracked files alike) with a base and fails when files
under plugins/ or roles/ changed but no fragment under changelogs/fragments/ was added or edited. A change users
do not notice still needs one, with only a `trivial:` section (antsibull-changelog leaves those out of the notes).

The base, first that applies:
  1. --base REF, else the environment's CHANGELOG_BASE (a CI that checks a branch against its target sets it);
     else, while a release is being made (changelogs/changelog.yaml changed but not committed), none: it passes;
  2. the branch's upstream (`@{upstream}`, e.g. origin/main of a clone), from where the branch left it, when the
     branch has commits the upstream does not and made no release since it left;
  3. the last release: the last commit that changed changelogs/changelog.yaml (antsibull-changelog release writes
     it, and consumes the fragments, so whatever changed since then is unreleased);
  4. none (no release in the history, or a shallow clone that does not reach it): nothing to compare, it passes.
A clean clone in CI (no upstream of its own, or HEAD equal to it) is checked against the last release.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import os
import subprocess
import sys

WATCHED = ("plugins/", "roles/")
FRAGMENTS = "changelogs/fragments/"
CHANGES_FILE = "changelogs/changelog.yaml"
FRAGMENT_SUFFIXES = (".yml", ".yaml")


def git(repo, *args, check=True):
    result = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise RuntimeError("git %s: %s" % (" ".join(args), result.stderr.strip()))
    return result.stdout.strip() if result.returncode == 0 else None


def choose_base(repo, explicit=None):
    """(commit, why) to compare the working tree with, or (None, why) when there is nothing to compare with."""
    if explicit:
        commit = git(repo, "rev-parse", "--verify", "--quiet", explicit + "^{commit}", check=False)
        if not commit:
            raise RuntimeError("base %r is not a commit of %s" % (explicit, repo))
        return commit, "the base asked for (%s)" % explicit
    if git(repo, "status", "--porcelain", "--", CHANGES_FILE):
        return None, "a release being made: %s changed in the working tree folds in every fragment" % CHANGES_FILE
    release = git(repo, "log", "-1", "--format=%H", "--", CHANGES_FILE, check=False)
    upstream = git(repo, "rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}", check=False)
    if upstream:
        fork = git(repo, "merge-base", "HEAD", upstream, check=False)
        released_since = release and git(repo, "merge-base", "--is-ancestor", fork, release, check=False) is not None
        if fork and fork != git(repo, "rev-parse", "HEAD") and not released_since:
            return fork, "where this branch left its upstream %s" % upstream
    if release:
        return release, "the last release (the last commit that changed %s)" % CHANGES_FILE
    return None, "no release in this history yet"


def changed_files(repo, base):
    """{path: status letter} of the working tree against base, untracked files (not ignored) as added."""
    changes = {}
    listing = git(repo, "diff", "--name-status", "--no-renames", base)
    for line in listing.splitlines():
        status, _tab, path = line.partition("\t")
        changes[path] = status[:1]
    for path in git(repo, "ls-files", "--others", "--exclude-standard").splitlines():
        changes[path] = "A"
    return changes


def needing_fragment(changes):
    return sorted(path for path in changes if path.startswith(WATCHED))


def fragments_written(changes):
    return sorted(path for path, status in changes.items()
                  if path.startswith(FRAGMENTS) and path.endswith(FRAGMENT_SUFFIXES) and status in ("A", "M"))


def check(repo, explicit_base=None):
    """(ok, message) for the working tree of repo."""
    base, why = choose_base(repo, explicit_base)
    if base is None:
        return True, "changelog fragments: nothing to compare with (%s)" % why
    changes = changed_files(repo, base)
    watched = needing_fragment(changes)
    fragments = fragments_written(changes)
    against = "against %s, %s" % (base[:12], why)
    if watched and not fragments:
        shown = "\n".join("  " + path for path in watched[:20])
        more = "\n  ... and %d more" % (len(watched) - 20) if len(watched) > 20 else ""
        return False, (
            "changelog fragments: %d file(s) under %s changed %s, and no fragment was added under %s:\n%s%s\n"
            "Add changelogs/fragments/<short-name>.yml saying what changed for users (docs/RELEASING.md), or, for a "
            "change users cannot notice, one with only a `trivial:` section."
            % (len(watched), " or ".join(WATCHED), against, FRAGMENTS, shown, more))
    return True, "changelog fragments: OK (%d watched file(s) changed, %d fragment(s) %s)" % (
        len(watched), len(fragments), against)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--base", default=os.environ.get("CHANGELOG_BASE") or None,
                        help="commit or ref to compare with (default: CHANGELOG_BASE, else upstream, else last release)")
    parser.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    args = parser.parse_args(argv)
    try:
        ok, message = check(args.repo, args.base)
    except RuntimeError as exc:
        print("changelog fragments: %s" % exc, file=sys.stderr)
        return 2
    print(message, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
