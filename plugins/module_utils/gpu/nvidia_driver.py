# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure functions behind the nvidia_driver preflight: version arithmetic, the CUDA -> minimum
driver table, parsing of ``nvidia-smi -q -x`` and the decision of every check.

Nothing here runs a command or touches the host: the module (plugins/modules/nvidia_driver_facts.py)
collects the raw inputs, these functions judge them, and the role turns failures into errors.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import xml.etree.ElementTree as ET

# Minimum driver per CUDA release: one table, in the host agent (the diagnosis on the host quotes it too).
from ansible_collections.llmfleet.vllm.plugins.module_utils.host_agent.cuda_drivers import CUDA_MIN_DRIVER

# nvidia-smi / NVML fabric states (nvmlGpuFabricState_t): Not Supported, Not Started, In Progress,
# Completed. GPUs outside an NVSwitch fabric report "N/A" or "Not Supported".
FABRIC_NOT_PARTICIPATING = ("", "n/a", "not supported", "none")
FABRIC_COMPLETED = "completed"

CUDA_802_EXPLAINED = (
    "Until the NVSwitch fabric is trained, nvidia-smi lists the GPUs but every CUDA program fails with "
    "CUDA error 802 'system not yet initialized' (cudaErrorSystemNotReady), so vLLM cannot start."
)


def parse_version(text):
    """'580.159.04' -> (580, 159, 4). Raises ValueError on anything that is not dotted integers."""
    if text is None:
        raise ValueError("no version given")
    text = str(text).strip()
    if not re.match(r"^\d+(\.\d+)*$", text):
        raise ValueError("not a dotted numeric version: %r" % text)
    return tuple(int(part) for part in text.split("."))


def compare_versions(left, right):
    """Compare two dotted versions numerically (missing parts count as 0): -1, 0 or 1."""
    a, b = parse_version(left), parse_version(right)
    width = max(len(a), len(b))
    a = a + (0,) * (width - len(a))
    b = b + (0,) * (width - len(b))
    return (a > b) - (a < b)


def cuda_minor(cuda_version):
    """'13.0', '13.0.2', 'cuda13.0', 13.0 -> '13.0'."""
    text = str(cuda_version).strip().lower()
    if text.startswith("cuda"):
        text = text[4:].lstrip("-_ ")
    match = re.match(r"^(\d+)\.(\d+)(\.\d+)?$", text)
    if not match:
        raise ValueError("CUDA version %r is not of the form MAJOR.MINOR (e.g. '13.0' or '12.9')" % (cuda_version,))
    return "%d.%d" % (int(match.group(1)), int(match.group(2)))


def min_driver_for_cuda(cuda_version, table=None):
    """The minimum Linux driver for a CUDA release, from the table. Raises ValueError for an unknown release."""
    table = CUDA_MIN_DRIVER if table is None else table
    key = cuda_minor(cuda_version)
    if key not in table:
        known = ", ".join(sorted(table, key=parse_version, reverse=True))
        raise ValueError(
            "no minimum driver is known for CUDA %s (known: %s); set nvidia_driver_min_version "
            "to the value from NVIDIA's CUDA release notes (Table 3)" % (key, known)
        )
    return table[key]


def driver_branch(driver_version):
    """'580.159.04' -> '580'."""
    return str(parse_version(driver_version)[0])


def _text(node, path, default=""):
    found = node.find(path)
    if found is None or found.text is None:
        return default
    return found.text.strip()


def parse_smi_xml(text):
    """Parse ``nvidia-smi -q -x``. GPUs come in nvidia-smi's index order, which is their index.

    Returns {driver_version, cuda_version, gpus: [{index, name, uuid, pci_bus_id, persistence_mode,
    mig_current, mig_pending, fabric_state, fabric_status, fabric_participating}]}.
    """
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ValueError("nvidia-smi -q -x did not return XML: %s" % exc)
    if root.tag != "nvidia_smi_log":
        raise ValueError("unexpected root element %r in nvidia-smi -q -x output" % root.tag)
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):
        fabric_state = _text(gpu, "fabric/state", "N/A")
        gpus.append({
            "index": index,
            "name": _text(gpu, "product_name"),
            "uuid": _text(gpu, "uuid"),
            "pci_bus_id": gpu.get("id") or _text(gpu, "pci/pci_bus_id"),
            "persistence_mode": _text(gpu, "persistence_mode").lower() == "enabled",
            "mig_current": _text(gpu, "mig_mode/current_mig", "N/A"),
            "mig_pending": _text(gpu, "mig_mode/pending_mig", "N/A"),
            "fabric_state": fabric_state,
            "fabric_status": _text(gpu, "fabric/status", "N/A"),
            "fabric_participating": fabric_state.lower() not in FABRIC_NOT_PARTICIPATING,
        })
    return {
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "gpus": gpus,
    }


