#!/usr/bin/env bash
# make demo: start a local test host (Debian 12 + systemd, no GPU), run site.yml against it with the
# demo inventory, and print the endpoint. Re-running converges the same host (idempotent).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
# LLMFLEET_DEMO_HOST: another host name (tests/bench/p1_p2_deploy.py times a demo on a fresh host this way).
name=${LLMFLEET_DEMO_HOST:-llmfleet-demo}
mkdir -p .cache/demo && chmod 700 .cache/demo
[ -s .cache/demo/api_key ] || (umask 077; python3 -c 'import secrets; print(secrets.token_urlsafe(24))' > .cache/demo/api_key)
if ! docker inspect "$name" >/dev/null 2>&1; then
  docker run -d --name "$name" --hostname "$name" \
    --cap-add SYS_ADMIN --cap-add NET_ADMIN \
    --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
    --cgroupns host -v /sys/fs/cgroup:/sys/fs/cgroup:rw -v /var/lib/docker \
    --tmpfs /run --tmpfs /run/lock --tmpfs /tmp \
    "${MOLECULE_HOST_IMAGE:?run make testbed first}" /lib/systemd/systemd >/dev/null
fi
docker start "$name" >/dev/null
for _ in $(seq 1 30); do
  state=$(docker exec "$name" systemctl is-system-running 2>/dev/null || true)
  case "$state" in running|degraded) break ;; esac
  sleep 1
done
start=$(date +%s)
if [ "$name" = llmfleet-demo ]; then
  ansible-playbook site.yml -i inventories/demo
else
  # Another container: the inventory's host llmfleet-demo, reached at that container; its facts stay out of
  # the controller's fact cache (they would stand for llmfleet-demo there).
  ANSIBLE_CACHE_PLUGIN=memory ansible-playbook site.yml -i inventories/demo -e ansible_host="$name"
fi
ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$name")
cat <<MSG

llmfleet demo is serving (site.yml took $(( $(date +%s) - start ))s).
  Endpoint:  https://$ip:8000/v1   (model name: tiny; TLS, certificate signed by the CA below)
  API key:   $top/.cache/demo/api_key   (on the host: /etc/llmfleet/vllm-0.env, root-only)
  CA:        $top/.cache/demo/tls/ca.crt   (its key ca.key stays on this machine, 0600)
  Try:       curl -s --cacert .cache/demo/tls/ca.crt https://$ip:8000/v1/chat/completions \\
               -H "Authorization: Bearer \$(cat .cache/demo/api_key)" \\
               -H 'Content-Type: application/json' -d '{"model":"tiny","messages":[{"role":"user","content":"Hello"}],"max_tokens":16}'
  Logs:      docker exec $name journalctl -u llmfleet-vllm@0 -f
  Remove:    docker rm -f $name
MSG
