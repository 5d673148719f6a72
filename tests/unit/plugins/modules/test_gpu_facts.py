"""The gpu_facts module (plugins/modules/gpu_facts.py) run through ansible-playbook."""
import os

H200 = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "gpu", "h200x2")


def test_gpu_facts_module_end_to_end_with_a_replaying_nvidia_smi(tmp_path):
    """Runs the module through ansible-playbook.  nvidia-smi is a test double (no GPU here) that prints the real
    h200x2 captures; -q -x fails like it can on real hosts, which must only add a warning."""
    import json
    import subprocess
    import sys

    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
    smi = tmp_path / "nvidia-smi"
    smi.write_text("""#!/bin/sh
case "$*" in
  "topo -m") cat %(d)s/topo-m.txt ;;
  --query-gpu=*) cat %(d)s/query.csv ;;
  "nvlink -s") cat %(d)s/nvlink-s.txt ;;
  *) echo "Unable to determine the device handle" >&2; exit 15 ;;
esac
""" % {"d": H200})
    smi.chmod(0o755)
    pb = tmp_path / "pb.yml"
    pb.write_text("""
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - llmfleet.vllm.gpu_facts:
        use_nvml: "false"
        nvidia_smi_path: %s
        nvswitch_devices_path: %s
""" % (smi, tmp_path / "absent"))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(root, "collections"),
               ANSIBLE_CONFIG=os.path.join(root, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="json")
    r = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                        "-e", "ansible_python_interpreter=%s" % sys.executable, str(pb)],
                       cwd=root, env=env, capture_output=True, text=True, timeout=120, check=False)
    out = json.loads(r.stdout)
    res = out["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert not res.get("failed"), res
    f = res["gpu_facts"]
    assert f["source"] == "nvidia-smi" and f["nvlink_domains"] == [[0, 1]] and f["nvswitch"] is False
    assert f["gpus"][1]["nvlinks_active"] == 18
    assert any("-q -x" in w for w in f["warnings"])
