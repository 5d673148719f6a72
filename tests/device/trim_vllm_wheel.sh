#!/usr/bin/env bash
# Make WHEELS/vllm-trim.whl from the vLLM wheel in WHEELS (downloaded there first if absent), for the lent GPU machine:
#   tests/device/trim_vllm_wheel.sh WHEELS VERSION
set -eu -o pipefail
WHEELS=${1:?usage: trim_vllm_wheel.sh WHEELS VERSION} VLLM_VERSION=${2:?usage: trim_vllm_wheel.sh WHEELS VERSION}
[ -e "$WHEELS/vllm-trim.whl" ] && exit 0
whl=$WHEELS/vllm-$VLLM_VERSION-cp38-abi3-manylinux_2_28_x86_64.whl
[ -e "$whl" ] || python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 -d "$WHEELS" "vllm==$VLLM_VERSION"
cp "$whl" "$WHEELS/vllm-trim.whl.part"
# Not used on Hopper (FlashAttention 2, FlashMLA), the Rust front end, DeepGEMM for other Pythons: 261 -> 165 MB.
zip -q -d "$WHEELS/vllm-trim.whl.part" vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so vllm/vllm-rs vllm/_flashmla_C.abi3.so \
  'vllm/third_party/deep_gemm/_C.cpython-31[0134]-x86_64-linux-gnu.so'
mv "$WHEELS/vllm-trim.whl.part" "$WHEELS/vllm-trim.whl"
