"""The batches of a rolling upgrade (playbooks/upgrade.yml): whole groups of hosts that serve one model together,
single hosts one at a time, and a clear refusal of a group that --limit splits. The last tests run upgrade.yml's own
batching plays (its first play and the roll play's hosts / serial, as written) through ansible-playbook, to show
that ansible-core really cuts the roll into these batches."""
import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet.roll import (
    RollError, hosts_serving, roll_batches, roll_model_names, roll_serial)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))

HOSTS = ["s1", "g1a", "s2", "g2b", "g1b", "g2a", "s3"]
GROUPS = {"g1": ["g1a", "g1b"], "g2": ["g2a", "g2b"]}
HOST_GROUPS = {"s1": "", "g1a": "g1", "g1b": "g1", "g2a": "g2", "g2b": "g2", "s2": None, "s3": ""}


def test_single_hosts_roll_one_at_a_time_in_the_plays_order():
    assert roll_batches(["a", "b", "c"], {}, {}) == [["a"], ["b"], ["c"]]
    assert roll_serial(roll_batches(["a", "b", "c"], {}, {})) == [1, 1, 1]


def test_a_group_is_one_batch_in_rank_order_at_its_first_hosts_place():
    batches = roll_batches(HOSTS, HOST_GROUPS, GROUPS)
    # g2's first host in the play is g2b, but the group's rank order (leader g2a first) is kept inside the batch.
    assert batches == [["s1"], ["g1a", "g1b"], ["s2"], ["g2a", "g2b"], ["s3"]]
    assert roll_serial(batches) == [1, 2, 1, 2, 1]
    flat = [h for b in batches for h in b]
    assert sorted(flat) == sorted(HOSTS) and len(flat) == len(set(flat))


def test_batches_of_the_batched_order_are_the_same_batches():
    """upgrade.yml computes the batches again from the ordered host list for serial: they must not move."""
    batches = roll_batches(HOSTS, HOST_GROUPS, GROUPS)
    ordered = [h for b in batches for h in b]
    assert roll_batches(ordered, HOST_GROUPS, GROUPS) == batches


def test_upgrade_models_as_key_value_or_json_are_the_same_names():
    """-e upgrade_models=[a,b] arrives as the string "[a,b]": taken as a list, never matched by substring."""
    assert roll_model_names("[chat, embed]") == ["chat", "embed"]
    assert roll_model_names("chat") == ["chat"]
    assert roll_model_names(["chat", "embed"]) == ["chat", "embed"]
    assert roll_model_names("['chat','embed']") == ["chat", "embed"]
    assert roll_model_names(None) == [] and roll_model_names("") == [] and roll_model_names("[]") == []
    with pytest.raises(RollError, match=r"upgrade_models must be a list.*got 3"):
        roll_model_names(3)


def test_a_roll_of_some_models_restarts_only_the_hosts_that_serve_them():
    served = {"h1": ["chat", "embed"], "h2": ["chat"], "h3": ["rerank"]}
    assert hosts_serving(["h1", "h2", "h3"], served, ["embed"]) == ["h1"]
    assert hosts_serving(["h1", "h2", "h3"], served, ["chat"]) == ["h1", "h2"]
    assert hosts_serving(["h3", "h1", "h2"], served, ["rerank", "embed"]) == ["h3", "h1"]
    assert hosts_serving(["h1", "h2", "h3"], served, []) == ["h1", "h2", "h3"]


def test_a_roll_of_a_model_no_host_serves_is_refused_naming_what_they_serve():
    with pytest.raises(RollError) as err:
        hosts_serving(["h1", "h2"], {"h1": ["chat", "embed"], "h2": ["chat"]}, ["embd", "chat"])
    text = str(err.value)
    assert "upgrade_models names embd," in text and "they serve: chat, embed" in text
    assert "Nothing was changed" in text


def test_a_group_split_by_the_limit_is_refused_naming_it_and_the_fix():
    with pytest.raises(RollError) as err:
        roll_batches(["s1", "g1a"], HOST_GROUPS, GROUPS)
    text = str(err.value)
    assert "llmfleet_model_group 'g1'" in text and "leaves out g1b" in text and "--limit g1" in text
    assert "Nothing was changed" in text


def test_a_group_the_inventory_lacks_is_refused():
    with pytest.raises(RollError, match=r"llmfleet_model_group='g9' on g1a, but the inventory has no group 'g9'"):
        roll_batches(["g1a"], {"g1a": "g9"}, GROUPS)


def test_a_group_member_that_names_another_group_is_refused():
    with pytest.raises(RollError, match=r"g1b is in the inventory group 'g1'.*llmfleet_model_group is ''"):
        roll_batches(["g1a", "g1b"], {"g1a": "g1", "g1b": ""}, GROUPS)


INVENTORY = """
[gpu_nodes]
s1
g1a
s2
g2b
g1b
g2a
s3
[g1]
g1a
g1b
[g2]
g2a
g2b
[g1:vars]
llmfleet_model_group=g1
[g2:vars]
llmfleet_model_group=g2
[all:vars]
ansible_connection=local
"""


