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
