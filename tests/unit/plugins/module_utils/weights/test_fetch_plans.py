"""plugins/module_utils/weights/fetch_plans.py: every model directory of a host checked in one call (the work of
model_fetch_plan), on real directories: model_fetch's plan for what the host checks itself, the marker and the
leftovers for a controller upload, the JSON files the role reads beside them."""
import json

import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import fetch_plans as FP
from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import hub_fetch as H

from .test_hub_fetch import make_model, params, st_bytes


def make_adapter(root):
    root.mkdir(parents=True)
    (root / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 8}))
    (root / "adapter_model.safetensors").write_bytes(st_bytes({"lora_A": 64}))
    return root


def test_a_complete_directory_needs_nothing_and_an_empty_one_needs_its_files(tmp_path):
    src = make_model(tmp_path / "src")
    H.fetch(params(source="local", local_path=str(src), dest=str(tmp_path / "m" / "done")))
    items = [{"key": "done", "source": "local", "local_path": str(src), "dest": str(tmp_path / "m" / "done")},
             {"key": "new", "source": "local", "local_path": str(src), "dest": str(tmp_path / "m" / "new")}]
    done, new = FP.plan_items(items, {"max_workers": 2})
    assert done["key"] == "done" and not done["changed"] and "complete and verified" in done["msg"]
    assert new["changed"] and new["files_to_fetch"] == 4 and new["bytes_to_fetch"] == done["bytes_total"]
    # Only read: nothing was placed.
    assert not (tmp_path / "m" / "new").exists()


def test_an_adapter_is_checked_as_an_adapter(tmp_path):
    src = make_adapter(tmp_path / "lora")
    dest = tmp_path / "m" / "chat.adapters" / "sql"
    msg, placed = H.fetch(params(source="local", local_path=str(src), dest=str(dest), kind="adapter"))
    assert placed["changed"] and (dest / "adapter_config.json").exists()
    [state] = FP.plan_items([{"key": "chat:sql", "kind": "adapter", "source": "local", "local_path": str(src),
                              "dest": str(dest)}], {})
    assert state["kind"] == "adapter" and not state["changed"]


def test_a_model_without_its_tokenizer_is_not_placed_as_a_model(tmp_path):
    src = make_adapter(tmp_path / "lora")
    with pytest.raises(H.FetchError, match="config.json is missing"):
        H.fetch(params(source="local", local_path=str(src), dest=str(tmp_path / "m" / "x")))


def test_a_controller_upload_is_read_not_planned(tmp_path):
    src = make_model(tmp_path / "src")
    dest = tmp_path / "m" / "up"
    H.fetch(params(source="local", local_path=str(src), dest=str(dest), origin="controller:/ctl/up"))
    [placed] = FP.plan_items([{"key": "up", "upload": True, "source": "local", "dest": str(dest)}], {})
    # The progress file of a finished placement (the role removes it) is no leftover.
    assert placed["leftovers"] == [] and not placed["changed"]
    (tmp_path / "m" / ".up.lock").write_text("")
    [state] = FP.plan_items([{"key": "up", "upload": True, "source": "local", "dest": str(dest)}], {})
    assert state["marker"]["identity"]["origin"] == "controller:/ctl/up"
    assert sorted(f["path"] for f in state["marker"]["files"]) == sorted(p.name for p in src.iterdir())
    assert str(tmp_path / "m" / ".up.lock") in state["leftovers"] and state["changed"]
    [absent] = FP.plan_items([{"key": "x", "upload": True, "source": "local", "dest": str(tmp_path / "none")}], {})
    assert absent["changed"] and absent["marker"] == {"identity": None, "files": []}


def test_a_problem_names_the_item(tmp_path):
    with pytest.raises(H.FetchError, match=r"^gone: local_path .* is not a directory on the host"):
        FP.plan_items([{"key": "gone", "source": "local", "local_path": str(tmp_path / "no"),
                        "dest": str(tmp_path / "m" / "gone")}], {})


def test_the_state_files_are_read_whole_or_as_none(tmp_path):
    good, bad = tmp_path / "record.json", tmp_path / "serving.json"
    good.write_text(json.dumps({"models": [{"name": "a", "dir": "/srv/a"}]}))
    bad.write_text("{not json")
    assert FP.read_state_files([str(good), str(bad), str(tmp_path / "missing")]) == {
        str(good): {"models": [{"name": "a", "dir": "/srv/a"}]}, str(bad): None, str(tmp_path / "missing"): None}
