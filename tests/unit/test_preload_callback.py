"""The preload callback (plugins/callback/preload.py): what it loads in the main process, so that the process each
task forks finds it loaded. A plugin the callback cannot load is left alone (the task reports it as before)."""
import os
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "collections"))

from ansible.inventory.manager import InventoryManager  # noqa: E402
from ansible.parsing.dataloader import DataLoader  # noqa: E402
from ansible.plugins.loader import connection_loader, filter_loader, init_plugin_loader  # noqa: E402
from ansible.vars.manager import VariableManager  # noqa: E402

init_plugin_loader([os.path.join(ROOT, "collections")])

from ansible_collections.llmfleet.vllm.plugins.callback import preload  # noqa: E402


def test_connection_names_inventory_play_and_default_once_each():
    names = preload.connection_names(
        None, [{"ansible_connection": "community.docker.docker_api"}, {"ansible_connection": "community.docker.docker_api"},
               {}, {"ansible_connection": "local"}], "ssh")
    assert names == ["community.docker.docker_api", "local", "ssh"]


def test_connection_names_leave_templated_and_empty_values_to_the_task():
    names = preload.connection_names("{{ my_conn }}", [{"ansible_connection": "{{ lookup('env', 'C') }}"},
                                                      {"ansible_connection": ""}, {"ansible_connection": None}], "ssh")
    assert names == ["ssh"]


class _Play:
    def __init__(self, variable_manager, hosts, connection=None):
        self._variable_manager = variable_manager
        self.hosts = hosts
        self.connection = connection


@pytest.fixture
def play(tmp_path):
    (tmp_path / "hosts.yml").write_text(textwrap.dedent("""\
        all:
          children:
            gpu_nodes:
              vars: {ansible_connection: community.docker.docker_api}
              hosts: {a: {}, b: {ansible_connection: local}}
        """))
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(tmp_path / "hosts.yml")])
    return _Play(VariableManager(loader=loader, inventory=inventory), "gpu_nodes")


def test_play_start_loads_the_hosts_connection_plugins_and_the_collection_filters(play):
    callback = preload.CallbackModule()
    callback.v2_playbook_on_play_start(play)
    loaded = set(connection_loader._module_cache)  # pylint: disable=protected-access
    assert any(p.endswith(os.path.join("community", "docker", "plugins", "connection", "docker_api.py")) for p in loaded)
    assert any(p.endswith(os.path.join("plugins", "connection", "local.py")) for p in loaded)
    assert "ansible_collections.community.docker.plugins.connection.docker_api" in sys.modules
    filters = set(filter_loader._module_cache)  # pylint: disable=protected-access
    ours = sorted(f[:-3] for f in os.listdir(os.path.join(ROOT, "plugins", "filter")) if f.endswith(".py"))
    assert ours and all(any(p.endswith(os.path.join("plugins", "filter", name + ".py")) for p in filters) for name in ours)


def test_a_connection_that_cannot_be_loaded_is_left_to_the_task(play):
    play.connection = "no.such.connection"
    preload.CallbackModule().v2_playbook_on_play_start(play)  # no exception: the task reports it, as before
