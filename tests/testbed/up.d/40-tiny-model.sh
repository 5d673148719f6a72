#!/usr/bin/env bash
# Test-bed step: generate the tiny random Qwen3-MoE model (tests/images/tiny-model/make_tiny_model.py, run
# inside the vllm-cpu image: the host venv has no torch) into .cache/models/tiny-qwen3-moe, cached by the
# script's hash and the image's recipe hash. Appends LLMFLEET_TEST_MODEL_DIR=<absolute path>.
# Usage: 40-tiny-model.sh ENV_FILE
# testbed-needs: vllm-image
set -euo pipefail
env_file=${1:?usage: 40-tiny-model.sh ENV_FILE}
top=$(cd "$(dirname "$0")/../../.." && pwd)
recipe="$top/tests/images/tiny-model"
out="${LLMFLEET_CACHE_DIR:-$top/.cache}/models/tiny-qwen3-moe"
image=$("$top/tests/testbed/image.sh" vllm-cpu)
key="$(sha256sum "$recipe/make_tiny_model.py" | cut -c1-16) $image"
if [ "$(cat "$out/.llmfleet-stamp" 2>/dev/null)" != "$key" ]; then
  echo "testbed: generating the tiny model into $out" >&2
  rm -rf "$out.partial"; mkdir -p "$out.partial"
  docker run --rm --network none --user "$(id -u):$(id -g)" -e HOME=/tmp -e PYTHONHASHSEED=0 \
    -e TOKENIZERS_PARALLELISM=false -v "$recipe:/recipe:ro" -v "$out.partial:/out" \
    --entrypoint python3 "$image" /recipe/make_tiny_model.py /out >&2
  echo "$key" > "$out.partial/.llmfleet-stamp"
  rm -rf "$out"; mv "$out.partial" "$out"
fi
echo "LLMFLEET_TEST_MODEL_DIR=$out" >> "$env_file"
