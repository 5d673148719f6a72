#!/usr/bin/env bash
# Test-bed step: two more versions of the vLLM CPU image for the rolling-upgrade tests (molecule/fleet),
# derived from the one 30-vllm-cpu.sh pushed, so they share its layers (no rebuild, nothing big to push):
#   v2      FROM it + a label: same engine, a new digest (an upgrade that must roll with no failed request)
#   broken  FROM it + ENTRYPOINT /bin/false: every container exits 1 at start (the roll must stop at host 1)
# Records LLMFLEET_TEST_VLLM_IMAGE_V2[_FROM_HOSTS] and LLMFLEET_TEST_VLLM_IMAGE_BROKEN[_FROM_HOSTS].
# Usage: 35-vllm-cpu-variants.sh ENV_FILE   (idempotent: the builds are cached, a re-push changes no digest)
# testbed-needs: 30-vllm-cpu
set -euo pipefail
env_file=${1:?usage: 35-vllm-cpu-variants.sh ENV_FILE}
registry=127.0.0.1:${LLMFLEET_TEST_REGISTRY_PORT:-5000}
repo=llmfleet/vllm-cpu
base=$(sed -n 's/^LLMFLEET_TEST_VLLM_IMAGE=//p' "$env_file" | tail -1)
[ -n "$base" ] || { echo "testbed: no LLMFLEET_TEST_VLLM_IMAGE in $env_file (run 30-vllm-cpu.sh first)" >&2; exit 1; }
base_tag=${base%@*}; base_tag=${base_tag##*:}
bridge_ip=$(sed -n 's/^LLMFLEET_TESTBED_BRIDGE_IP=//p' "$env_file" | tail -1)

registry_digest() {
  curl -fsSI -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
    "http://$registry/v2/$repo/manifests/$1" 2>/dev/null | tr -d '\r' | awk 'tolower($1)=="docker-content-digest:"{print $2}'
}

variant() {  # variant NAME DOCKERFILE-LINES...
  local name=$1; shift
  local tag="$base_tag-fleet-$name" target digest
  target="$registry/$repo:$tag"
  { echo "FROM $base"; printf '%s\n' "$@"; } | docker build -q -t "$target" - >/dev/null
  digest=$(registry_digest "$tag" || true)
  if [ -z "$digest" ] || ! docker image inspect -f '{{join .RepoDigests "\n"}}' "$target" | grep -qx "$registry/$repo@$digest"; then
    echo "testbed: pushing $target" >&2
    docker push -q "$target" >/dev/null
    digest=$(registry_digest "$tag")
  fi
  [ -n "$digest" ] || { echo "testbed: the registry has no manifest for $target" >&2; exit 1; }
  local key
  key=LLMFLEET_TEST_VLLM_IMAGE_$(echo "$name" | tr '[:lower:]' '[:upper:]')
  echo "$key=$target@$digest"
  echo "${key}_FROM_HOSTS=$bridge_ip:${registry##*:}/$repo:$tag@$digest"
}

{
  variant v2 'LABEL llmfleet.test=v2'
  variant broken 'LABEL llmfleet.test=broken' 'ENTRYPOINT ["/bin/false"]'
} >> "$env_file"
