# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What must hold before a release is tagged (make release-check; docs/RELEASING.md).

    python tests/release/check_release.py TARBALL

Every problem is listed at once: galaxy.yml's version has its release in changelogs/changelog.yaml; no fragment
is left unreleased; pyproject.toml carries the same version; galaxy.yml's links are filled in (no example.invalid
placeholder); the tarball is of that version.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import sys
import tarfile

import yaml

PLACEHOLDER_HOST = "example.invalid"
LINKS = ("repository", "documentation", "homepage", "issues")


def release_problems(root, tarball):
    with open(os.path.join(root, "galaxy.yml")) as fh:
        galaxy = yaml.safe_load(fh)
    version = str(galaxy["version"])
    problems = []
    changes_path = os.path.join(root, "changelogs", "changelog.yaml")
    releases = {}
    if os.path.exists(changes_path):
        with open(changes_path) as fh:
            releases = (yaml.safe_load(fh) or {}).get("releases") or {}
    if version not in {str(v) for v in releases}:
        problems.append("changelogs/changelog.yaml has no release %s: run `antsibull-changelog release --version %s`"
                        % (version, version))
    fragments_dir = os.path.join(root, "changelogs", "fragments")
    left = sorted(n for n in os.listdir(fragments_dir) if n.endswith((".yml", ".yaml"))) \
        if os.path.isdir(fragments_dir) else []
    if left:
        problems.append("fragments not released yet: %s" % ", ".join(left))
    with open(os.path.join(root, "pyproject.toml")) as fh:
        match = re.search(r'(?m)^version = "([^"]+)"', fh.read())
    if not match or match.group(1) != version:
        problems.append("pyproject.toml's version is %s, galaxy.yml's %s" % (match and match.group(1), version))
    for key in LINKS:
        if PLACEHOLDER_HOST in str(galaxy.get(key) or PLACEHOLDER_HOST):
            problems.append("galaxy.yml %s is still a placeholder: fill in the real address" % key)
    if not os.path.exists(tarball):
        problems.append("no tarball at %s (make build)" % tarball)
    else:
        with tarfile.open(tarball) as tar:
            manifest = json.load(tar.extractfile("MANIFEST.json"))
        built = manifest["collection_info"]["version"]
        if built != version:
            problems.append("the tarball is version %s, galaxy.yml says %s" % (built, version))
    return problems


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: check_release.py TARBALL", file=sys.stderr)
        return 2
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    problems = release_problems(root, argv[0])
    for problem in problems:
        print("release check: %s" % problem, file=sys.stderr)
    if not problems:
        print("release check: OK (%s)" % os.path.basename(argv[0]))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
