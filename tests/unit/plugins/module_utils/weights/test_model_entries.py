"""plugins/module_utils/weights/model_entries.py: the weights of every model of llmfleet_models - the refusals, the
directory of each model and adapter, which ones need work, what the role publishes and what a removed model left."""
import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import model_entries as ME
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.fleet import model_list as ML


def items_of(models, root="/srv/llmfleet/models"):
    checked = ML.model_list(models)
    assert checked["problems"] == []
    return ME.weights_items(checked["models"], root)


# ---------------------------------------------------------------- refusals
@pytest.mark.parametrize("entry, words", [
    ({"name": "chat", "model": "qwen3"}, ["llmfleet_models[0] (chat)", "source hf needs model as a hub repository",
                                          "'qwen3'"]),
    ({"name": "chat", "model": "a/b", "source": "modelscope"}, []),
    ({"name": "chat", "model": "/data/m", "source": "local"}, ["source local needs local_path", "host:/path"]),
    ({"name": "chat", "model": "x", "source": "archive", "local_path": ""},
     ["source archive needs local_path", "tar archive"]),
    ({"name": "chat", "model": "x", "source": "local", "local_path": "host:relative"}, ["absolute path after host:"]),
    ({"name": "chat", "model": "x", "source": "local", "local_path": "host:/mnt/nfs/m"}, []),
    ({"name": "chat", "model": "a/b", "weights_dir": "models/chat"}, ["weights_dir must be an absolute directory",
                                                                      "/srv/llmfleet/models/chat"]),
    ({"name": "chat", "model": "a/b", "weights_dir": "/"}, ["weights_dir must be an absolute directory"]),
])
def test_each_wrong_weights_input_is_named_with_its_entry_and_fix(entry, words):
    problems = ME.entry_problems([{"name": "ok", "model": "o/k"}, entry])
    if not words:
        assert problems == []
        return
    assert len(problems) == 1
    text = problems[0].replace("llmfleet_models[1]", "llmfleet_models[0]")
    for word in words:
        assert word in text


@pytest.mark.parametrize("adapter, words", [
    ({"name": "sql", "model": "acme/sql-lora"}, []),
    ({"name": "sql", "local_path": "/data/lora"}, []),
    ({"name": "sql"}, ["exactly one of model", "local_path"]),
    ({"name": "sql", "model": "a/b", "local_path": "/x"}, ["exactly one of model"]),
    ({"name": "sql", "model": "not-a-repo"}, ["hub repository owner/name", "'not-a-repo'"]),
    ({"name": "has space", "model": "a/b"}, ["must be the served name"]),
    ({"name": "chat", "model": "a/b"}, ["already taken by a model"]),
    ({"name": "sql", "modle": "a/b"}, ["'modle' is not known", "did you mean 'model'"]),
    ("sql", ["must be a mapping"]),
])
def test_each_wrong_adapter_is_named(adapter, words):
    problems = ME.entry_problems([{"name": "chat", "model": "q/c", "adapters": [adapter]}])
    for word in words:
        assert any(word in p for p in problems), problems
    assert bool(problems) == bool(words)
    assert all(p.startswith("llmfleet_models[0] (chat).adapters[0]") for p in problems)


def test_two_adapters_of_one_model_with_one_name_are_refused():
    problems = ME.entry_problems([{"name": "chat", "model": "q/c", "adapters": [
        {"name": "sql", "model": "a/b"}, {"name": "sql", "model": "a/c"}]}])
    assert problems == ["llmfleet_models[0] (chat).adapters[1]: name 'sql' is already taken by another adapter of "
                        "this model; clients pick an adapter by its name, rename it."]


def test_what_is_not_a_list_is_left_to_model_list():
    assert ME.entry_problems("chat") == [] and ME.entry_problems([None]) == []


