#!/usr/bin/env bash
# Build llmfleet.vllm's execution environment with ansible-builder (execution-environment.yml), cached
# by a content hash like the test-bed images: the tag is the hash of the recipe (the EE files, the
# collection's content as its tarball's FILES.json lists it, the packed community collections, the base
# image), so a second run with nothing changed rebuilds nothing.
# Usage: ee/build.sh            -> prints the image reference (llmfleet-ee/llmfleet-vllm:<hash>)
# Env: ANSIBLE_BUILDER (default: ansible-builder on PATH), LLMFLEET_EE_BASE_IMAGE (default: the test
#      bed's debian12-python image, built if missing), LLMFLEET_EE_BUILD_CA (a CA bundle pip inside the
#      build should trust; default /etc/ssl/certs/ca-certificates.crt when it exists: a TLS-intercepting
#      proxy's CA lives there), LLMFLEET_EE_REPO (default llmfleet-ee/llmfleet-vllm).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
builder=${ANSIBLE_BUILDER:-ansible-builder}
repo=${LLMFLEET_EE_REPO:-llmfleet-ee/llmfleet-vllm}
stage=.cache/ee
collections_src=$(python3 - <<'PY' 2>/dev/null || true
import ansible_collections, os
print(os.path.dirname(ansible_collections.__file__) if ansible_collections.__file__ else list(ansible_collections.__path__)[0])
PY
)
[ -n "$collections_src" ] && [ -d "$collections_src/community/docker" ] || {
  echo "ee/build.sh: the 'ansible' bundle is not importable by python3 (activate .venv: make venv)" >&2; exit 2; }

rm -rf "$stage/collections" "$stage/ca"
mkdir -p "$stage/collections" "$stage/ca"
# This collection, built from the checkout (build_ignore in galaxy.yml applies).
ansible-galaxy collection build --force --output-path "$stage/collections" . >/dev/null
mv "$stage"/collections/llmfleet-vllm-*.tar.gz "$stage/collections/llmfleet.vllm.tar.gz"
# community.* packed from the bundle's installed copies as installable artifacts (ee/pack_collection.py).
for name in community.docker community.general community.library_inventory_filtering_v1; do
  python3 ee/pack_collection.py "$collections_src/${name/.//}" "$stage/collections/$name.tar.gz"
done
ca=${LLMFLEET_EE_BUILD_CA-/etc/ssl/certs/ca-certificates.crt}
if [ -n "$ca" ] && [ -s "$ca" ]; then cp "$ca" "$stage/ca/build-ca.pem"; fi

base=${LLMFLEET_EE_BASE_IMAGE:-$(tests/testbed/image.sh debian12-python)}
# The hash: the recipe files, each tarball's FILES.json (a sha256 of every file it holds), the base image.
hash=$( { sha256sum execution-environment.yml requirements.txt bindep.txt meta/execution-environment.yml;
          find ee -type f ! -name '*.pyc' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum;
          for t in "$stage"/collections/*.tar.gz; do basename "$t"; tar -xzOf "$t" FILES.json; done;
          docker image inspect -f '{{.Id}}' "$base"; } | sha256sum | cut -c1-16)
ref="$repo:$hash"
if ! docker image inspect "$ref" >/dev/null 2>&1; then
  echo "ee: building $ref from $base" >&2
  start=$(date +%s)
  "$builder" build -f execution-environment.yml --context "$stage/context" --container-runtime docker \
    --build-arg EE_BASE_IMAGE="$base" --tag "$ref" -v 2 >&2
  echo "ee: built $ref in $(( $(date +%s) - start ))s" >&2
fi
docker tag "$ref" "$repo:latest"
echo "$ref"
