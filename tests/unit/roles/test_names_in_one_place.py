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

# Being converted in the replica-spec change (#38 item 3: vllm_server applies a tested replica spec, the balancer and
# the edge their configuration the same way), which takes these names from the conventions too; delete this set once
# that change is merged.
REPLICA_SPEC_EXEMPT = {
    "roles/vllm_server/tasks/main.yml",
    "roles/vllm_server/tasks/start.yml",
    "roles/vllm_server/tasks/rollback.yml",
    "roles/vllm_server/vars/main.yml",
    "roles/vllm_server/templates/",
    "roles/loadbalancer/tasks/",
    "roles/loadbalancer/templates/",
}


def data_files():
    """Every file of roles/ and playbooks/ that a play runs or renders (not README, not argument_specs)."""
    paths = glob.glob(os.path.join(ROOT, "playbooks", "*.yml"))
    for part in ("tasks", "vars", "defaults", "handlers"):
        paths += glob.glob(os.path.join(ROOT, "roles", "*", part, "*.yml"))
    paths += glob.glob(os.path.join(ROOT, "roles", "*", "templates", "**", "*.j2"), recursive=True)
    return sorted(os.path.relpath(path, ROOT) for path in paths)


def exempt(path):
    return any(path == entry or (entry.endswith("/") and path.startswith(entry)) for entry in REPLICA_SPEC_EXEMPT)


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
    found = ["%s: %s" % (path, text) for path in data_files() if not exempt(path) for text in spelt_out(path)]
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


def test_the_exempt_paths_exist():
    assert [entry for entry in REPLICA_SPEC_EXEMPT if not os.path.exists(os.path.join(ROOT, entry))] == []