# ---------------------------------------------------------------- items
def test_each_model_gets_its_directory_and_each_adapter_one_beside_it():
    items = items_of([
        {"name": "chat", "model": "Qwen/Qwen3-8B", "revision": "abc", "adapters": [{"name": "sql", "model": "a/sql"}]},
        {"name": "embed", "model": "Qwen/Qwen3-Embedding", "weights_dir": "/data/embed/", "source": "modelscope",
         "adapters": [{"name": "e1", "local_path": "loras/e1"}]},
        {"name": "local", "model": "x", "source": "local", "local_path": "/ctrl/m"},
        {"name": "onhost", "model": "x", "source": "archive", "local_path": "host:/nfs/m.tar"},
    ], root="/models/")
    by = dict((i["key"], i) for i in items)
    assert [i["key"] for i in items] == ["chat", "embed", "local", "onhost", "chat:sql", "embed:e1"]
    assert by["chat"]["dir"] == "/models/chat" and by["chat"]["repo_id"] == "Qwen/Qwen3-8B"
    assert by["chat"]["revision"] == "abc" and by["chat"]["hub"] and not by["chat"]["upload"]
    assert by["embed"]["dir"] == "/data/embed" and by["embed"]["source"] == "modelscope"
    assert by["chat:sql"] == dict(by["chat:sql"], kind="adapter", model="chat", source="hf", repo_id="a/sql",
                                  dir="/models/chat.adapters/sql")
    # An adapter from a hub takes its model's hub; one from a directory is uploaded from the controller.
    assert by["embed:e1"]["source"] == "local" and by["embed:e1"]["upload"]
    assert by["embed:e1"]["local_path"] == "loras/e1" and by["embed:e1"]["dir"] == "/data/embed.adapters/e1"
    assert by["local"]["upload"] and by["local"]["local_path"] == "/ctrl/m" and by["local"]["repo_id"] == ""
    assert not by["onhost"]["upload"] and by["onhost"]["archive_host_path"] == "/nfs/m.tar"
    assert by["onhost"]["archive_path"] == ""


def test_plan_options_hand_the_host_paths_to_the_module():
    items = items_of([{"name": "a", "model": "o/a"},
                      {"name": "b", "model": "x", "source": "local", "local_path": "host:/nfs/b"}])
    opts = ME.plan_options(items)
    assert opts[0] == {"key": "a", "dest": "/srv/llmfleet/models/a", "kind": "model", "upload": False,
                       "source": "hf", "repo_id": "o/a", "revision": None, "local_path": None, "archive_path": None}
    assert opts[1]["local_path"] == "/nfs/b" and opts[1]["repo_id"] is None
    assert ME.controller_dirs(items_of([{"name": "c", "model": "x", "source": "local", "local_path": "/ctl/c"},
                                        {"name": "d", "model": "x", "source": "archive", "local_path": "/ctl/d.tar"}
                                        ])) == ["/ctl/c"]


# ---------------------------------------------------------------- needing work
FILES = [{"path": "config.json", "size": 10}, {"path": "model.safetensors", "size": 100}]


def upload_state(key, origin, files=None, leftovers=()):
    return {"key": key, "changed": False, "marker": {"identity": {"origin": origin}, "files": FILES if files is None else files},
            "leftovers": list(leftovers)}


def test_only_the_items_the_host_found_incomplete_need_work():
    items = items_of([{"name": "a", "model": "o/a"}, {"name": "b", "model": "o/b"}, {"name": "c", "model": "o/c"}])
    states = [{"key": "a", "changed": False}, {"key": "b", "changed": True}]
    # c has no state (not checked): it goes through the fetch, which checks it.
    assert ME.items_needing_work(items, states) == ["b", "c"]
    assert ME.items_needing_work(items, [dict(s, changed=False) for s in states] + [{"key": "c"}]) == []


def test_a_controller_directory_the_host_holds_needs_no_upload():
    items = items_of([{"name": "m", "model": "x", "source": "local", "local_path": "/ctl/m/"}])
    tree = {"/ctl/m/": FILES + [{"path": ".cache/huggingface/x", "size": 3}]}
    assert ME.items_needing_work(items, [upload_state("m", "controller:/ctl/m")], tree) == []


