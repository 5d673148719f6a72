"""llmfleet-run's command line (plugins/cli/runner.py): -e parsing. The summary: test_run_summary.py; secrets:
test_run_secrets.py; a run in an execution environment: test_runner_ee.py and test_ee_setup.py."""

import pytest

from ansible_collections.llmfleet.vllm.plugins.cli import runner


def test_parse_extra_var_forms(tmp_path):
    f = tmp_path / "vars.yml"
    f.write_text("llmfleet_model: org/name\nhub: {token: abc}\n")
    assert runner.parse_extra_var("a=1 b='two words'") == {"a": "1", "b": "two words"}
    assert runner.parse_extra_var(f"@{f}") == {"llmfleet_model": "org/name", "hub": {"token": "abc"}}
    assert runner.parse_extra_var('{"n": 3}') == {"n": 3}
    with pytest.raises(ValueError, match="expected key=value"):
        runner.parse_extra_var("justaword")
    with pytest.raises(ValueError, match="cannot read"):
        runner.parse_extra_var(f"@{tmp_path}/missing.yml")
