"""The names the collection gives its units, containers and files on a host are spelt in one place,
plugins/module_utils/host_agent/conventions.py; roles, templates and playbooks take them from the llmfleet.vllm.conventions lookup
and the replica_unit / replica_container filters (#38). Comments and documentation (README, argument_specs) may name
them; what a play runs or writes may not."""
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import expressions as E  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# The replica units (llmfleet-vllm@<name>.service), their containers (llmfleet-vllm-<name>), the edge, the watchdog.
SPELT = re.compile(r"llmfleet-vllm@|llmfleet-vllm-|llmfleet-edge\.service|llmfleet-watchdog\.(?:service|timer)")


def data_files():
    """Every file of roles/ and playbooks/ that a play runs or renders (not README, not argument_specs)."""
    paths = glob.glob(os.path.join(ROOT, "playbooks", "*.yml"))
    for part in ("tasks", "vars", "defaults", "handlers"):
        paths += glob.glob(os.path.join(ROOT, "roles", "*", part, "*.yml"))
    paths += glob.glob(os.path.join(ROOT, "roles", "*", "templates", "**", "*.j2"), recursive=True)
    return sorted(os.path.relpath(path, ROOT) for path in paths)


def spelt_out(path):
    """The places in one file that spell a shared name: the strings of a YAML file (its comments are not read), the
    lines of a template outside its {# comments #}."""
    full = os.path.join(ROOT, path)
    if path.endswith(".j2"):
        text = re.sub(r"\{#.*?#\}", "", open(full).read(), flags=re.S)
        return [line.strip() for line in text.splitlines() if SPELT.search(line)]
    return [text for text in E.strings(E.load(full)) if SPELT.search(text)]


def test_the_files_are_found():
    files = data_files()
    assert "roles/diagnose/tasks/main.yml" in files and "roles/monitoring/templates/llmfleet.rules.yml.j2" in files


def test_no_role_template_or_playbook_spells_a_shared_name():
    found = ["%s: %s" % (path, text) for path in data_files() for text in spelt_out(path)]
    assert found == [], ("Take the name from the llmfleet.vllm.conventions lookup or the replica_unit / "
                         "replica_container filters (plugins/module_utils/host_agent/conventions.py spells it):\n" + "\n".join(found))


def test_the_measure_finds_a_name_where_it_is_spelt(tmp_path, monkeypatch):
    # The test above can fail: a task that names the edge's unit is found, a comment that names it is not.
    roles = tmp_path / "roles" / "demo" / "tasks"
    roles.mkdir(parents=True)
    (roles / "main.yml").write_text("# restarts llmfleet-edge.service\n- name: Reload\n"
                                    "  ansible.builtin.systemd_service: {name: llmfleet-edge.service}\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", str(tmp_path))
    assert spelt_out("roles/demo/tasks/main.yml") == ["llmfleet-edge.service"]


def port_default_spelt(path):
    """The places in one defaults or vars file that spell the replicas' default port (8000) instead of taking it from
    the conventions lookup's replica_port_base: an int value 8000, or 8000 inside a string (its comments are not
    read)."""
    def walk(data):
        if isinstance(data, dict):
            for value in data.values():
                yield from walk(value)
        elif isinstance(data, list):
            for value in data:
                yield from walk(value)
        elif data == 8000 or (isinstance(data, str) and re.search(r"\b8000\b", data)):
            yield data
    return list(walk(E.load(os.path.join(ROOT, path))))


def test_the_replicas_default_port_is_spelt_once_in_the_conventions():
    # vllm_server_port_base's default and the benchmark's and the edge's fallbacks for a play without vllm_server.
    files = [path for path in data_files() if "/defaults/" in path or "/vars/" in path]
    found = ["%s: %s" % (path, value) for path in files for value in port_default_spelt(path)]
    assert found == [], "take it from lookup('llmfleet.vllm.conventions').replica_port_base:\n" + "\n".join(found)


def test_the_port_measure_finds_a_restated_default(tmp_path, monkeypatch):
    defaults = tmp_path / "roles" / "demo" / "defaults"
    defaults.mkdir(parents=True)
    (defaults / "main.yml").write_text("# 8000 by default\ndemo_port: 8000\n"
                                       "demo_url: \"http://127.0.0.1:{{ vllm_server_port_base | default(8000) }}\"\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", str(tmp_path))
    assert port_default_spelt("roles/demo/defaults/main.yml") == [
        8000, "http://127.0.0.1:{{ vllm_server_port_base | default(8000) }}"]


def test_the_default_port_reaches_the_roles_defaults_as_before(tmp_path):
    """vllm_server_port_base is 8000 (an int) by default, and the benchmark's URL and the edge's port follow it; in a
    play without the vllm_server role they fall back to the conventions' port (rendered by ansible-playbook)."""
    import json
    import subprocess

    defaults = [os.path.join(ROOT, "roles", role, "defaults", "main.yml") for role in ("benchmark", "loadbalancer")]
    playbook = tmp_path / "ports.yml"
    playbook.write_text(json.dumps([{
        "hosts": "localhost", "connection": "local", "gather_facts": False, "vars_files": files,
        "tasks": [{"ansible.builtin.debug": {"msg": "PORTS {{ %s | to_json }}" % shown}}]}
        for files, shown in (
            (defaults, "[benchmark_base_url, loadbalancer_edge_port]"),
            ([os.path.join(ROOT, "roles", "vllm_server", part, "main.yml") for part in ("vars", "defaults")] + defaults,
             "[vllm_server_port_base, vllm_server_port_base | type_debug, benchmark_base_url, loadbalancer_edge_port]"))]))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOCALHOST_WARNING="0")
    run = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                          str(playbook), "-e", "llmfleet_tls=false"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    shown = [json.loads(line.split("PORTS ", 1)[1].rstrip("'\" ")) for line in run.stdout.splitlines() if "PORTS " in line]
    assert shown == [["http://127.0.0.1:8000", 8000], [8000, "int", "http://127.0.0.1:8000", 8000]]
