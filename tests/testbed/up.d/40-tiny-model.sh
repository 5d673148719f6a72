#!/usr/bin/env bash
# Test-bed step: generate the tiny random Qwen3-MoE model (tests/images/tiny-model/make_tiny_model.py, run
# inside the vllm-cpu image: the host venv has no torch) into .cache/models/tiny-qwen3-moe, cached by the
# script's hash and the image's recipe hash; and its variant with head size 16, which the vLLM CPU engine's
# attention does not support (it starts, then dies on its first request: the rollback test's model that cannot
# serve), into .cache/models/tiny-qwen3-moe-hd16.
# Appends LLMFLEET_TEST_MODEL_DIR=<absolute path> and LLMFLEET_TEST_UNSERVABLE_MODEL_DIR=<absolute path>.
# Usage: 40-tiny-model.sh ENV_FILE
# testbed-needs: vllm-image
set -euo pipefail
env_file=${1:?usage: 40-tiny-model.sh ENV_FILE}
top=$(cd "$(dirname "$0")/../../.." && pwd)
recipe="$top/tests/images/tiny-model"
models="${LLMFLEET_CACHE_DIR:-$top/.cache}/models"
image=$("$top/tests/testbed/image.sh" vllm-cpu)

generate() {  # generate OUT HEAD_DIM
  local out=$1 head_dim=$2
  local key="$(sha256sum "$recipe/make_tiny_model.py" | cut -c1-16) $image $head_dim"
  [ "$(cat "$out/.llmfleet-stamp" 2>/dev/null)" = "$key" ] && return 0
  echo "testbed: generating the tiny model (head size $head_dim) into $out" >&2
  rm -rf "$out.partial"; mkdir -p "$out.partial"
  docker run --rm --network none --user "$(id -u):$(id -g)" -e HOME=/tmp -e PYTHONHASHSEED=0 \
    -e TOKENIZERS_PARALLELISM=false -e LLMFLEET_TINY_HEAD_DIM="$head_dim" -v "$recipe:/recipe:ro" \
    -v "$out.partial:/out" --entrypoint python3 "$image" /recipe/make_tiny_model.py /out >&2
  echo "$key" > "$out.partial/.llmfleet-stamp"
  rm -rf "$out"; mv "$out.partial" "$out"
}
generate "$models/tiny-qwen3-moe" 64
generate "$models/tiny-qwen3-moe-hd16" 16
echo "LLMFLEET_TEST_MODEL_DIR=$models/tiny-qwen3-moe" >> "$env_file"
echo "LLMFLEET_TEST_UNSERVABLE_MODEL_DIR=$models/tiny-qwen3-moe-hd16" >> "$env_file"
