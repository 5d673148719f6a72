"""plugins/filter/weights.py: weights_listing, what the model_weights role compares to decide whether a controller
copy must be uploaded again (roles/model_weights/tasks/from_controller.yml), and weights_tried_summary, the line it
prints of the peers a transfer tried."""
import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.filter.weights import FilterModule

listing = FilterModule().filters()["weights_listing"]


def test_each_model_file_is_its_path_and_size_sorted():
    files = [{"path": "model-00002.safetensors", "size": 20}, {"path": "config.json", "size": 1, "mode": "0644"}]
    assert listing(files) == ["config.json:1", "model-00002.safetensors:20"]


@pytest.mark.parametrize("bookkeeping", [".llmfleet-weights.json", ".llmfleet-verified.json", ".cache/huggingface/x"])
def test_the_collections_bookkeeping_is_left_out(bookkeeping):
    assert listing([{"path": bookkeeping, "size": 5}, {"path": "a.bin", "size": 2}]) == ["a.bin:2"]


def test_a_file_that_only_looks_like_bookkeeping_counts():
    assert listing([{"path": "sub/.llmfleet-weights.json", "size": 5}]) == ["sub/.llmfleet-weights.json:5"]


def test_a_size_change_changes_the_listing():
    assert listing([{"path": "a.bin", "size": 2}]) != listing([{"path": "a.bin", "size": 3}])


def test_what_is_no_list_is_refused():
    with pytest.raises(AnsibleFilterError):
        listing({"path": "a"})


tried_summary = FilterModule().filters()["weights_tried_summary"]


def test_the_peers_tried_are_one_line_each_with_its_reason():
    tried = [{"host": "gpu-02", "reason": "timed out"}, {"host": "gpu-03", "reason": "sha256 mismatch", "files": 2}]
    assert tried_summary(tried) == "gpu-02: timed out; gpu-03: sha256 mismatch"
    assert tried_summary([]) == ""
    with pytest.raises(AnsibleFilterError):
        tried_summary(None)


# ---------------------------------------------------------------- llmfleet_models (model_entries does the work)
F = FilterModule().filters()
MODELS = [{"name": "chat", "model": "Qwen/Qwen3-8B", "adapters": [{"name": "sql", "model": "acme/sql-lora"}]},
          {"name": "embed", "model": "Qwen/Qwen3-Embedding-0.6B", "weights_dir": "/data/embed"}]


def test_the_items_come_from_the_list_as_model_list_normalises_it():
    items = F["weights_items"](MODELS, "/srv/llmfleet/models")
    assert [(i["key"], i["dir"]) for i in items] == [
        ("chat", "/srv/llmfleet/models/chat"), ("embed", "/data/embed"),
        ("chat:sql", "/srv/llmfleet/models/chat.adapters/sql")]


@pytest.mark.parametrize("models, words", [
    ([{"name": "a", "model": "o/a"}, {"name": "a", "model": "o/b"}], "names must be unique"),
    ([{"name": "a", "model": "qwen"}], "source hf needs model as a hub repository"),
    ([], "empty list"),
])
def test_a_list_that_cannot_be_fetched_is_refused_with_its_sentences(models, words):
    with pytest.raises(AnsibleFilterError, match=words):
        F["weights_items"](models, "/srv/llmfleet/models")


def test_the_role_reads_the_rest_through_the_filters():
    items = F["weights_items"](MODELS, "/srv")
    assert F["weights_models_problems"](MODELS) == []
    assert F["weights_needing_work"](items, [{"key": "chat", "changed": False}, {"key": "embed", "changed": True},
                                             {"key": "chat:sql", "changed": False}]) == ["embed"]
    assert F["weights_published"](items)["adapters"] == {"chat": {"sql": "/srv/chat.adapters/sql"}, "embed": {}}
    assert F["weights_plan_options"](items)[2]["kind"] == "adapter"
    assert F["weights_controller_dirs"](items) == []
    removed = F["weights_removed"](items, {"models": [{"name": "old", "dir": "/srv/old"}]}, "not a dict")
    assert [r["name"] for r in removed] == ["old"]
    assert F["weights_record"](items, removed)["removed"] == [{"name": "old", "dir": "/srv/old"}]
    assert F["weights_record"](items, removed, True)["removed"] == []
    with pytest.raises(AnsibleFilterError, match="expects the items of weights_items"):
        F["weights_published"]([{"name": "x"}])


@pytest.mark.parametrize("served, expected", [("tiny", {"tiny": "/srv/m/tiny-qwen3-moe"}),
                                              ("", {"tiny-qwen3-moe": "/srv/m/tiny-qwen3-moe"})])
def test_the_one_model_publishes_its_served_name(served, expected):
    assert F["weights_shorthand_paths"]("/srv/m/tiny-qwen3-moe", served) == expected
