#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: config_files
short_description: Write a set of small files and their directories in one call, touching only what differs
description:
  - Ensures each directory of O(directories), then each file of O(files), with the given content, owner, group and
    mode. A file is rewritten only when its content differs (so its modification time tells when its content
    last changed); owner, group and mode are corrected in place.
  - One module call for what would otherwise be a C(template) or C(copy) task per file (two remote calls each even
    when nothing changes); render the content on the controller, for example with
    C(lookup('ansible.builtin.template', ...)).
  - A new content goes to a temporary file in the same directory that already has the final owner and mode, is
    validated (O(files[].validate)), then renamed over the old file, so a reader never sees a partial file and a
    secret file is never readable by others, not even for a moment.
  - Content is not logged by the module, but it travels in the task's arguments; give secrets as O(secret_files)
    (or set C(no_log) on the task, which hides its whole result, diff included).
version_added: "1.0.0"
options:
  directories:
    description: Directories to create (with their parents) before the files are written.
    type: list
    elements: dict
    default: []
    suboptions:
      path: {description: The directory., type: path, required: true}
      owner: {description: Its owner., type: str, default: root}
      group: {description: Its group., type: str, default: root}
      mode: {description: 'Its mode, an octal string such as C("0755").', type: raw, default: "0755"}
  files:
    description: Files to write; each one's directory must exist or be in O(directories).
    type: list
    elements: dict
    default: []
    suboptions:
      path: {description: The file., type: path, required: true}
      content: {description: Its whole content (text)., type: str, required: true}
      owner: {description: Its owner., type: str, default: root}
      group: {description: Its group., type: str, default: root}
      mode: {description: 'Its mode, an octal string such as C("0644").', type: raw, default: "0644"}
      validate:
        description:
          - A command run on the new content before it replaces the file, C(%s) standing for the temporary file's
            path (as the C(template) module's option). A failure leaves the old file as it was.
        type: str
  secret_files:
    description:
      - Files whose content is a secret (an API key, a token), written as O(files) are, and before them (the
        O(files[].validate) of a file may read one). Their content is never
        logged (the option's C(no_log)), and their diff, with O(files)' diffs in diff mode, says only that the
        content changed.
      - Lets one call write a role's secret files beside its other files without C(no_log) on the whole task, which
        would hide the other files' results too.
    type: list
    elements: dict
    default: []
    version_added: "1.0.0"
    suboptions:
      path: {description: The file., type: path, required: true}
      content: {description: Its whole content (text)., type: str, required: true}
      owner: {description: Its owner., type: str, default: root}
      group: {description: Its group., type: str, default: root}
      mode: {description: 'Its mode, an octal string such as C("0600").', type: raw, default: "0600"}
      validate:
        description: As O(files[].validate).
        type: str
author:
  - llmfleet maintainers (!UNKNOWN)
extends_documentation_fragment:
  - llmfleet.vllm.attributes
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  check_mode:
    support: full
    details: Reports what would change and writes nothing (validation is not run).
  diff_mode:
    support: full
    details: One diff per file whose content changes.
"""

EXAMPLES = r"""
- name: Write a replica's unit settings and run command
  llmfleet.vllm.config_files:
    directories:
      - {path: /etc/llmfleet}
    files:
      - path: /etc/llmfleet/vllm-0.unit.conf
        content: "{{ lookup('ansible.builtin.template', 'vllm.unit.conf.j2') }}"
      - path: /etc/llmfleet/vllm-0.run
        content: "{{ lookup('ansible.builtin.template', 'vllm.run.j2') }}"
        mode: "0750"
  register: written

- name: Restart when one of them changed
  ansible.builtin.debug:
    msg: "{{ written.changed_paths }}"
"""

RETURN = r"""
changed_paths:
  description: The directories and files created or changed (content, owner, group or mode), in the order given.
  returned: always
  type: list
  elements: str
  sample: [/etc/llmfleet/vllm-0.run]
content_changed_paths:
  description: The files whose content was written (a subset of RV(changed_paths)).
  returned: always
  type: list
  elements: str
created_paths:
  description: The directories and files that did not exist before (a subset of RV(changed_paths)).
  returned: always
  type: list
  elements: str
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_native


def _mode(module, value, path):
    """An octal string ("0644"); an int is taken as the mode's value, as YAML reads an unquoted 0644."""
    try:
        mode = value if isinstance(value, int) else int(str(value), 8)
        if not 0 <= mode <= 0o7777:
            raise ValueError(value)
        return mode
    except ValueError:
        module.fail_json(msg="mode %r of %s is not an octal mode such as '0644'" % (value, path))


def _ids(module, owner, group, path):
    import grp
    import pwd
    try:
        return pwd.getpwnam(owner).pw_uid, grp.getgrnam(group).gr_gid
    except KeyError as exc:
        module.fail_json(msg="%s: unknown owner or group %s on this host" % (path, to_native(exc)))


def _read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def _attributes_changed(module, path, uid, gid, mode):
    """Correct owner, group and mode in place; True when one was wrong."""
    st = os.lstat(path)
    wrong = st.st_uid != uid or st.st_gid != gid or (st.st_mode & 0o7777) != mode
    if wrong and not module.check_mode:
        os.chown(path, uid, gid)
        os.chmod(path, mode)
    return wrong


def _write(module, spec, data, uid, gid, mode):
    """Write data next to the file with its final owner and mode, validate it, rename it over the file."""
    path = spec["path"]
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".%s." % os.path.basename(path))
    try:
        os.fchown(fd, uid, gid)
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if spec.get("validate"):
            if "%s" not in spec["validate"]:
                module.fail_json(msg="validate for %s must contain %%s (the new file's path)" % path)
            rc, out, err = module.run_command(spec["validate"] % tmp)
            if rc != 0:
                module.fail_json(msg="%s was not changed: '%s' refused the new content: %s"
                                 % (path, spec["validate"], (err or out).strip()), rc=rc)
        os.rename(tmp, path)
        tmp = None
        if module.selinux_enabled():
            module.set_default_selinux_context(path, False)
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def _file_options(mode, secret):
    return dict(
        path=dict(type="path", required=True),
        content=dict(type="str", required=True, no_log=secret),
        owner=dict(type="str", default="root"),
        group=dict(type="str", default="root"),
        mode=dict(type="raw", default=mode),
        validate=dict(type="str"),
    )


class _Module(AnsibleModule):
    """AnsibleModule, except that the invocation it logs on the host (syslog / the journal) shows no secret file's
    content: the option's no_log hides an exact value, but the log line holds the list's repr, where a content's
    newlines are escaped and would no longer match it."""

    def _log_invocation(self):
        secret = self.params.get("secret_files")
        if not secret:
            return super(_Module, self)._log_invocation()
        self.params["secret_files"] = [dict(spec, content="NOT_LOGGING_PARAMETER") for spec in secret]
        try:
            return super(_Module, self)._log_invocation()
        finally:
            self.params["secret_files"] = secret


def _ensure_directories(module, changed_paths):
    """Create the directories that are missing and set the owner and mode of the others (their paths into
    changed_paths when anything changes); returns the paths created (or, in check mode, to be created)."""
    created_dirs = set()
    for spec in module.params["directories"]:
        path = spec["path"].rstrip("/") or "/"
        uid, gid = _ids(module, spec["owner"], spec["group"], path)
        mode = _mode(module, spec["mode"], path)
        if os.path.isdir(path):
            if _attributes_changed(module, path, uid, gid, mode):
                changed_paths.append(path)
            continue
        if os.path.lexists(path):
            module.fail_json(msg="%s exists and is not a directory" % path)
        changed_paths.append(path)
        created_dirs.add(path)
        if not module.check_mode:
            os.makedirs(path)
            os.chown(path, uid, gid)
            os.chmod(path, mode)
    return created_dirs


def _content_diff(path, old, spec, secret):
    """The diff of a file's content; a secret file's says only that it changed."""
    if secret:
        return dict(before_header=path, after_header=path, before="(secret content)\n" if old else "",
                    after="(secret content, changed)\n")
    return dict(before_header=path, after_header=path, before=to_native(old or b"", errors="surrogate_or_replace"),
                after=spec["content"])


def _ensure_file(module, spec, secret, created_dirs, changes):
    """Write one file whose content differs, or set its owner and mode; what changed goes into changes
    ({paths, content, diffs, created})."""
    path = spec["path"]
    uid, gid = _ids(module, spec["owner"], spec["group"], path)
    mode = _mode(module, spec["mode"], path)
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory) and not (module.check_mode and directory in created_dirs):
        module.fail_json(msg="%s: its directory %s does not exist (add it to directories)" % (path, directory))
    data = to_bytes(spec["content"], errors="surrogate_or_strict")
    old = _read(path)
    if old is not None and os.path.isdir(path):
        module.fail_json(msg="%s is a directory" % path)
    if old is None:
        changes["created"].append(path)
    if old != data:
        changes["paths"].append(path)
        changes["content"].append(path)
        if module._diff:
            changes["diffs"].append(_content_diff(path, old, spec, secret))
        if not module.check_mode:
            _write(module, spec, data, uid, gid, mode)
    elif _attributes_changed(module, path, uid, gid, mode):
        changes["paths"].append(path)


