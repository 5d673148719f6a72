#!/usr/bin/env bash
# Run on a real GPU host, from the repository root, with ansible-core importable (PYTHONPATH):
#   OUT=/some/dir tests/device/run_gpu_facts.sh
# Captures nvidia-smi outputs, runs llmfleet.vllm.gpu_facts through NVML and through nvidia-smi only, and plans
# the three Qwen3.5-35B-A3B checkpoints with both objectives on what it found.  Everything lands in $OUT.
# Read-only on the host: no package, service or file outside $OUT is touched.
set -u -o pipefail
OUT=${OUT:-$PWD/.cache/device-out}
mkdir -p "$OUT"
PY=${PYTHON:-$(command -v python3)}
SMI=$(command -v nvidia-smi || true)
for d in /usr/local/nvidia/bin /usr/bin; do [ -z "$SMI" ] && [ -x "$d/nvidia-smi" ] && SMI="$d/nvidia-smi"; done
echo "nvidia-smi: ${SMI:-not found}; python: $PY" | tee "$OUT/env.txt"
"$PY" -c 'import ansible, sys; print("ansible-core", ansible.__version__ if hasattr(ansible, "__version__") else "?", sys.version)' >>"$OUT/env.txt" 2>&1
"$PY" -c 'import pynvml; pynvml.nvmlInit(); print("pynvml ok, driver", pynvml.nvmlSystemGetDriverVersion())' >>"$OUT/env.txt" 2>&1

if [ -n "$SMI" ]; then
  "$SMI" > "$OUT/nvidia-smi.txt" 2>&1
  "$SMI" topo -m > "$OUT/topo-m.txt" 2>&1
  "$SMI" --query-gpu=index,name,uuid,memory.total,pci.bus_id,driver_version,compute_cap,mig.mode.current \
    --format=csv > "$OUT/query.csv" 2>&1
  "$SMI" -q -x > "$OUT/q.xml" 2>&1
  "$SMI" nvlink -s > "$OUT/nvlink-s.txt" 2>&1
fi
ls -la /proc/driver/nvidia-nvswitch/devices/ > "$OUT/nvswitch-devices.txt" 2>&1
cat /proc/driver/nvidia/version > "$OUT/procver.txt" 2>&1

cat > "$OUT/device.yml" <<'PLAY'
- name: Read the GPUs and plan Qwen3.5-35B-A3B on them
  hosts: localhost
  gather_facts: false
  vars:
    out: "{{ lookup('ansible.builtin.env', 'OUT') }}"
  tasks:
    - name: Read the GPUs through NVML (must work)
      llmfleet.vllm.gpu_facts:
        use_nvml: "true"
        return_raw: true
      register: facts_nvml
      ignore_errors: true
    - name: Read the GPUs through nvidia-smi only
      llmfleet.vllm.gpu_facts:
        use_nvml: "false"
        return_raw: true
      register: facts_smi
      ignore_errors: true
    - name: Read the GPUs the default way (auto)
      llmfleet.vllm.gpu_facts:
      register: facts_auto
      ignore_errors: true
    - name: Save the gpu_facts results
      ansible.builtin.copy:
        content: "{{ item.value | to_nice_json }}\n"
        dest: "{{ out }}/gpu_facts_{{ item.key }}.json"
        mode: "0644"
      loop: "{{ {'nvml': facts_nvml, 'smi': facts_smi, 'auto': facts_auto} | dict2items }}"
      loop_control:
        label: "{{ item.key }}"
    - name: Plan each checkpoint with each objective
      llmfleet.vllm.vllm_plan:
        model: "{{ item.0 }}"
        objective: "{{ item.1 }}"
        gpu_facts: "{{ facts_auto.gpu_facts }}"
      loop: "{{ ['Qwen/Qwen3.5-35B-A3B', 'Qwen/Qwen3.5-35B-A3B-FP8', 'Qwen/Qwen3.5-35B-A3B-GPTQ-Int4'] | product(['throughput', 'latency']) | list }}"
      register: plans
      ignore_errors: true
    - name: Save the plans
      ansible.builtin.copy:
        content: "{{ plans.results | map(attribute='plan', default={}) | list | to_nice_json }}\n"
        dest: "{{ out }}/plans.json"
        mode: "0644"
    - name: Save the plan table
      ansible.builtin.copy:
        content: "{{ ([plans.results[0].table_header | default('')] + plans.results | map(attribute='table_row', default='(failed)') | list) | join('\n') }}\n"
        dest: "{{ out }}/plans.md"
        mode: "0644"
PLAY

export OUT
export ANSIBLE_COLLECTIONS_PATH="$PWD/collections" ANSIBLE_CONFIG="$PWD/ansible.cfg" ANSIBLE_LOCALHOST_WARNING=0
"$PY" -m ansible playbook -i localhost, -c local -e ansible_python_interpreter="$PY" "$OUT/device.yml" \
  > "$OUT/ansible.log" 2>&1
rc=$?
tail -n 40 "$OUT/ansible.log"
cat "$OUT/plans.md" 2>/dev/null
echo "rc=$rc; outputs in $OUT"
exit $rc
