"""Each driver case, replayed by the test-double nvidia-smi, run through the role as a user runs it.

Passing cases must report changed=0; failure cases must be refused with their message and change nothing.
"""
import json
import os
import re
import subprocess

import pytest

SCENARIO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
NVSWITCH_DIR = "/var/lib/llmfleet-test-doubles/nvswitch-devices"


def point_double_at(capture):
    subprocess.run(
        ["ansible", "all", "-i", INVENTORY, "-m", "ansible.builtin.copy",
         "-a", "content=/usr/share/llmfleet-test-doubles/nvidia/%s dest=/etc/llmfleet-test-doubles/nvidia-smi-capture" % capture],
        check=True, capture_output=True, text=True)


def run_case(capture, extra_vars):
    point_double_at(capture)
    result = subprocess.run(
        ["ansible-playbook", "-i", INVENTORY, os.path.join(SCENARIO, "case.yml"), "-e", json.dumps(extra_vars)],
        capture_output=True, text=True, check=False)
    recap = re.search(r"ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", result.stdout)
    assert recap, result.stdout + result.stderr
    return result, {"changed": int(recap.group(2)), "failed": int(recap.group(4))}


def test_real_h200_capture_passes_without_change(host):
    result, recap = run_case("h200x2", {})
    assert result.returncode == 0, result.stdout
    assert recap == {"changed": 0, "failed": 0}
    assert "driver 580.159.04 >= 580.65.06" in result.stdout
    # converge enabled persistence through the (test-double) daemon; it is still running.
    assert host.service("nvidia-persistenced").is_running


def test_persistence_was_enabled_through_the_daemon(host):
    # Ubuntu's unit passes --no-persistence-mode: converge replaced that command line with a drop-in.
    exec_start = host.check_output("systemctl show nvidia-persistenced -p ExecStart")
    assert "--no-persistence-mode" not in exec_start and "/usr/bin/nvidia-persistenced" in exec_start
    assert host.file("/etc/systemd/system/nvidia-persistenced.service.d/llmfleet-persistence-mode.conf").exists
    # The capture with persistence off now reads Enabled (the daemon holds it), so it passes quietly.
    result, recap = run_case("persistence-off", {"nvidia_driver_persistence_mode": "require"})
    assert result.returncode == 0 and recap == {"changed": 0, "failed": 0}, result.stdout[-2000:]
    assert "persistence mode is enabled on every GPU" in result.stdout


@pytest.mark.parametrize("capture,extra_vars,messages", [
    ("old-driver", {"nvidia_driver_image_cuda_version": "13.0"},
     ["NVIDIA driver 570.172.08 is older than 580.65.06", "unsatisfied condition: cuda>=13.0",
      "Upgrade the driver to branch 580 or newer"]),
    ("mig-on", {"llmfleet_plan": {"replicas": [[0, 1]]}},
     ["MIG mode is enabled on GPU(s) 0, which are planned as whole GPUs (the plan's replicas)",
      "nvidia-smi -i 0 -mig 0"]),
    ("nvswitch-no-fm", {"nvidia_driver_nvswitch_devices_dir": NVSWITCH_DIR},
     ["NVSwitch host (4 NVSwitch device(s)", "nvidia-fabricmanager is not installed",
      "exactly the driver's version 580.159.04", "nvidia-fabricmanager.service is inactive",
      "CUDA error 802"]),
    ("no-driver", {},
     ["-q -x failed (rc=9)", "couldn't communicate with the NVIDIA driver", "lsmod | grep nvidia"]),
])
def test_failure_case_is_refused_with_its_message_and_no_change(host, capture, extra_vars, messages):
    persistenced_before = host.service("nvidia-persistenced").is_running
    result, recap = run_case(capture, extra_vars)
    assert result.returncode != 0
    assert recap == {"changed": 0, "failed": 1}
    flat = " ".join((result.stdout + result.stderr).split())
    for message in messages:
        assert message in flat, "%r not in output:\n%s" % (message, result.stdout[-3000:])
    assert host.service("nvidia-persistenced").is_running == persistenced_before


def test_cpu_host_skips_with_a_message(host):
    result, recap = run_case("no-driver", {"llmfleet_accelerator": "cpu"})
    assert result.returncode == 0 and recap["changed"] == 0
    assert "skipped, llmfleet_accelerator is cpu" in result.stdout


def test_bad_cuda_version_is_refused_before_anything(host):
    result, recap = run_case("h200x2", {"nvidia_driver_image_cuda_version": "12.7"})
    assert result.returncode != 0 and recap["changed"] == 0
    flat = " ".join((result.stdout + result.stderr).split())
    assert "no minimum driver is known for CUDA 12.7" in flat and "set nvidia_driver_min_version" in flat
