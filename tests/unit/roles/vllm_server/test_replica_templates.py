"""The replica files the role renders from the replica spec are, byte for byte, the ones it rendered before the spec
existed (fixtures/rendered, made by the templates of commit 1cc5b1e from the same inventory): a deployment made then
re-runs without a restart. The templates render with Jinja2 as Ansible sets it up (trim_blocks), the quote filter
being shlex.quote as in Ansible."""
import os
import shlex

import jinja2
import pytest

from ansible_collections.llmfleet.vllm.plugins.lookup.conventions import names
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.replica_spec import host_spec

from .replica_scenarios import FIXTURES, ROLE, role_defaults, scenarios

SCENARIOS = scenarios()


def _env():
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROLE, "templates")), trim_blocks=True,
                             keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters["quote"] = lambda value: shlex.quote(str(value))
    return env


def _variables(spec, extra):
    variables = dict(role_defaults())
    variables.update(extra, ansible_managed="Ansible managed", ansible_facts={"systemd": {"version": 252}},
                     __vllm_server_spec=spec, spec=spec, __vllm_server_conventions=names())
    return variables


def _fixture(name, file):
    with open(os.path.join(FIXTURES, name, file)) as fh:
        return fh.read()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_each_replica_file_is_what_the_role_rendered_before(name):
    host, models, extra = SCENARIOS[name]
    spec = host_spec(host, models)
    env = _env()
    for replica in spec["replicas"]:
        variables = _variables(spec, extra)
        variables["replica"] = replica
        for prefix, template in (("run", "vllm.run.j2"), ("conf", "vllm.unit.conf.j2"), ("env", "vllm.env.j2")):
            rendered = env.get_template(template).render(variables)
            assert rendered == _fixture(name, "%s-%s" % (prefix, replica["name"])), (template, replica["name"])


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_unit_template_is_what_the_role_rendered_before(name):
    host, models, extra = SCENARIOS[name]
    rendered = _env().get_template("llmfleet-vllm@.service.j2").render(_variables(host_spec(host, models), extra))
    assert rendered == _fixture(name, "unit")


def test_a_changed_input_changes_the_run_file():
    """The comparison above can fail: another GPU set renders another run file."""
    host, models, extra = SCENARIOS["gpu-h1"]
    models = [dict(models[0], replicas=[{"name": "0", "port": 8000, "gpus": [0, 2]}])]
    spec = host_spec(host, models)
    variables = _variables(spec, extra)
    variables["replica"] = spec["replicas"][0]
    assert _env().get_template("vllm.run.j2").render(variables) != _fixture("gpu-h1", "run-0")