def is_nvswitch_host(nvswitch_devices):
    """An NVSwitch host has entries under /proc/driver/nvidia-nvswitch/devices/.

    The directory exists (empty) on every host with the open kernel module loaded, NVSwitch or not, so
    only a non-empty listing counts.
    """
    return bool([entry for entry in (nvswitch_devices or []) if str(entry).strip()])


def planned_whole_gpus(plan):
    """GPU indices the plan gives to replicas as whole GPUs, or None when there is no plan.

    Accepts ``replicas`` as a list of index lists ([[0, 1], [2, 3]]) or of mappings carrying the list
    under ``gpus``, ``gpu_indices`` or ``devices``.
    """
    if not plan:
        return None
    replicas = plan.get("replicas") if isinstance(plan, dict) else None
    if replicas is None:
        return None
    used = set()
    for replica in replicas:
        if isinstance(replica, dict):
            indices = None
            for key in ("gpus", "gpu_indices", "devices"):
                if key in replica:
                    indices = replica[key]
                    break
            if indices is None:
                raise ValueError("a replica in llmfleet_plan has no 'gpus' list: %r" % (replica,))
        else:
            indices = replica
        if isinstance(indices, (int, str)):
            indices = [indices]
        for index in indices:
            used.add(int(index))
    return sorted(used)


def fabric_ready(gpu):
    """A GPU's fabric is ready when its state is Completed and its status is Success (or not reported)."""
    return (gpu["fabric_state"].lower() == FABRIC_COMPLETED
            and gpu["fabric_status"].lower() in ("success", "n/a", ""))


def _fabricmanager_version(packages):
    """From [{'name', 'version'}] of installed fabric manager packages -> upstream version ('580.95.05')."""
    for package in packages or []:
        version = str(package.get("version", ""))
        # Debian '580.95.05-1' / '580.95.05-0ubuntu1', RPM '580.95.05-1.el9' -> '580.95.05'
        upstream = version.split(":", 1)[-1].split("-", 1)[0]
        if re.match(r"^\d+(\.\d+)+$", upstream):
            return upstream, package.get("name", "")
    return None, None


def _check(ok, message, level="error"):
    return {"ok": bool(ok), "message": message, "level": level if not ok else "ok"}


def _check_nvml(facts, parsed):
    """Whether NVML answers through nvidia-smi and lists GPUs (the other checks need it)."""
    smi_path = facts.get("smi_path")
    if not smi_path:
        return _check(False, (
            "nvidia-smi was not found (looked in PATH and %s). Install the NVIDIA driver's utilities "
            "(Ubuntu: nvidia-utils-<branch>-server, or the cuda-drivers-<branch> package from NVIDIA's CUDA "
            "repository) or set nvidia_driver_nvidia_smi_path to the binary." % ", ".join(facts.get("searched", []))))
    if facts.get("smi_rc", 0) != 0 or parsed is None:
        return _check(False, (
            "%s -q -x failed (rc=%s): %s. NVML cannot talk to the driver: check the kernel module is loaded "
            "(lsmod | grep nvidia; dmesg | grep -i nvrm), that the user-space utilities match the kernel module "
            "version (cat /proc/driver/nvidia/version), and reboot after a driver upgrade."
            % (smi_path, facts.get("smi_rc"), (facts.get("smi_output") or "").strip()[:400] or "no output")))
    if not parsed["gpus"]:
        return _check(False, (
            "nvidia-smi answers but lists no GPU. Check the GPUs are visible on the PCI bus (lspci -d 10de:) and "
            "not bound to another driver (vfio-pci), or set llmfleet_accelerator: cpu for a host without GPUs."))
    return _check(True, "nvidia-smi (%s) answers: driver %s, %d GPU(s)" % (
        smi_path, parsed["driver_version"], len(parsed["gpus"])))


