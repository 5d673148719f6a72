#!/usr/bin/env bash
# A local image registry (Debian's docker-registry, distribution 2.8) on port 5000: there is no
# public registry here, so images are built locally, pushed here and pulled back by digest.
# LLMFLEET_TEST_REGISTRY_PORT: another port, with a configuration, storage and log of its own (a second,
# separate registry: tests/bench/p5_cold_demo.py measures a cold test bed that way beside the shared one).
set -euo pipefail
port=${LLMFLEET_TEST_REGISTRY_PORT:-5000}
suffix=; [ "$port" = 5000 ] || suffix=-$port
config=/etc/llmfleet/registry$suffix.yml storage=/var/lib/llmfleet-registry$suffix log=/var/log/llmfleet-registry$suffix.log
if curl -fsS -o /dev/null "http://127.0.0.1:$port/v2/" 2>/dev/null; then exit 0; fi
if ! command -v docker-registry >/dev/null 2>&1; then
  echo "testbed: installing Debian's docker-registry" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq docker-registry >/dev/null
fi
mkdir -p "$storage" /etc/llmfleet
cat > "$config" <<CFG
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $storage
  delete:
    enabled: true
http:
  # Test hosts (containers on the docker bridge) pull from here too.
  addr: 0.0.0.0:$port
CFG
nohup docker-registry serve "$config" >"$log" 2>&1 &
for _ in $(seq 1 30); do curl -fsS -o /dev/null "http://127.0.0.1:$port/v2/" 2>/dev/null && exit 0; sleep 0.5; done
echo "testbed: registry did not answer on :$port; see $log" >&2
tail -20 "$log" >&2
exit 1
