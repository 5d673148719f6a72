"""A hub's answer about a repository and revision (module_utils.checks.hub_answers)."""
import json

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks import hub_answers as H


def test_hf_verdicts():
    ok = json.dumps({"id": "acme/m", "sha": "a" * 40})
    assert H.hf_revision_verdict(200, {}, ok, "acme/m", "main", "http://h") is None
    msg = H.hf_revision_verdict(404, {"X-Error-Code": "RevisionNotFound"}, "{}", "acme/m", "nope", "http://h")
    assert msg.startswith('model_weights_revision "nope" does not exist in acme/m')
    msg = H.hf_revision_verdict(401, {"X-Error-Code": "RepoNotFound"}, "{}", "acme/x", "", "http://h")
    assert "acme/x" in msg and "model_weights_repo_id" in msg
    assert H.looks_like_hf(401, {"x-error-code": "RepoNotFound"}, "")
    assert not H.looks_like_hf(404, {}, "Not Found")


def test_modelscope_verdicts_and_endpoint_kind():
    ok = json.dumps({"Code": 200, "Success": True, "Data": {"Files": []}})
    assert H.ms_revision_verdict(200, {}, ok, "acme/m", "", "http://m") is None
    bad = json.dumps({"Code": 10010205001, "Success": False, "Message": "revision v9 not found"})
    assert "model_weights_revision" in H.ms_revision_verdict(404, {}, bad, "acme/m", "v9", "http://m")
    assert H.ms_revision_verdict(404, {}, "<html>", "acme/m", "", "http://m") is None
    msg = H.endpoint_problem("modelscope", "http://hf-mirror:8090", "hf")
    assert "model_weights_endpoint http://hf-mirror:8090 is a Hugging Face endpoint" in msg
    assert "model_weights_source" in msg
    assert "does not answer as a ModelScope hub" in H.endpoint_problem("modelscope", "http://x", None)