def _check_driver_version(driver, image_cuda_version, min_driver_version):
    """The driver against the pinned image's CUDA (or the minimum the user set)."""
    source = "set by nvidia_driver_min_version"
    required = min_driver_version
    if not required:
        required = min_driver_for_cuda(image_cuda_version)
        source = "NVIDIA's minimum for CUDA %s, the pinned image's CUDA" % cuda_minor(image_cuda_version)
    try:
        too_old = compare_versions(driver, required) < 0
    except ValueError:
        too_old = True
    if too_old:
        return _check(False, (
            "NVIDIA driver %s is older than %s (%s). Containers of the pinned image would fail with "
            "'nvidia-container-cli: requirement error: unsatisfied condition: cuda>=%s'. Upgrade the driver to "
            "branch %s or newer (e.g. apt install nvidia-driver-%s-server-open, then reboot), or pin an image built "
            "for an older CUDA (nvidia_driver_image_cuda_version and the image tag together)." % (
                driver, required, source, cuda_minor(image_cuda_version) if image_cuda_version else "?",
                driver_branch(required), driver_branch(required))))
    return _check(True, "driver %s >= %s (%s)" % (driver, required, source))


def _check_persistence(gpus, persistence, systemd):
    off = [g["index"] for g in gpus if not g["persistence_mode"]]
    if not off:
        return _check(True, "persistence mode is enabled on every GPU")
    if persistence == "report":
        return _check(False, (
            "persistence mode is disabled on GPU(s) %s (reported only). Set nvidia_driver_persistence_mode: enable "
            "to start nvidia-persistenced, or: systemctl enable --now nvidia-persistenced"
            % ", ".join(map(str, off))), level="warning")
    return _check(False, (
        "persistence mode is disabled on GPU(s) %s. Start NVIDIA's persistence daemon: systemctl enable --now "
        "nvidia-persistenced (package nvidia-compute-utils-<branch> / nvidia-persistenced)%s." % (
            ", ".join(map(str, off)),
            "" if systemd else "; this host has no systemd, so run nvidia-persistenced from its own init")))


def _check_mig(gpus, plan, check_mig):
    """MIG against the plan: a GPU planned whole must not be in MIG mode."""
    mig_on = [g["index"] for g in gpus if g["mig_current"].lower() == "enabled"]
    mig_pending = [g["index"] for g in gpus
                   if g["mig_pending"].lower() == "enabled" and g["mig_current"].lower() != "enabled"]
    whole = planned_whole_gpus(plan)
    plan_note = "the plan's replicas" if whole is not None else "no llmfleet_plan given: every GPU counts as planned whole"
    if whole is None:
        whole = [g["index"] for g in gpus]
    clash = sorted(set(mig_on) & set(whole))
    if not check_mig:
        return _check(True, "MIG check skipped (nvidia_driver_check_mig: false); MIG on: %s" % (mig_on or "none"))
    if clash:
        return _check(False, (
            "MIG mode is enabled on GPU(s) %s, which are planned as whole GPUs (%s). A MIG-enabled GPU cannot be "
            "handed to vLLM whole. Disable MIG (nvidia-smi -i %s -mig 0, then reset the GPU or reboot) or plan "
            "without these GPUs." % (", ".join(map(str, clash)), plan_note, ",".join(map(str, clash)))))
    note = "MIG mode: enabled on %s (not planned whole)" % mig_on if mig_on else "MIG mode is disabled on every GPU"
    if mig_pending:
        note += "; MIG pending enable on %s (takes effect after a GPU reset)" % mig_pending
    return _check(True, note)


def _fabric_problems(facts, driver, not_ready, systemd):
    """(problems, service note, Fabric Manager package, its version) of an NVSwitch host."""
    fm_version, fm_package = _fabricmanager_version(facts.get("fabricmanager_packages"))
    service = facts.get("fabricmanager_service")
    problems = []
    if fm_version is None:
        problems.append(
            "nvidia-fabricmanager is not installed: install it at exactly the driver's version %s (package "
            "nvidia-fabricmanager-%s or nvidia-fabricmanager, version %s) and hold it together with the driver "
            "(apt-mark hold / dnf versionlock)" % (driver, driver_branch(driver), driver))
    elif fm_version != driver:
        problems.append(
            "%s is at %s but the driver is %s: Fabric Manager must match the driver version exactly; install "
            "%s at %s (and hold both packages so upgrades move them together)" % (
                fm_package, fm_version, driver, fm_package, driver))
    if not systemd:
        service_note = "cannot check service state: no systemd"
    elif service != "active":
        service_note = "nvidia-fabricmanager.service is %s" % (service or "unknown")
        problems.append("nvidia-fabricmanager.service is %s: systemctl enable --now nvidia-fabricmanager, then "
                        "read journalctl -u nvidia-fabricmanager" % (service or "not found"))
    else:
        service_note = "nvidia-fabricmanager.service is active"
    if not_ready:
        problems.append("fabric state is not Completed on GPU(s) %s (%s)" % (
            ", ".join(str(g["index"]) for g in not_ready),
            ", ".join("%s/%s" % (g["fabric_state"], g["fabric_status"]) for g in not_ready)))
    return problems, service_note, fm_package, fm_version


