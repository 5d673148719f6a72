#!/usr/bin/env bash
# Test-bed step: generate the tiny random Qwen3-MoE model (tests/images/tiny-model/make_tiny_model.py, run
# inside the vllm-cpu image: the host venv has no torch) into .cache/models/tiny-qwen3-moe, and its variant with
# head size 16 (make_tiny_model_hd16.py), which the vLLM CPU engine's attention does not support (it starts, then
# dies on its first request: the model that cannot serve of the rollback and bad-input tests), into
# .cache/models/tiny-qwen3-moe-hd16; each cached by its scripts' hash and the image's recipe hash.
# Two more public architectures, shaped like their published config.json (make_tiny_arch.py; #29 item 6), deployed by
# repo id without a profile file: a dense Llama (LlamaForCausalLM) into .cache/models/tiny-llama and a Gemma 3 text
# model with sliding-window layers (Gemma3ForCausalLM) into .cache/models/tiny-gemma3.
# Appends LLMFLEET_TEST_MODEL_DIR=<absolute path>, LLMFLEET_TEST_UNSERVABLE_MODEL_DIR=<absolute path> and
# LLMFLEET_TEST_ARCH_MODEL_DIRS=<name>=<absolute path>,... (the hub mirrors publish each as llmfleet-test/<name>).
# Usage: 40-tiny-model.sh ENV_FILE
# testbed-needs: vllm-image
set -euo pipefail
env_file=${1:?usage: 40-tiny-model.sh ENV_FILE}
top=$(cd "$(dirname "$0")/../../.." && pwd)
recipe="$top/tests/images/tiny-model"
models="${LLMFLEET_CACHE_DIR:-$top/.cache}/models"
image=$("$top/tests/testbed/image.sh" vllm-cpu)

generate() {  # generate OUT SCRIPT...: the first script makes the model, every script's hash is in the stamp;
  # GEN_ARGS: words given to the first script before the output directory
  local out=$1 key
  shift
  key="$(cd "$recipe" && cat "$@" | sha256sum | cut -c1-16) ${GEN_ARGS:+$GEN_ARGS }$image"
  [ "$(cat "$out/.llmfleet-stamp" 2>/dev/null)" = "$key" ] && return 0
  echo "testbed: generating the tiny model into $out ($1)" >&2
  rm -rf "$out.partial"; mkdir -p "$out.partial"
  docker run --rm --network none --user "$(id -u):$(id -g)" -e HOME=/tmp -e PYTHONHASHSEED=0 \
    -e TOKENIZERS_PARALLELISM=false -v "$recipe:/recipe:ro" -v "$out.partial:/out" \
    --entrypoint python3 "$image" "/recipe/$1" ${GEN_ARGS:+"$GEN_ARGS"} /out >&2
  echo "$key" > "$out.partial/.llmfleet-stamp"
  rm -rf "$out"; mv "$out.partial" "$out"
}
generate "$models/tiny-qwen3-moe" make_tiny_model.py
generate "$models/tiny-qwen3-moe-hd16" make_tiny_model_hd16.py make_tiny_model.py
GEN_ARGS=llama generate "$models/tiny-llama" make_tiny_arch.py make_tiny_model.py
GEN_ARGS=gemma3 generate "$models/tiny-gemma3" make_tiny_arch.py make_tiny_model.py
{
  echo "LLMFLEET_TEST_MODEL_DIR=$models/tiny-qwen3-moe"
  echo "LLMFLEET_TEST_UNSERVABLE_MODEL_DIR=$models/tiny-qwen3-moe-hd16"
  echo "LLMFLEET_TEST_ARCH_MODEL_DIRS=tiny-llama=$models/tiny-llama,tiny-gemma3=$models/tiny-gemma3"
} >> "$env_file"