@pytest.mark.parametrize("state, tree", [
    (upload_state("m", "controller:/ctl/other"), {"/ctl/m": FILES}),            # another origin
    (upload_state("m", "controller:/ctl/m"), {"/ctl/m": FILES[:1]}),            # a file less on the controller
    (upload_state("m", "controller:/ctl/m"), {"/ctl/m": [dict(FILES[0], size=11), FILES[1]]}),  # a size changed
    (upload_state("m", "controller:/ctl/m", leftovers=["/srv/.m.partial"]), {"/ctl/m": FILES}),  # interrupted
    (upload_state("m", "controller:/ctl/m"), {}),                               # nothing on the controller
])
def test_a_controller_directory_that_differs_is_uploaded(state, tree):
    items = items_of([{"name": "m", "model": "x", "source": "local", "local_path": "/ctl/m"}])
    assert ME.items_needing_work(items, [state], tree) == ["m"]


def test_a_controller_archive_always_goes_through_the_fetch_which_compares_its_size_and_time():
    items = items_of([{"name": "m", "model": "x", "source": "archive", "local_path": "/ctl/m.tar"}])
    assert ME.items_needing_work(items, [upload_state("m", "controller:/ctl/m.tar:1:2")], {}) == ["m"]


# ---------------------------------------------------------------- published, record, removed
def test_the_paths_are_published_per_model_and_per_adapter():
    items = items_of([{"name": "chat", "model": "o/c", "adapters": [{"name": "sql", "model": "a/s"}]},
                      {"name": "embed", "model": "o/e"}])
    assert ME.published_paths(items) == {
        "paths": {"chat": "/srv/llmfleet/models/chat", "embed": "/srv/llmfleet/models/embed"},
        "adapters": {"chat": {"sql": "/srv/llmfleet/models/chat.adapters/sql"}, "embed": {}}}


def test_a_model_gone_from_the_list_is_found_from_the_record_and_serving_json():
    items = items_of([{"name": "chat", "model": "o/c"}])
    record = {"models": [{"name": "chat", "dir": "/srv/llmfleet/models/chat"}, {"name": "old", "dir": "/srv/old/"}]}
    serving = {"models": [{"name": "chat", "model_path": "/srv/llmfleet/models/chat"},
                          {"name": "embed", "model_path": "/srv/llmfleet/models/embed"}]}
    removed = ME.removed_weights(items, record, serving)
    assert [r["name"] for r in removed] == ["embed", "old"]
    assert removed[1] == {"name": "old", "dir": "/srv/old", "note": "old at /srv/old",
                          "paths": ["/srv/old", "/srv/old.adapters", "/srv/.old.previous"]}


def test_a_directory_a_listed_model_still_uses_is_never_removed():
    items = items_of([{"name": "new", "model": "o/c", "weights_dir": "/srv/shared/chat"}])
    record = {"models": [{"name": "old", "dir": "/srv/shared/chat"}, {"name": "up", "dir": "/srv/shared"},
                         {"name": "bad", "dir": "relative"}]}
    assert ME.removed_weights(items, record, None) == []


def test_no_record_and_no_serving_json_remove_nothing():
    assert ME.removed_weights(items_of([{"name": "a", "model": "o/a"}]), None, None) == []


def test_the_record_keeps_removed_models_until_they_are_purged():
    items = items_of([{"name": "chat", "model": "o/c", "adapters": [{"name": "sql", "model": "a/s"}]}])
    removed = ME.removed_weights(items, {"models": [{"name": "old", "dir": "/srv/old"}]})
    kept = ME.weights_record(items, removed)
    assert kept == {"models": [{"name": "chat", "dir": "/srv/llmfleet/models/chat"}],
                    "removed": [{"name": "old", "dir": "/srv/old"}]}
    # The next run still finds it (and says where it is); once purged it is forgotten.
    assert [r["name"] for r in ME.removed_weights(items, kept)] == ["old"]
    assert ME.weights_record(items, removed, purged=True)["removed"] == []
