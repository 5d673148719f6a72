"""replica_state's model directories: the other models of a host are checked like the first."""
from ansible_collections.llmfleet.vllm.plugins.modules import replica_state as RS


def test_each_model_directory_is_checked_once_the_first_first(tmp_path):
    missing = str(tmp_path / "absent")
    p = {"model_dir": str(tmp_path), "model_dirs": [str(tmp_path), missing], "check_tokenizer": True}
    assert RS._model_dirs(p) == [str(tmp_path), missing]
    problems = [m for d in RS._model_dirs(p) for m in RS._model_problems(d, True)]
    assert any(missing in m for m in problems)
    assert RS._model_dirs({"model_dir": None, "model_dirs": []}) == []
