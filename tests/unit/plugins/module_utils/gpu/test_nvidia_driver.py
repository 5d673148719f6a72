"""Unit tests for plugins/module_utils/gpu/nvidia_driver.py against real H200 captures (and minimal edits of them)."""
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu import nvidia_driver as nd

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "nvidia")


def capture(case):
    with open(os.path.join(FIXTURES, case, "q.xml")) as handle:
        return handle.read()


def facts_for(case, nvswitch_devices=(), fm_packages=(), fm_service=None, service_manager="systemd"):
    return {
        "smi_path": "/usr/local/nvidia/bin/nvidia-smi", "searched": [], "smi_rc": 0, "smi_output": "",
        "parsed": nd.parse_smi_xml(capture(case)), "nvswitch_devices": list(nvswitch_devices),
        "fabricmanager_packages": list(fm_packages), "fabricmanager_service": fm_service,
        "service_manager": service_manager,
    }


# --- versions and the CUDA table -------------------------------------------------------------------

@pytest.mark.parametrize("left,right,expected", [
    ("580.159.04", "580.65.06", 1),    # numeric, not string, comparison: 159 > 65
    ("580.65.06", "580.65.06", 0),
    ("575.57.08", "580.65.06", -1),
    ("570.26", "570.26.0", 0),
    ("570.124.06", "570.26", 1),
])
def test_compare_versions_is_numeric(left, right, expected):
    assert nd.compare_versions(left, right) == expected


@pytest.mark.parametrize("bad", ["", "580.x", "r580", None, "580..1"])
def test_parse_version_rejects_garbage(bad):
    with pytest.raises(ValueError):
        nd.parse_version(bad)


@pytest.mark.parametrize("cuda,driver", [
    ("13.0", "580.65.06"), ("13.0.2", "580.65.06"), ("cuda13.0", "580.65.06"),
    ("12.9", "575.51.03"), ("12.9.1", "575.51.03"), ("12.8", "570.26"), ("13.1", "590.44.01"),
])
def test_min_driver_for_cuda(cuda, driver):
    assert nd.min_driver_for_cuda(cuda) == driver


def test_min_driver_for_unknown_cuda_says_what_to_set():
    with pytest.raises(ValueError, match="nvidia_driver_min_version"):
        nd.min_driver_for_cuda("12.7")
    with pytest.raises(ValueError, match="MAJOR.MINOR"):
        nd.min_driver_for_cuda("thirteen")


def test_table_is_monotonic():
    keys = sorted(nd.CUDA_MIN_DRIVER, key=nd.parse_version)
    drivers = [nd.CUDA_MIN_DRIVER[k] for k in keys]
    assert all(nd.compare_versions(a, b) < 0 for a, b in zip(drivers, drivers[1:]))


# --- parsing the real capture ----------------------------------------------------------------------

def test_parse_real_h200_capture():
    parsed = nd.parse_smi_xml(capture("h200x2"))
    assert parsed["driver_version"] == "580.159.04"
    assert parsed["cuda_version"] == "13.0"
    assert [g["index"] for g in parsed["gpus"]] == [0, 1]
    assert [g["pci_bus_id"] for g in parsed["gpus"]] == ["00000000:00:06.0", "00000000:00:07.0"]
    gpu0 = parsed["gpus"][0]
    assert gpu0["name"] == "NVIDIA H200"
    assert gpu0["uuid"] == "GPU-28a561a1-a94b-74a8-973e-2ea7f032d46a"
    assert gpu0["persistence_mode"] is True
    assert gpu0["mig_current"] == "Disabled"
    assert (gpu0["fabric_state"], gpu0["fabric_status"]) == ("Completed", "Success")


def test_parse_rejects_non_xml():
    with pytest.raises(ValueError):
        nd.parse_smi_xml("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")


def test_nvswitch_host_needs_a_non_empty_listing():
    assert nd.is_nvswitch_host([]) is False          # the lent H200 hosts: directory exists, empty
    assert nd.is_nvswitch_host(None) is False
    assert nd.is_nvswitch_host(["0000:05:00.0"]) is True


@pytest.mark.parametrize("plan,expected", [
    (None, None), ({}, None), ({"replicas": [[0, 1]]}, [0, 1]), ({"replicas": [[0], [1]]}, [0, 1]),
    ({"replicas": [{"gpus": [2, 3]}, {"gpu_indices": [0]}]}, [0, 2, 3]), ({"replicas": [1]}, [1]),
])
def test_planned_whole_gpus(plan, expected):
    assert nd.planned_whole_gpus(plan) == expected


# --- the decisions ---------------------------------------------------------------------------------

def test_real_h200_host_passes_every_check():
    checks = nd.evaluate(facts_for("h200x2", service_manager="none"), image_cuda_version="13.0")
    assert nd.failures(checks) == []
    assert nd.warnings(checks) == []
    assert "580.159.04 >= 580.65.06" in checks["driver_version"]["message"]
    # No systemd there: the fabric check must say so instead of crashing; the fabric is managed elsewhere.
    assert "cannot check service state: no systemd" in checks["fabric_manager"]["message"]
    assert "managed outside this host" in checks["fabric_manager"]["message"]


def test_old_driver_is_refused_with_the_fix():
    checks = nd.evaluate(facts_for("old-driver"), image_cuda_version="13.0")
    failed = nd.failures(checks)
    assert len(failed) == 1 and failed[0].startswith("driver_version:")
    assert "570.172.08 is older than 580.65.06" in failed[0]
    assert "unsatisfied condition: cuda>=13.0" in failed[0]
    assert "branch 580 or newer" in failed[0]


def test_old_driver_is_fine_for_a_cuda_12_8_image():
    checks = nd.evaluate(facts_for("old-driver"), image_cuda_version="12.8")
    assert nd.failures(checks) == []