def main():
    module = _Module(
        argument_spec=dict(
            directories=dict(type="list", elements="dict", default=[], options=dict(
                path=dict(type="path", required=True),
                owner=dict(type="str", default="root"),
                group=dict(type="str", default="root"),
                mode=dict(type="raw", default="0755"),
            )),
            files=dict(type="list", elements="dict", default=[], options=_file_options("0644", secret=False)),
            # The list itself is not the secret (its paths and modes show in the result): each content is.
            secret_files=dict(type="list", elements="dict", default=[], no_log=False,
                              options=_file_options("0600", secret=True)),
        ),
        supports_check_mode=True,
    )
    changes = {"paths": [], "content": [], "diffs": [], "created": []}
    created_dirs = _ensure_directories(module, changes["paths"])
    # The secret files first: a file's validate may read one (the edge's configuration names its keys file).
    specs = [(spec, True) for spec in module.params["secret_files"]] + [(spec, False) for spec in module.params["files"]]
    for spec, secret in specs:
        _ensure_file(module, spec, secret, created_dirs, changes)

    changed_paths = changes["paths"]
    result = dict(changed=bool(changed_paths), changed_paths=changed_paths, content_changed_paths=changes["content"],
                  created_paths=[p for p in changed_paths if p in created_dirs] + changes["created"])
    if module._diff:
        result["diff"] = changes["diffs"]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
