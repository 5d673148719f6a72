#!/usr/bin/env bash
# Test-bed step: generate the tiny random Llama with attention head size 16 (a model the vLLM CPU engine starts but
# cannot serve; tests/images/tiny-model/make_tiny_llama_hd16.py, run inside the vllm-cpu image) into
# .cache/models/tiny-llama-hd16, cached by the scripts' hash and the image's recipe hash.
# Appends LLMFLEET_TEST_MODEL_HD16_DIR=<absolute path>.
# Usage: 41-tiny-llama-hd16.sh ENV_FILE
# testbed-needs: vllm-image
set -euo pipefail
env_file=${1:?usage: 41-tiny-llama-hd16.sh ENV_FILE}
top=$(cd "$(dirname "$0")/../../.." && pwd)
recipe="$top/tests/images/tiny-model"
out="${LLMFLEET_CACHE_DIR:-$top/.cache}/models/tiny-llama-hd16"
image=$("$top/tests/testbed/image.sh" vllm-cpu)
key="$(cat "$recipe/make_tiny_model.py" "$recipe/make_tiny_llama_hd16.py" | sha256sum | cut -c1-16) $image"
if [ "$(cat "$out/.llmfleet-stamp" 2>/dev/null)" != "$key" ]; then
  echo "testbed: generating the tiny head-size-16 Llama into $out" >&2
  rm -rf "$out.partial"; mkdir -p "$out.partial"
  docker run --rm --network none --user "$(id -u):$(id -g)" -e HOME=/tmp -e PYTHONHASHSEED=0 \
    -e TOKENIZERS_PARALLELISM=false -v "$recipe:/recipe:ro" -v "$out.partial:/out" \
    --entrypoint python3 "$image" /recipe/make_tiny_llama_hd16.py /out >&2
  echo "$key" > "$out.partial/.llmfleet-stamp"
  rm -rf "$out"; mv "$out.partial" "$out"
fi
echo "LLMFLEET_TEST_MODEL_HD16_DIR=$out" >> "$env_file"