def test_min_driver_override_wins_over_the_table():
    checks = nd.evaluate(facts_for("h200x2"), image_cuda_version="12.9", min_driver_version="590.0")
    assert "older than 590.0 (set by nvidia_driver_min_version)" in nd.failures(checks)[0]


def test_mig_on_a_gpu_planned_whole_is_refused():
    checks = nd.evaluate(facts_for("mig-on"), image_cuda_version="13.0", plan={"replicas": [[0, 1]]})
    failed = nd.failures(checks)
    assert len(failed) == 1 and failed[0].startswith("mig_mode:")
    assert "GPU(s) 0" in failed[0] and "nvidia-smi -i 0 -mig 0" in failed[0]


def test_mig_on_a_gpu_the_plan_leaves_out_is_only_reported():
    checks = nd.evaluate(facts_for("mig-on"), image_cuda_version="13.0", plan={"replicas": [[1]]})
    assert nd.failures(checks) == []
    assert "enabled on [0]" in checks["mig_mode"]["message"]


def test_mig_without_a_plan_treats_every_gpu_as_whole():
    checks = nd.evaluate(facts_for("mig-on"), image_cuda_version="13.0")
    assert "no llmfleet_plan given" in nd.failures(checks)[0]
    checks = nd.evaluate(facts_for("mig-on"), image_cuda_version="13.0", check_mig=False)
    assert nd.failures(checks) == []


def test_nvswitch_host_without_fabric_manager_explains_cuda_802():
    checks = nd.evaluate(facts_for("nvswitch-no-fm", nvswitch_devices=["0000:05:00.0"], fm_service="inactive"),
                         image_cuda_version="13.0")
    failed = nd.failures(checks)
    assert len(failed) == 1 and failed[0].startswith("fabric_manager:")
    assert "nvidia-fabricmanager is not installed" in failed[0]
    assert "580.159.04" in failed[0]
    assert "CUDA error 802" in failed[0]
    assert "Not Started/N/A" in failed[0]


def test_nvswitch_host_with_fabric_manager_at_another_version_is_refused():
    packages = [{"name": "nvidia-fabricmanager-580", "version": "580.95.05-1"}]
    checks = nd.evaluate(facts_for("h200x2", nvswitch_devices=["0000:05:00.0"], fm_packages=packages,
                                   fm_service="active"), image_cuda_version="13.0")
    failed = nd.failures(checks)
    assert len(failed) == 1 and "at 580.95.05 but the driver is 580.159.04" in failed[0]


def test_nvswitch_host_with_matching_active_fabric_manager_passes():
    packages = [{"name": "nvidia-fabricmanager-580", "version": "580.159.04-0ubuntu1"}]
    checks = nd.evaluate(facts_for("h200x2", nvswitch_devices=["0000:05:00.0"], fm_packages=packages,
                                   fm_service="active"), image_cuda_version="13.0")
    assert nd.failures(checks) == []
    assert checks["fabric_manager"]["ok"]


def test_nvswitch_host_with_stopped_service_is_refused():
    packages = [{"name": "nvidia-fabricmanager", "version": "580.159.04-1"}]
    checks = nd.evaluate(facts_for("nvswitch-no-fm", nvswitch_devices=["0000:05:00.0"], fm_packages=packages,
                                   fm_service="failed"), image_cuda_version="13.0")
    failed = nd.failures(checks)[0]
    assert "nvidia-fabricmanager.service is failed" in failed and "systemctl enable --now" in failed


def test_fabric_not_trained_without_local_nvswitch_points_outside():
    checks = nd.evaluate(facts_for("nvswitch-no-fm", service_manager="none"), image_cuda_version="13.0")
    failed = nd.failures(checks)[0]
    assert "managed outside" in failed and "CUDA error 802" in failed


def test_completed_with_failure_status_is_not_ready():
    facts = facts_for("h200x2")
    facts["parsed"]["gpus"][1]["fabric_status"] = "Failure"
    assert "GPU(s) 1" in nd.failures(nd.evaluate(facts, image_cuda_version="13.0"))[0]


def test_persistence_disabled_policies():
    facts = facts_for("h200x2")
    facts["parsed"]["gpus"][1]["persistence_mode"] = False
    report = nd.evaluate(facts, image_cuda_version="13.0", persistence="report")
    assert nd.failures(report) == [] and "GPU(s) 1" in nd.warnings(report)[0]
    require = nd.evaluate(facts, image_cuda_version="13.0", persistence="require")
    assert "nvidia-persistenced" in nd.failures(require)[0]


def test_missing_or_failing_nvidia_smi_says_what_to_do():
    facts = facts_for("h200x2")
    facts.update(smi_path="", searched=["PATH", "/usr/local/nvidia/bin"])
    checks = nd.evaluate(facts, image_cuda_version="13.0")
    assert list(checks) == ["nvml"] and "nvidia_driver_nvidia_smi_path" in checks["nvml"]["message"]
    facts = facts_for("h200x2")
    facts.update(parsed=None, smi_rc=9, smi_output="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    message = nd.failures(nd.evaluate(facts, image_cuda_version="13.0"))[0]
    assert "rc=9" in message and "lsmod | grep nvidia" in message


def test_the_diagnosis_of_a_too_old_driver_quotes_the_same_table():
    """One CUDA -> minimum driver table: the log diagnosis reads nvidia_driver's, every row of it."""
    from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent import diagnostics

    assert diagnostics.CUDA_MIN_DRIVER is nd.CUDA_MIN_DRIVER
    line = "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update your driver"
    finding = diagnostics.classify(line)[0]
    assert finding["id"] == "driver_too_old_for_image_cuda"
    assert nd.CUDA_MIN_DRIVER["12.8"] in finding["fix"]
