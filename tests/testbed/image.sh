#!/usr/bin/env bash
# Build a test-bed image from tests/images/<name>/, cached by a content hash of its recipe:
# the tag is the hash, so a second run finds the image and rebuilds nothing.
# Usage: image.sh NAME   -> prints the image reference (llmfleet-testbed/NAME:<hash>)
# LLMFLEET_TESTBED_IMAGE_REPO: another repository prefix than llmfleet-testbed (tests/bench/p5_cold_demo.py builds
# a cold test bed under its own names that way, leaving the shared images and their :latest tags alone).
set -euo pipefail
name=$1
top=$(cd "$(dirname "$0")/../.." && pwd)
dir="$top/tests/images/$name"
[ -d "$dir" ] || { echo "image.sh: no recipe at $dir" >&2; exit 2; }
# The hash covers every file of the recipe (names and contents) plus any extra inputs it lists.
hash=$( (cd "$dir" && find . -type f ! -name '*.pyc' | LC_ALL=C sort | xargs sha256sum;
         if [ -f "$dir/inputs.txt" ]; then (cd "$top" && grep -v '^#' "$dir/inputs.txt" | xargs -r sha256sum); fi) \
       | sha256sum | cut -c1-16)
prefix=${LLMFLEET_TESTBED_IMAGE_REPO:-llmfleet-testbed}
ref="$prefix/$name:$hash"
# LLMFLEET_TESTBED_IMAGE_REF_ONLY=1: print the reference this recipe builds, build nothing.
if [ "${LLMFLEET_TESTBED_IMAGE_REF_ONLY:-}" = 1 ]; then echo "$ref"; exit 0; fi
if ! docker image inspect "$ref" >/dev/null 2>&1; then
  echo "testbed: building $ref" >&2
  start=$(date +%s)
  if [ -x "$dir/build.sh" ]; then "$dir/build.sh" "$ref"; else docker build -q -t "$ref" "$dir" >/dev/null; fi
  echo "testbed: built $ref in $(( $(date +%s) - start ))s" >&2
fi
docker tag "$ref" "$prefix/$name:latest"
echo "$ref"
