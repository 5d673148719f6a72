"""plugins/lookup/weights_tree.py: the files of several controller directories, each listed on its own (filetree
merges the files of several roots, so two model directories with a config.json each would show one)."""
import os

from ansible_collections.llmfleet.vllm.plugins.lookup.weights_tree import LookupModule


def test_each_directory_is_listed_on_its_own_links_left_out(tmp_path):
    for name, size in (("a", 3), ("b", 5)):
        d = tmp_path / name
        (d / "sub").mkdir(parents=True)
        (d / "config.json").write_bytes(b"x" * size)
        (d / "sub" / ".hidden").write_bytes(b"y")
    os.symlink(str(tmp_path / "a" / "config.json"), str(tmp_path / "b" / "link.json"))
    [trees] = LookupModule().run([str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "none")], variables={})
    assert trees[str(tmp_path / "a")] == [{"path": "config.json", "size": 3}, {"path": "sub/.hidden", "size": 1}]
    assert trees[str(tmp_path / "b")] == [{"path": "config.json", "size": 5}, {"path": "sub/.hidden", "size": 1}]
    assert trees[str(tmp_path / "none")] == []


def test_a_relative_directory_is_taken_from_where_the_playbook_runs(tmp_path, monkeypatch):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "w.bin").write_bytes(b"12")
    monkeypatch.setenv("PWD", str(tmp_path))
    assert LookupModule().run(["m"], variables={}) == [{"m": [{"path": "w.bin", "size": 2}]}]
