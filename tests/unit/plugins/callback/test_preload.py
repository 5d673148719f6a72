"""The preload callback (plugins/callback/preload.py): what it loads in the main process, so that the process each
task forks finds it loaded. A plugin the callback cannot load is left alone (the task reports it as before).

The loading is checked in a Python process of its own: it installs Ansible's collection loader, which must not
leak into the other tests' process."""
import json
import os
import subprocess
import sys
import textwrap

from ansible_collections.llmfleet.vllm.plugins.callback import preload

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

# Builds the inventory of a play (a group with community.docker's connection, one host overriding it with local),
# runs the callback's play start as ansible-playbook's main process would, and prints what got loaded.
SCRIPT = textwrap.dedent("""
    import json, os, sys
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.loader import connection_loader, filter_loader, init_plugin_loader
    from ansible.vars.manager import VariableManager
    init_plugin_loader([sys.argv[1]])
    from ansible_collections.llmfleet.vllm.plugins.callback import preload

    class Play:
        hosts = "gpu_nodes"
        def __init__(self, vm, connection):
            self._variable_manager = vm
            self.connection = connection

    loader = DataLoader()
    vm = VariableManager(loader=loader, inventory=InventoryManager(loader=loader, sources=[sys.argv[2]]))
    before = "ansible_collections.community.docker.plugins.connection.docker_api" in sys.modules
    preload.CallbackModule().v2_playbook_on_play_start(Play(vm, sys.argv[3] or None))
    print(json.dumps({"before": before,
                      "docker_api": "ansible_collections.community.docker.plugins.connection.docker_api" in sys.modules,
                      "connections": sorted(connection_loader._module_cache),
                      "filters": sorted(filter_loader._module_cache)}))
""")


def loaded(tmp_path, play_connection=""):
    (tmp_path / "hosts.yml").write_text(textwrap.dedent("""\
        all:
          children:
            gpu_nodes:
              vars: {ansible_connection: community.docker.docker_api}
              hosts: {a: {}, b: {ansible_connection: local}}
        """))
    r = subprocess.run([sys.executable, "-c", SCRIPT, os.path.join(ROOT, "collections"), str(tmp_path / "hosts.yml"),
                        play_connection], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.splitlines()[-1])


def test_connection_names_inventory_play_and_default_once_each():
    names = preload.connection_names(
        None, [{"ansible_connection": "community.docker.docker_api"}, {"ansible_connection": "community.docker.docker_api"},
               {}, {"ansible_connection": "local"}], "ssh")
    assert names == ["community.docker.docker_api", "local", "ssh"]


def test_connection_names_leave_templated_and_empty_values_to_the_task():
    inventory = [{"ansible_connection": "{{ lookup('env', 'C') }}"}, {"ansible_connection": ""},
                 {"ansible_connection": None}]
    names = preload.connection_names("{{ my_conn }}", inventory, "ssh")
    assert names == ["ssh"]


def test_play_start_loads_the_hosts_connection_plugins_and_the_collection_filters(tmp_path):
    got = loaded(tmp_path)
    assert not got["before"] and got["docker_api"]
    assert any(p.endswith(os.path.join("community", "docker", "plugins", "connection", "docker_api.py"))
               for p in got["connections"])
    assert any(p.endswith(os.path.join("plugins", "connection", "local.py")) for p in got["connections"])
    ours = sorted(f[:-3] for f in os.listdir(os.path.join(ROOT, "plugins", "filter")) if f.endswith(".py"))
    assert ours and all(any(p.endswith(os.path.join("plugins", "filter", name + ".py")) for p in got["filters"])
                        for name in ours)


def test_a_connection_that_cannot_be_loaded_is_left_to_the_task(tmp_path):
    # No exception: the task that uses it reports the error, as without the callback.
    got = loaded(tmp_path, "no.such.connection")
    assert got["docker_api"]