def _upgrade_batching_playbook(tmp_path):
    """upgrade.yml's first play as written, and its roll play's hosts / serial / failure settings as written, with
    tasks that only record each batch (the roll's real tasks need serving hosts)."""
    with open(os.path.join(ROOT, "playbooks", "upgrade.yml")) as handle:
        plays = yaml.safe_load(handle)
    first = plays[0]
    roll = [p for p in plays if p.get("serial") is not None][0]
    probe = {k: roll[k] for k in ("name", "hosts", "serial", "any_errors_fatal", "max_fail_percentage")}
    probe.update({"gather_facts": False, "vars": {"upgrade_model_names": roll["vars"]["upgrade_model_names"]}, "tasks": [
        {"name": "batch", "ansible.builtin.debug": {"msg": "{{ ansible_play_batch }}"}, "run_once": True},
        {"name": "models", "ansible.builtin.debug": {"msg": "{{ upgrade_model_names }}"}}]})
    path = tmp_path / "pb.yml"
    path.write_text(yaml.safe_dump([first, probe]))
    (tmp_path / "inventory.ini").write_text(INVENTORY)
    return path


def _run(tmp_path, *extra, inventory=None):
    pb = _upgrade_batching_playbook(tmp_path)
    inventory_file = tmp_path / "inventory.ini"
    if inventory is not None:
        inventory_file = tmp_path / "inventory.yml"
        inventory_file.write_text(inventory)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="json")
    r = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
                        "-i", str(inventory_file), "-e", "ansible_python_interpreter=%s" % sys.executable,
                        str(pb)] + list(extra), cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                       check=False)
    return r, json.loads(r.stdout)


def test_upgrade_yml_rolls_groups_as_one_batch_and_single_hosts_alone(tmp_path):
    r, out = _run(tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    batches = [list(task["tasks"][0]["hosts"].values())[0]["msg"] for task in out["plays"][1:]]
    assert batches == [["s1"], ["g1a", "g1b"], ["s2"], ["g2a", "g2b"], ["s3"]]


def test_upgrade_yml_with_a_limit_that_keeps_groups_whole(tmp_path):
    r, out = _run(tmp_path, "--limit", "g2,s3")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    batches = [list(task["tasks"][0]["hosts"].values())[0]["msg"] for task in out["plays"][1:]]
    assert batches == [["g2a", "g2b"], ["s3"]]


def test_upgrade_yml_refuses_a_limit_that_splits_a_group_before_the_roll(tmp_path):
    r, out = _run(tmp_path, "--limit", "s1,g1a")
    assert r.returncode != 0
    assert len(out["plays"]) == 1, "the roll must not start"
    result = list(out["plays"][0]["tasks"][0]["hosts"].values())[0]
    assert result.get("failed") and "leaves out g1b" in result["msg"] and "--limit g1" in result["msg"]


MANY_MODELS_INVENTORY = """
all:
  vars:
    ansible_connection: local
  children:
    gpu_nodes:
      hosts:
        gpu1:
          llmfleet_models: [{name: chat, model: org/chat}, {name: embed, model: org/embed, runner: pooling}]
        gpu2:
          llmfleet_models: [{name: chat, model: org/chat}]
        old:
          llmfleet_model: org/Legacy-7B
"""


def _batches(out):
    return [list(task["tasks"][0]["hosts"].values())[0]["msg"] for task in out["plays"][1:]]


@pytest.mark.parametrize("models, rolled", [
    ('{"upgrade_models": ["embed"]}', [["gpu1"]]),
    ("upgrade_models=[chat]", [["gpu1"], ["gpu2"]]),
    ("upgrade_models=Legacy-7B", [["old"]]),
    ("upgrade_models=[]", [["gpu1"], ["gpu2"], ["old"]]),
])
def test_upgrade_yml_rolls_only_the_hosts_that_serve_the_named_models(tmp_path, models, rolled):
    """The bug this fixes: -e upgrade_models=[embed] failed on gpu2, which serves no embed, after gpu1 had rolled."""
    r, out = _run(tmp_path, "-e", models, inventory=MANY_MODELS_INVENTORY)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert _batches(out) == rolled


def test_upgrade_yml_refuses_a_model_no_host_serves_before_the_roll(tmp_path):
    r, out = _run(tmp_path, "-e", "upgrade_models=[chat,rerank]", inventory=MANY_MODELS_INVENTORY)
    assert r.returncode != 0
    assert len(out["plays"]) == 1, "the roll must not start"
    result = list(out["plays"][0]["tasks"][0]["hosts"].values())[0]
    assert "upgrade_models names rerank" in result["msg"] and "they serve: Legacy-7B, chat, embed)" in result["msg"]


def test_upgrade_yml_rolls_on_each_host_only_the_named_models_it_serves(tmp_path):
    """A roll of [chat, embed]: gpu2 serves chat alone and rolls chat (the serve role refuses a name its host does
    not serve); gpu1 rolls both."""
    r, out = _run(tmp_path, "-e", "upgrade_models=[chat,embed]", inventory=MANY_MODELS_INVENTORY)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    names = {host: result["msg"] for play in out["plays"][1:] for host, result in play["tasks"][1]["hosts"].items()}
    assert names == {"gpu1": ["chat", "embed"], "gpu2": ["chat"]}
