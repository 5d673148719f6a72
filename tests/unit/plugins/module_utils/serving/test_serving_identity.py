"""module_utils.serving_identity and its filters: what a replica serves as one digest, which replicas are known-good,
and the message a failed replacement ends with."""
import json
import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.filter.restart_verdicts import (
    llmfleet_known_good_replicas, llmfleet_replicas_named, llmfleet_rollback_message)
from ansible_collections.llmfleet.vllm.plugins.module_utils.serving import host_files
from ansible_collections.llmfleet.vllm.plugins.module_utils.serving.serving_identity import (
    listing_digest, manifest_digest, replica_files, to_keep)

SHA_A, SHA_B = "a" * 64, "b" * 64
MARKER = {"identity": {"source": "hf"}, "verified_at": 1.0,
          "files": [{"path": "config.json", "size": 10, "sha256": None, "git_sha1": "1" * 40},
                    {"path": "model-00001.safetensors", "size": 100, "sha256": SHA_A}]}


def test_the_manifest_digest_changes_with_any_file_content_size_or_name():
    base = manifest_digest(MARKER)
    assert base.startswith("sha256:") and len(base) == 71
    other_bytes = json.loads(json.dumps(MARKER))
    other_bytes["files"][1]["sha256"] = SHA_B
    resized = json.loads(json.dumps(MARKER))
    resized["files"][1]["size"] = 101
    renamed = json.loads(json.dumps(MARKER))
    renamed["files"][1]["path"] = "model-00002.safetensors"
    digests = set(manifest_digest(m) for m in (MARKER, other_bytes, resized, renamed))
    assert len(digests) == 4


def test_the_manifest_digest_ignores_when_it_was_verified_and_the_order_of_files():
    later = dict(MARKER, verified_at=99.0, files=list(reversed(MARKER["files"])))
    assert manifest_digest(later) == manifest_digest(MARKER)


def test_a_local_copy_is_told_apart_by_the_sha256_computed_when_it_was_verified():
    local = {"files": [{"path": "w.safetensors", "size": 5}], "digests": {"w.safetensors": SHA_A}}
    changed = {"files": [{"path": "w.safetensors", "size": 5}], "digests": {"w.safetensors": SHA_B}}
    assert manifest_digest(local) != manifest_digest(changed)
    assert manifest_digest({}) is None and manifest_digest({"files": []}) is None


def test_a_directory_without_the_record_is_digested_from_names_sizes_and_times():
    one = listing_digest({"a": (1, 10), "b": (2, 20)})
    assert one == listing_digest({"b": (2, 20), "a": (1, 10)})
    assert one != listing_digest({"a": (1, 11), "b": (2, 20)})
    assert listing_digest({}) is None


def test_model_dir_digest_reads_the_record_else_the_listing(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    assert host_files.model_dir_digest(str(d)) is None
    (d / "config.json").write_text("{}")
    plain = host_files.model_dir_digest(str(d))
    assert plain and plain.startswith("sha256:")
    (d / ".llmfleet-weights.json").write_text(json.dumps(MARKER))
    assert host_files.model_dir_digest(str(d)) == manifest_digest(MARKER)
    assert host_files.model_dir_digest(str(tmp_path / "absent")) is None


def test_replica_files_are_its_run_env_and_unit_settings():
    assert replica_files("/etc/llmfleet/", 0) == {"run": "/etc/llmfleet/vllm-0.run", "env": "/etc/llmfleet/vllm-0.env",
                                                  "unit.conf": "/etc/llmfleet/vllm-0.unit.conf"}


def state(name, health=200, action="started", running=True, manifest=None):
    return {"name": name, "health": health, "action": action,
            "container": {"exists": running, "running": running, "model_manifest": manifest}}


def test_only_replicas_that_serve_their_current_files_are_known_good():
    states = [state("0", manifest="sha256:x"), state("1", health=503), state("2", action="restarted"),
              state("3", running=False, health=None), state(4)]
    assert to_keep(states) == ["0", "4"]
    assert llmfleet_known_good_replicas(states) == [{"name": "0", "model_manifest": "sha256:x"},
                                                    {"name": "4", "model_manifest": None}]
    with pytest.raises(AnsibleFilterError):
        llmfleet_known_good_replicas({"0": {}})


def test_replicas_named_compares_names_as_strings_and_keeps_the_order():
    replicas = [{"name": 0, "port": 8000}, {"name": "1", "port": 8001}, {"name": 2, "port": 8002}]
    assert llmfleet_replicas_named(replicas, ["2", 0]) == [replicas[0], replicas[2]]
    assert llmfleet_replicas_named(replicas, []) == []


def test_the_rollback_message_says_what_failed_why_and_what_serves_again():
    msg = llmfleet_rollback_message("h1", ["0", "1"], ["0", "1"], ["0"], ["engine_unsupported_configuration"], 41.4)
    assert "replica(s) 0, 1 on h1 did not serve a completion" in msg
    assert "engine_unsupported_configuration" in msg
    assert "Rolled back in 41 s" in msg and "replica(s) 0 is serving again" in msg
    assert "replica(s) 1 were restored to their previous configuration but do not answer" in msg


def test_without_a_known_good_configuration_the_message_says_there_was_none():
    msg = llmfleet_rollback_message("h1", ["0"], [], [], [], 0)
    assert "No known failure signature matched" in msg and "no known-good configuration" in msg
    assert "serving again" not in msg


def test_a_file_verified_by_size_only_is_identified_by_the_file_on_disk():
    """A local copy has no reference hash: its record says 'size-only', so the file itself (mtime, inode) tells a
    new placement of other bytes with the same sizes from the same files left in place."""
    local = {"files": [{"path": "w.safetensors", "size": 5}], "digests": {"w.safetensors": "size-only"}}
    same = manifest_digest(local, {"w.safetensors": (100, 7)})
    assert same == manifest_digest(local, {"w.safetensors": (100, 7)})
    assert same != manifest_digest(local, {"w.safetensors": (100, 8)})
    assert same != manifest_digest(local, {"w.safetensors": (101, 7)})
    # A real content hash wins over the file's metadata.
    hashed = {"files": [{"path": "w.safetensors", "size": 5, "sha256": SHA_A}]}
    assert manifest_digest(hashed, {"w.safetensors": (1, 1)}) == manifest_digest(hashed, {"w.safetensors": (2, 2)})


def test_model_dir_digest_changes_when_a_size_only_file_is_placed_again(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    (d / "w.safetensors").write_text("AAAA")
    (d / ".llmfleet-weights.json").write_text(json.dumps(
        {"files": [{"path": "w.safetensors", "size": 4}], "digests": {"w.safetensors": "size-only"}}))
    first = host_files.model_dir_digest(str(d))
    assert first == host_files.model_dir_digest(str(d))
    (d / "w.safetensors.new").write_text("BBBB")
    os.rename(str(d / "w.safetensors.new"), str(d / "w.safetensors"))
    assert host_files.model_dir_digest(str(d)) != first
