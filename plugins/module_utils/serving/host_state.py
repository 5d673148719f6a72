# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Parsing for llmfleet.vllm.host_state. Pure functions, no I/O.

  dpkg_states(text, names)   {package: {'installed': bool, 'status': 'ii', 'version': '...'}} from dpkg-query output
  unit_properties(text)      {Property: value} from `systemctl show --property=...` output
  path_state(path)           {exists, type, size, mode, mtime} of a path, a link not followed (reads the file system)
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

# The unit properties host_state and replica_state read (`systemctl show --property=...`).
UNIT_PROPERTIES = "LoadState,ActiveState,SubState,UnitFileState,NeedDaemonReload"

# What the module asks dpkg-query for: one line per package it knows, tab-separated.
DPKG_FORMAT = "${Package}\t${db:Status-Abbrev}\t${Version}\n"


def dpkg_states(text, names):
    """Each of names: installed (status 'ii', or 'hi' for a package held with apt-mark hold: state installed, no
    error), dpkg's status letters and version. A package dpkg does not know (dpkg-query prints nothing for it) is not
    installed, with status ''. A name asked with its architecture (libc6:amd64) is printed without it."""
    found = {}
    for line in str(text or "").splitlines():
        cols = line.split("\t")
        if len(cols) < 2 or not cols[0]:
            continue
        # Multi-arch packages print as name:arch; the caller asks by plain name.
        name = cols[0].split(":", 1)[0]
        status = cols[1].strip()
        installed = status in ("ii", "hi")
        found[name] = {"installed": installed, "status": status,
                       "version": cols[2].strip() if len(cols) > 2 and installed else ""}
    missing = {"installed": False, "status": "", "version": ""}
    return dict((name, found.get(name, found.get(name.split(":", 1)[0], missing))) for name in names)


def unit_properties(text):
    """`systemctl show` output -> {Property: value}."""
    return dict(line.split("=", 1) for line in str(text or "").splitlines() if "=" in line)


def path_state(path):
    """What is at path, as host_state's `paths` returns it: exists, type (file, directory, link, other; None when
    nothing is there), size, mode (octal string) and mtime. A link is not followed (its own state is returned)."""
    try:
        st = os.lstat(path)
    except OSError:
        return {"exists": False, "type": None, "size": None, "mode": None, "mtime": None}
    kind = ("link" if stat.S_ISLNK(st.st_mode) else "directory" if stat.S_ISDIR(st.st_mode)
            else "file" if stat.S_ISREG(st.st_mode) else "other")
    return {"exists": True, "type": kind, "size": st.st_size, "mode": "%04o" % stat.S_IMODE(st.st_mode),
            "mtime": st.st_mtime}
