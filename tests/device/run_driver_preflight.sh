#!/usr/bin/env bash
# Run the nvidia_driver role's preflight on a real GPU host (the lent H200 machines: Ubuntu 24.04,
# no systemd as PID 1, no docker, nvidia-smi in /usr/local/nvidia/bin, ansible-core importable from
# PYTHONPATH) against localhost with -c local, and record everything under $OUT:
#   SUMMARY.txt            one line per run: name, exit code, play recap, expectation met or not
#   host/*                 nvidia-smi -q -x, nvidia-smi, /proc/driver/nvidia/version, the NVSwitch listing
#   <run>.log / <run>.json the role's output (human readable, and the json callback)
# Runs (all read-only: the role changes nothing unless persistence mode is set to enable):
#   pass-cuda13      the default image CUDA 13.0             -> expected: rc 0, changed=0
#   pass-cuda12.9    a -cu129 image                          -> expected: rc 0, changed=0
#   pass-plan        llmfleet_plan replicas [[0..n-1]]       -> expected: rc 0 (MIG is off)
#   refuse-min       nvidia_driver_min_version 999.0         -> expected: rc != 0, message, changed=0
#   refuse-persist   persistence_mode enable, if any GPU has persistence off -> refusal (no systemd)
# Usage: OUT=/some/dir tests/device/run_driver_preflight.sh     (exit 0 when every expectation held)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$top/.cache/device-out}
mkdir -p "$OUT/host"
summary="$OUT/SUMMARY.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
note "host: $(hostname) $(date -u +%FT%TZ) $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME") kernel $(uname -r)"
note "pid1: $(cat /proc/1/comm 2>/dev/null)"

# 1. Raw captures, whatever happens to Ansible afterwards.
smi=$(command -v nvidia-smi || true)
for candidate in /usr/local/nvidia/bin/nvidia-smi /usr/bin/nvidia-smi; do
  [ -n "$smi" ] && break
  [ -x "$candidate" ] && smi=$candidate
done
note "nvidia-smi: ${smi:-NOT FOUND}"
if [ -n "$smi" ]; then
  timeout 60 "$smi" -q -x > "$OUT/host/nvidia-smi-q.xml" 2>&1; note "capture nvidia-smi -q -x rc=$?"
  timeout 60 "$smi" > "$OUT/host/nvidia-smi.txt" 2>&1
  timeout 60 "$smi" -q > "$OUT/host/nvidia-smi-q.txt" 2>&1
fi
cat /proc/driver/nvidia/version > "$OUT/host/procver.txt" 2>&1
{ echo "# ls -la /proc/driver/nvidia-nvswitch/devices/"; ls -la /proc/driver/nvidia-nvswitch/devices/ 2>&1; } > "$OUT/host/nvswitch-devices.txt"
note "nvswitch devices: $(find /proc/driver/nvidia-nvswitch/devices/ -mindepth 1 -maxdepth 1 2>/dev/null | wc -l) entr(y/ies)"

# 2. Ansible: the collection resolved from this checkout through a private collections dir.
py=$(command -v python3)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/collections/ansible_collections/llmfleet"
ln -s "$top" "$work/collections/ansible_collections/llmfleet/vllm"
printf '[defaults]\n' > "$work/ansible.cfg"
export ANSIBLE_COLLECTIONS_PATH="$work/collections" ANSIBLE_HOME="$work/ansible-home" ANSIBLE_CONFIG="$work/ansible.cfg"
export ANSIBLE_LOCAL_TEMP="$work/tmp" ANSIBLE_RETRY_FILES_ENABLED=false ANSIBLE_NOCOLOR=1
export ANSIBLE_LOCALHOST_WARNING=false ANSIBLE_INVENTORY_UNPARSED_WARNING=false ANSIBLE_CALLBACK_RESULT_FORMAT=yaml
export LC_ALL=${LC_ALL:-C.UTF-8} LANG=${LANG:-C.UTF-8}
if command -v ansible-playbook >/dev/null 2>&1; then
  playbook=(ansible-playbook)
elif "$py" -c 'import ansible' >/dev/null 2>&1; then
  playbook=("$py" -m ansible playbook)
