# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Putting a staged model directory in place, one writer at a time (model_fetch, known_good). Does I/O.

  FetchError                               anything the user must fix, with the message that says what
  place(staging, dest, keep_previous)      the atomic swap into dest (exchange_dirs), the old one removed or kept
  exchange_dirs(new, dest), previous_generation(dest)
  placement_lock(path, dest, progress_file), placement_unlock(handle)   the placement lock (flock)
  leftovers(staging, lock_path, progress_file), remove_leftovers(staging, progress_file)
  statvfs_free(path)                       free bytes of a filesystem
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import os
import shutil

from ansible_collections.llmfleet.vllm.plugins.module_utils.weights.fetch_staging import read_json


class FetchError(Exception):
    pass


def place(staging, dest, keep_previous=False):
    """Move staging into dest: a rename when dest is absent, else an atomic swap (renameat2 EXCHANGE) with
    a fallback to two renames; the old directory is removed afterwards, or, with keep_previous, kept as the one
    previous generation next to dest (.<name>.previous, replacing an older one), which the serve stage swaps back
    when the replicas cannot serve the new one. Files the new directory shares with the old (hard links of
    unchanged files) cost no space twice."""
    if not os.path.exists(dest):
        os.rename(staging, dest)
        return
    old = exchange_dirs(staging, dest)
    if keep_previous:
        previous = previous_generation(dest)
        if os.path.lexists(previous):
            shutil.rmtree(previous)
        os.rename(old, previous)
    else:
        shutil.rmtree(old)


def exchange_dirs(new, dest):
    """Put directory new in dest's place, atomically where the kernel can (renameat2 RENAME_EXCHANGE), else with
    two renames. Returns where dest's old directory is now (new's path after an exchange)."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = getattr(libc, "renameat2", None)
        if renameat2 is not None and renameat2(-100, new.encode(), -100, dest.encode(), 2) == 0:
            return new
    except (OSError, AttributeError):
        pass
    old = dest + ".old.%d" % os.getpid()
    os.rename(dest, old)
    os.rename(new, dest)
    return old


def previous_generation(dest):
    """Where place(keep_previous=True) keeps the directory that dest held before."""
    return os.path.join(os.path.dirname(dest), ".%s.previous" % os.path.basename(dest))


def statvfs_free(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def placement_lock(path, dest, progress_file):
    """An exclusive lock (flock) on path, with this process's id in it, until placement_unlock.

    A second writer into the same staging directory would corrupt it: a background fetch left running by an
    interrupted or failed play, or another ansible-playbook run on the same host. Raises FetchError naming the
    holder instead of waiting for it (its job may have no one following it any more). The holder removes the file
    when the directory is in place; a lock taken on a file removed meanwhile is taken again on the new one."""
    while True:
        handle = open(path, "a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (IOError, OSError) as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            handle.seek(0)
            holder = handle.read().strip()
            handle.close()
            raise FetchError("another model_fetch%s is placing %s now (a background fetch left by an interrupted or "
                             "failed run, or another ansible-playbook run on this host); nothing was changed. Let "
                             "it finish (its progress: %s) or stop it, then run again."
                             % (" (pid %s)" % holder if holder.isdigit() else "", dest, progress_file))
        try:
            same = os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
        except OSError:
            same = False
        if same:
            break
        handle.close()
    handle.seek(0)
    handle.truncate()
    handle.write("%d\n" % os.getpid())
    handle.flush()
    return handle


def placement_unlock(handle):
    """Remove the lock file (nothing is left next to the model directory), then release the lock."""
    try:
        os.unlink(handle.name)
    except OSError:
        pass
    handle.close()


def leftovers(staging, lock_path, progress_file):
    """What an interrupted or refused placement left next to the model directory: the staging directory, the lock
    file, the progress file (those that exist). A progress file alone that says "done" is a finished placement's,
    which model_fetch_wait reads last and the role then removes: not a leftover."""
    found = [path for path in (staging, lock_path) if os.path.lexists(path)]
    doc = read_json(progress_file, {}) if os.path.lexists(progress_file) else None
    if doc is not None and (found or not isinstance(doc, dict) or doc.get("phase") != "done"):
        found.append(progress_file)
    return found


def remove_leftovers(staging, progress_file):
    if os.path.isdir(staging) and not os.path.islink(staging):
        shutil.rmtree(staging)
    elif os.path.lexists(staging):
        os.unlink(staging)
    if os.path.lexists(progress_file):
        os.unlink(progress_file)
