"""The bind failure of a replica's published port (issue 16): dockerd's words, as the unit's journal shows them."""
import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent import diagnostics as D

JOURNAL = [
    "llmfleet-vllm@0.service: Scheduled restart job, restart counter is at 3.",
    "Starting vllm-0.service - vLLM OpenAI-compatible server, replica 0 (llmfleet.vllm)...",
    "docker: Error response from daemon: driver failed programming external connectivity on endpoint "
    "llmfleet-vllm-0 (5b1c0e2f9a): Error starting userland proxy: listen tcp4 0.0.0.0:8123: bind: address already "
    "in use.",
    "llmfleet-vllm@0.service: Control process exited, code=exited, status=125/n/a",
]


@pytest.mark.parametrize("line,port", [
    (JOURNAL[2], "8123"),
    ("Error starting userland proxy: listen tcp6 [::]:8001: bind: address already in use", "8001"),
    ("Bind for 0.0.0.0:8000 failed: port is already allocated", "8000"),
    ("ERROR [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use", None),
])
def test_bind_failure_is_port_in_use(line, port):
    findings = D.classify([line])
    assert findings and findings[0]["id"] == "port_in_use", findings
    if port:
        assert "port %s is already taken" % port in findings[0]["diagnosis"]
        assert "sport = :%s" % port in findings[0]["fix"]
