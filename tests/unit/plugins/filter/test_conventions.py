"""plugins/filter/conventions.py: the unit and the container of one replica, as module_utils/conventions.py names
them (the names the diagnose role reads and the serve role's group watch restarts)."""
from ansible_collections.llmfleet.vllm.plugins.filter.conventions import FilterModule

FILTERS = FilterModule().filters()


def test_a_replicas_unit_is_an_instance_of_the_template_unit():
    assert FILTERS["replica_unit"]("0") == "llmfleet-vllm@0.service"
    assert FILTERS["replica_unit"](1) == "llmfleet-vllm@1.service"


def test_a_replicas_container_carries_its_name():
    assert FILTERS["replica_container"]("0") == "llmfleet-vllm-0"
    assert FILTERS["replica_container"]("0") != FILTERS["replica_container"]("1")
