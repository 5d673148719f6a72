"""The replica_spec action plugin's one controller read: the image's flag table from the controller's flag cache."""
import json

from ansible_collections.llmfleet.vllm.plugins.action.replica_spec import cached_flag_help

INSPECT = [{"Id": "sha256:0123abcd", "RepoTags": ["vllm:1"], "Config": {"Entrypoint": ["vllm", "serve"]}}]


def test_the_kept_help_of_this_image_is_read_and_another_images_is_not(tmp_path):
    (tmp_path / "0123abcd.json").write_text(json.dumps({"image_id": "sha256:0123abcd", "help": "  --runner {pooling}\n"}))
    assert cached_flag_help(str(tmp_path), "vllm:1", INSPECT) == "  --runner {pooling}\n"
    other = [dict(INSPECT[0], Id="sha256:ffff")]
    assert cached_flag_help(str(tmp_path), "vllm:1", other) == ""
    assert cached_flag_help("", "vllm:1", INSPECT) == ""
    (tmp_path / "0123abcd.json").write_text("not json")
    assert cached_flag_help(str(tmp_path), "vllm:1", INSPECT) == ""