else
  note "FAILED: ansible-core is neither on PATH nor importable by $py (PYTHONPATH=${PYTHONPATH:-unset})"
  exit 3
fi
note "ansible: $("${playbook[@]}" --version 2>&1 | head -1)"
# A GPU index list for the plan run: 0..n-1.
ngpu=$(grep -c '<gpu id=' "$OUT/host/nvidia-smi-q.xml" 2>/dev/null); ngpu=${ngpu:-0}
plan=$("$py" -c "import json,sys; n=int(sys.argv[1]); print(json.dumps({'llmfleet_plan': {'replicas': [list(range(n))]}}))" "$ngpu")
persist_off=$(grep -c '<persistence_mode>Disabled</persistence_mode>' "$OUT/host/nvidia-smi-q.xml" 2>/dev/null); persist_off=${persist_off:-0}

failures=0
run() {  # run NAME EXPECT(pass|refuse) EXTRA_VARS_JSON [MESSAGE_EXPECTED]
  local name=$1 expect=$2 vars=$3 message=${4:-} rc recap verdict=ok
  ANSIBLE_STDOUT_CALLBACK=default timeout 300 "${playbook[@]}" -i localhost, -c local \
    -e "ansible_python_interpreter=$py" -e "$vars" "$top/tests/device/driver_preflight.yml" > "$OUT/$name.log" 2>&1
  rc=$?
  ANSIBLE_STDOUT_CALLBACK=json timeout 300 "${playbook[@]}" -i localhost, -c local \
    -e "ansible_python_interpreter=$py" -e "$vars" "$top/tests/device/driver_preflight.yml" > "$OUT/$name.json" 2>"$OUT/$name.json.stderr"
  recap=$(grep -E '^localhost +:' "$OUT/$name.log" | tr -s ' ')
  if [ "$expect" = pass ]; then
    [ "$rc" -eq 0 ] || verdict=UNEXPECTED
  else
    [ "$rc" -ne 0 ] || verdict=UNEXPECTED
    if [ -n "$message" ] && ! tr -s ' \n' ' ' < "$OUT/$name.log" | grep -qF "$message"; then verdict=UNEXPECTED; fi
  fi
  case "$recap" in *"changed=0"*) ;; *) verdict=UNEXPECTED ;; esac
  [ "$verdict" = ok ] || failures=$((failures + 1))
  note "run $name: expect=$expect rc=$rc verdict=$verdict recap: ${recap:-none}"
}
run pass-cuda13 pass '{"nvidia_driver_image_cuda_version": "13.0"}'
run pass-cuda12.9 pass '{"nvidia_driver_image_cuda_version": "12.9"}'
run pass-plan pass "$plan"
run refuse-min refuse '{"nvidia_driver_min_version": "999.0"}' "is older than 999.0 (set by nvidia_driver_min_version)"
if [ "$persist_off" -gt 0 ]; then
  run refuse-persist refuse '{"nvidia_driver_persistence_mode": "enable"}' "no systemd"
else
  note "run refuse-persist: not applicable (persistence mode is on for every GPU)"
fi
# The checks as the role saw them, one line each, for the closing note.
"$py" - "$OUT/pass-cuda13.json" >> "$summary" 2>&1 <<'PY'
import json, sys
try:
    data = json.load(open(sys.argv[1]))
except Exception as exc:
    print("checks: could not read json output: %s" % exc); sys.exit(0)
for play in data.get("plays", []):
    for task in play.get("tasks", []):
        res = task.get("hosts", {}).get("localhost", {})
        if "checks" in res:
            print("facts: driver %s cuda %s nvswitch_host %s service_manager %s gpus %s" % (
                res.get("driver_version"), res.get("cuda_version"), res.get("nvswitch_host"),
                res.get("service_manager"), [g.get("name") for g in res.get("gpus", [])]))
            for name, check in res["checks"].items():
                print("check %s: %s - %s" % (name, check.get("level"), check.get("message")))
            sys.exit(0)
print("checks: not found in json output")
PY
note "expectations not met: $failures"
[ "$failures" -eq 0 ]
