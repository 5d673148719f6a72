#!/usr/bin/env bash
# A local image registry (Debian's docker-registry, distribution 2.8) on port 5000: there is no
# public registry here, so images are built locally, pushed here and pulled back by digest.
set -euo pipefail
if curl -fsS -o /dev/null http://127.0.0.1:5000/v2/ 2>/dev/null; then exit 0; fi
if ! command -v docker-registry >/dev/null 2>&1; then
  echo "testbed: installing Debian's docker-registry" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq docker-registry >/dev/null
fi
mkdir -p /var/lib/llmfleet-registry /etc/llmfleet
cat > /etc/llmfleet/registry.yml <<'CFG'
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: /var/lib/llmfleet-registry
  delete:
    enabled: true
http:
  # Test hosts (containers on the docker bridge) pull from here too.
  addr: 0.0.0.0:5000
CFG
nohup docker-registry serve /etc/llmfleet/registry.yml >/var/log/llmfleet-registry.log 2>&1 &
for _ in $(seq 1 30); do curl -fsS -o /dev/null http://127.0.0.1:5000/v2/ 2>/dev/null && exit 0; sleep 0.5; done
echo "testbed: registry did not answer on :5000; see /var/log/llmfleet-registry.log" >&2
tail -20 /var/log/llmfleet-registry.log >&2
exit 1