def _check_fabric(facts, gpus, driver, systemd, nvswitch_devices_dir):
    """NVSwitch / Fabric Manager: on an NVSwitch host it must match the driver, run, and train the fabric."""
    devices = facts.get("nvswitch_devices") or []
    participating = [g for g in gpus if g["fabric_participating"]]
    not_ready = [g for g in participating if not fabric_ready(g)]
    if is_nvswitch_host(devices):
        problems, service_note, fm_package, fm_version = _fabric_problems(facts, driver, not_ready, systemd)
        if problems:
            return _check(False, (
                "NVSwitch host (%d NVSwitch device(s) under %s): %s. %s" % (
                    len(devices), nvswitch_devices_dir, "; ".join(problems), CUDA_802_EXPLAINED)))
        return _check(True, (
            "NVSwitch host: %s %s matches the driver, %s, fabric Completed on every GPU" % (
                fm_package, fm_version, service_note)))
    if not_ready:
        return _check(False, (
            "GPU(s) %s belong to an NVSwitch fabric that is not trained (%s), and no NVSwitch is visible on this host "
            "(%s is empty): the fabric is managed outside it (e.g. by the hypervisor or service VM of an HGX "
            "system). Ask its operator to start Fabric Manager there. %s" % (
                ", ".join(str(g["index"]) for g in not_ready),
                ", ".join("%s/%s" % (g["fabric_state"], g["fabric_status"]) for g in not_ready),
                nvswitch_devices_dir, CUDA_802_EXPLAINED)))
    detail = "no NVSwitch device under %s: Fabric Manager is not needed here" % nvswitch_devices_dir
    if participating:
        detail += " (fabric Completed on GPU(s) %s, managed outside this host)" % ", ".join(
            str(g["index"]) for g in participating)
    if not systemd:
        detail += "; cannot check service state: no systemd"
    return _check(True, detail)


def evaluate(facts, image_cuda_version=None, min_driver_version=None, plan=None,
             persistence="report", check_mig=True, nvswitch_devices_dir="/proc/driver/nvidia-nvswitch/devices"):
    """Judge collected facts. Returns an ordered dict-like mapping check name -> {ok, level, message}.

    facts: {smi_path, smi_rc, smi_output, parsed (parse_smi_xml result or None), nvswitch_devices (list),
            fabricmanager_packages ([{name, version}]), fabricmanager_service ('active'|'inactive'|...|None),
            service_manager ('systemd' or other)}
    """
    parsed = facts.get("parsed")
    systemd = facts.get("service_manager") == "systemd"
    # 1. NVML answers through nvidia-smi (nothing else can be judged without it).
    checks = {"nvml": _check_nvml(facts, parsed)}
    if not checks["nvml"]["ok"]:
        return checks
    driver, gpus = parsed["driver_version"], parsed["gpus"]
    # 2. Driver version against the pinned image's CUDA.
    checks["driver_version"] = _check_driver_version(driver, image_cuda_version, min_driver_version)
    # 3. Persistence mode.
    checks["persistence_mode"] = _check_persistence(gpus, persistence, systemd)
    # 4. MIG against the plan.
    checks["mig_mode"] = _check_mig(gpus, plan, check_mig)
    # 5. NVSwitch / Fabric Manager.
    checks["fabric_manager"] = _check_fabric(facts, gpus, driver, systemd, nvswitch_devices_dir)
    return checks


def failures(checks):
    """The messages of failed checks at level 'error', in check order."""
    return ["%s: %s" % (name, c["message"]) for name, c in checks.items() if not c["ok"] and c["level"] == "error"]


def warnings(checks):
    return ["%s: %s" % (name, c["message"]) for name, c in checks.items() if not c["ok"] and c["level"] == "warning"]
