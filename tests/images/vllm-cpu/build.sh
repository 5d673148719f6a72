#!/usr/bin/env bash
# Build the vLLM CPU test image offline: a Debian 12 + Python 3.11 base built here (no registry to pull one
# from) and a wheelhouse downloaded on the host (wheelhouse.sh, cached), installed with --no-index.
# Usage: build.sh IMAGE_REF   (called by tests/testbed/image.sh, which owns caching by content hash)
set -euo pipefail
ref=$1
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
base=$("$top/tests/testbed/image.sh" debian12-python)
wheels=$("$here/wheelhouse.sh")
ctx=$(mktemp -d /var/tmp/llmfleet-vllm-cpu-ctx.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
cp "$here/Dockerfile" "$here/requirements.lock" "$here/version-record.py" "$ctx/"
# Hard links when the cache shares the file system with /var/tmp (no copy of ~600 MB), a copy otherwise.
cp -al "$wheels" "$ctx/wheels" 2>/dev/null || cp -a "$wheels" "$ctx/wheels"
docker build -q --build-arg "BASE_IMAGE=$base" -t "$ref" "$ctx" >/dev/null
