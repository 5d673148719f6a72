"""The config_files module through ansible itself: content, owner and mode, check and diff mode, validation."""
import json
import os
import stat
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
ANSIBLE_BIN = os.path.dirname(sys.executable)


def _env():
    return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"),
                ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
                ANSIBLE_STDOUT_CALLBACK="json")


def run(args, *options):
    r = subprocess.run([os.path.join(ANSIBLE_BIN, "ansible"), "localhost", "-c", "local",
                        "-e", "ansible_python_interpreter=%s" % sys.executable,
                        "-m", "llmfleet.vllm.config_files", "-a", json.dumps(args)] + list(options),
                       cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120, check=False)
    return json.loads(r.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def _me():
    import grp
    import pwd
    return pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name


def test_writes_files_and_directories_once_then_reports_nothing_changed(tmp_path):
    owner, group = _me()
    conf = tmp_path / "etc" / "llmfleet"
    args = dict(directories=[dict(path=str(conf), owner=owner, group=group, mode="0750")],
                files=[dict(path=str(conf / "a.run"), content="run\n", owner=owner, group=group, mode="0750"),
                       dict(path=str(conf / "a.env"), content="KEY=1\n", owner=owner, group=group, mode="0600")])
    first = run(args)
    assert first["changed"] and first["changed_paths"] == [str(conf), str(conf / "a.run"), str(conf / "a.env")]
    assert first["created_paths"] == first["changed_paths"]
    assert (conf / "a.run").read_text() == "run\n"
    assert stat.S_IMODE(os.stat(conf / "a.env").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(conf).st_mode) == 0o750
    mtime = os.stat(conf / "a.run").st_mtime_ns
    again = run(args)
    assert not again["changed"] and again["changed_paths"] == [] and again["created_paths"] == []
    assert os.stat(conf / "a.run").st_mtime_ns == mtime, "an unchanged file must not be rewritten"
    # No temporary file is left next to the files.
    assert sorted(p.name for p in conf.iterdir()) == ["a.env", "a.run"]


def test_a_wrong_mode_is_corrected_in_place_and_new_content_replaces_the_file(tmp_path):
    owner, group = _me()
    path = tmp_path / "unit.conf"
    path.write_text("old\n")
    os.chmod(path, 0o666)
    mtime = os.stat(path).st_mtime_ns
    result = run(dict(files=[dict(path=str(path), content="old\n", owner=owner, group=group, mode="0644")]))
    assert result["changed"] and result["content_changed_paths"] == [] and result["created_paths"] == []
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644 and os.stat(path).st_mtime_ns == mtime
    result = run(dict(files=[dict(path=str(path), content="new\n", owner=owner, group=group)]))
    assert result["content_changed_paths"] == [str(path)] and path.read_text() == "new\n"


def test_check_mode_writes_nothing_and_diff_shows_the_change(tmp_path):
    owner, group = _me()
    path = tmp_path / "new" / "f.txt"
    args = dict(directories=[dict(path=str(path.parent), owner=owner, group=group)],
                files=[dict(path=str(path), content="hello\n", owner=owner, group=group)])
    result = run(args, "--check", "--diff")
    assert result["changed"] and not path.parent.exists()
    assert result["diff"] == [dict(before_header=str(path), after_header=str(path), before="", after="hello\n")]


def test_a_refused_validation_leaves_the_old_file_and_says_why(tmp_path):
    owner, group = _me()
    path = tmp_path / "edge.cfg"
    path.write_text("good\n")
    result = run(dict(files=[dict(path=str(path), content="bad\n", owner=owner, group=group,
                                  validate="grep -q good %s")]))
    assert result["failed"] and "was not changed" in result["msg"] and "grep -q good" in result["msg"]
    assert path.read_text() == "good\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["edge.cfg"]


def test_a_missing_directory_or_an_unknown_owner_fails_with_the_path(tmp_path):
    result = run(dict(files=[dict(path=str(tmp_path / "no" / "f"), content="x")]))
    assert result["failed"] and "does not exist" in result["msg"] and str(tmp_path / "no") in result["msg"]
    result = run(dict(files=[dict(path=str(tmp_path / "f"), content="x", owner="no-such-user-llmfleet")]))
    assert result["failed"] and "unknown owner or group" in result["msg"]
    assert not (tmp_path / "f").exists()


PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  vars:
    items_: [a, b]
    replica: {name: "0"}
  tasks:
    - ansible.builtin.template: {src: t.j2, dest: "{{ out }}/by-template"}
    - llmfleet.vllm.config_files:
        files:
          - path: "{{ out }}/by-lookup"
            content: "{{ lookup('ansible.builtin.template', 't.j2') }}"
"""

TEMPLATE = """# {{ ansible_managed }}
{% for i in items_ %}
item={{ i }}
{% endfor %}
{% if replica.name == '0' %}
first
{% endif %}
name={{ replica.name | quote }}

"""


def test_lookup_rendering_matches_the_template_module_byte_for_byte(tmp_path):
    """The roles render with lookup('template') for config_files: a collection upgrade must not rewrite a file
    (and restart a replica) only because the two render differently (trailing newlines, trim_blocks)."""
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "t.j2").write_text(TEMPLATE)
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    r = subprocess.run([os.path.join(ANSIBLE_BIN, "ansible-playbook"), str(tmp_path / "play.yml"),
                        "-e", "out=%s" % tmp_path, "-e", "ansible_python_interpreter=%s" % sys.executable],
                       cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stdout[-3000:]
    assert (tmp_path / "by-lookup").read_bytes() == (tmp_path / "by-template").read_bytes()


def test_secret_files_are_written_0600_and_their_content_is_never_shown(tmp_path):
    owner, group = _me()
    secret = "Bearer s3cret-key-that-must-not-leak"
    args = dict(files=[dict(path=str(tmp_path / "edge.cfg"), content="plain\n", owner=owner, group=group)],
                secret_files=[dict(path=str(tmp_path / "keys"), content=secret + "\n", owner=owner, group=group)])
    r = subprocess.run([os.path.join(ANSIBLE_BIN, "ansible"), "localhost", "-c", "local", "-vvv", "--diff",
                        "-e", "ansible_python_interpreter=%s" % sys.executable,
                        "-m", "llmfleet.vllm.config_files", "-a", json.dumps(args)],
                       cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert secret not in r.stdout + r.stderr
    result = json.loads(r.stdout[r.stdout.index("{"):])["plays"][0]["tasks"][0]["hosts"]["localhost"]
    # The secret first: a file's validate may read it.
    assert result["content_changed_paths"] == [str(tmp_path / "keys"), str(tmp_path / "edge.cfg")]
    assert (tmp_path / "keys").read_text() == secret + "\n"
    assert stat.S_IMODE(os.stat(tmp_path / "keys").st_mode) == 0o600
    # The plain file's diff shows its content; the secret's says only that it changed.
    assert [d["after"] for d in result["diff"]] == ["(secret content, changed)\n", "plain\n"]
    assert not run(args)["changed"]


def test_the_invocation_logged_on_the_host_shows_no_secret_content(tmp_path, monkeypatch):
    # What AnsibleModule writes to syslog / the journal ("Invoked with ..."): a secret's content would be there in
    # the list's repr, its newlines escaped, where the option's no_log cannot match it.
    from ansible.module_utils import basic
    from ansible.module_utils.testing import patch_module_args
    from ansible_collections.llmfleet.vllm.plugins.modules import config_files

    secret = "VLLM_API_KEY=s3cret-sentinel\nHF_TOKEN=hf-sentinel\n"
    logged = []
    monkeypatch.setattr(basic.AnsibleModule, "log", lambda self, msg, log_args=None: logged.append(msg))
    args = dict(files=[dict(path=str(tmp_path / "plain"), content="plain\n")],
                secret_files=[dict(path=str(tmp_path / "vllm-0.env"), content=secret)], _ansible_check_mode=True)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            config_files.main()
    assert logged and "Invoked with" in logged[0] and str(tmp_path / "vllm-0.env") in logged[0]
    assert "sentinel" not in " ".join(logged)
