#!/usr/bin/env bash
# Bring the test bed up (idempotent, cached) and write what tests need to know into ENV_FILE:
#   docker engine -> host image -> local registry -> every tests/testbed/up.d/*.sh in order.
# Each up.d script gets ENV_FILE as $1 and appends its own KEY=VALUE lines.
set -euo pipefail
env_file=${1:?usage: up.sh ENV_FILE}
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
mkdir -p "$(dirname "$env_file")"
tests/testbed/docker-engine.sh
host_image=$(tests/testbed/image.sh debian12-systemd)
tests/testbed/registry.sh
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
} > "$env_file"
for script in tests/testbed/up.d/*.sh; do
  [ -e "$script" ] || continue
  echo "testbed: $script" >&2
  "$script" "$env_file"
done
echo "testbed: ready ($env_file)" >&2
