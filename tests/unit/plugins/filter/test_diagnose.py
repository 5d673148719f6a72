"""plugins/filter/diagnose.py: what the diagnose role and the serve role's rollback message name of the findings
(diagnose_finding_ids)."""
import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.filter.diagnose import FilterModule

ids_of = FilterModule().filters()["diagnose_finding_ids"]


def test_each_finding_is_named_once_in_the_order_first_found():
    results = [{"replica": "0", "findings": [{"id": "oom"}, {"id": "port-in-use"}]},
               {"replica": "1", "findings": [{"id": "oom"}, {"id": "no-gpu"}]}]
    assert ids_of(results) == ["oom", "port-in-use", "no-gpu"]


def test_replicas_without_findings_name_nothing():
    assert ids_of([{"replica": "0", "findings": []}, {"replica": "1"}]) == []
    assert ids_of([]) == []


def test_what_is_no_list_of_results_is_refused():
    with pytest.raises(AnsibleFilterError):
        ids_of({"findings": []})
