#!/usr/bin/env bash
# Stage everything tests/device/run_vllm_engine.sh needs on the lent GPU machine (run HERE, from the repository
# root, with ansible-core and this collection importable: the Makefile's .venv).
#   tests/device/stage_vllm_engine.sh DEST [WHEELS]
# DEST     a folder inside the checkout that the device tool sends, ignored by git (.devstage), named in `carry`
# WHEELS   where the vLLM wheel and its dependency wheels are downloaded and trimmed (default .cache/vllm-wheels)
# Writes:
#   DEST/kit/        run_vllm_engine.sh, vllm_engine_driver.py, make_vllm_tokenizer.py, the synthetic configs,
#                    argv/<case>.json: the collection's rendered argv per case (render_vllm_argv.yml) + the seed's
#   DEST/p1..p5/     kit.tar.00..04: one tar of the trimmed vLLM 0.22.0 wheel and 86 dependency wheels (216 MB),
#                    split into parts of 46 MiB so that each device call (the kit + one part) carries less than 64 MiB
set -eu -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
DEST=${1:?usage: stage_vllm_engine.sh DEST [WHEELS]}
WHEELS=${2:-$top/.cache/vllm-wheels}
VLLM_VERSION=0.22.0
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp)
for p in manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 \
         manylinux_2_26_x86_64 manylinux1_x86_64 manylinux_2_5_x86_64 manylinux_2_31_x86_64; do PLAT+=(--platform "$p"); done

mkdir -p "$WHEELS/deps" "$DEST/kit/argv"
whl=$WHEELS/vllm-$VLLM_VERSION-cp38-abi3-manylinux_2_28_x86_64.whl
"$top/tests/device/trim_vllm_wheel.sh" "$WHEELS" "$VLLM_VERSION"
if [ -z "$(ls "$WHEELS/deps" 2>/dev/null)" ]; then
  # vLLM's requirements less what the machine's image has (torch 2.11, triton, transformers, numpy, ...) and
  # less the kernels it does not need there (flashinfer, deep_gemm, cutlass-dsl, tilelang, humming, ...).
  unzip -p "$whl" '*/METADATA' | sed -n 's/^Requires-Dist: //p' | grep -v 'extra ==' \
    | grep -viE '^(torch|torchaudio|torchvision|flashinfer-python|flashinfer-cubin|apache-tvm-ffi|tilelang|nvidia-cudnn-frontend|fastsafetensors|nvidia-cutlass-dsl|quack-kernels|tokenspeed-mla|humming-kernels|numba)\b' \
    > "$WHEELS/requirements.txt"
  python3 -m pip install --dry-run --ignore-installed --report "$WHEELS/report.json" -q "${PLAT[@]}" \
    --target "$WHEELS/dry" -r "$WHEELS/requirements.txt"
  python3 "$top/tests/device/vllm_deps_missing.py" "$WHEELS/report.json" > "$WHEELS/missing.txt"
  python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$WHEELS/deps" -r "$WHEELS/missing.txt"
fi

# The collection's own rendering of the vLLM flags for each case (the vllm_server role's filters).
ANSIBLE_COLLECTIONS_PATH="$top/collections" ANSIBLE_CONFIG="$top/ansible.cfg" ANSIBLE_LOCALHOST_WARNING=0 \
  "$top/.venv/bin/ansible-playbook" -i localhost, -c local -e "ansible_python_interpreter=$top/.venv/bin/python" \
  "$top/tests/device/render_vllm_argv.yml" -e "out=$DEST/kit/argv" > "$DEST/kit/render.log"
# The seed article's flags (shared/seed; the comparison of shared/fixtures/vllm-h200/seed_bf16_eager_092.log).
cat > "$DEST/kit/argv/seed_bf16_32768_eager-092.json" <<'JSON'
{"case": "seed_bf16_32768_eager-092", "model": "Qwen/Qwen3.5-35B-A3B", "max_model_len": 32768,
 "source": "the seed article's docker run flags (shared/seed), text-only as in the earlier seed fixture",
 "argv": ["--tensor-parallel-size", "1", "--max-model-len", "32768", "--gpu-memory-utilization", "0.92",
          "--enforce-eager", "--dtype", "bfloat16", "--limit-mm-per-prompt", "{\"image\": 0, \"video\": 0}"]}
JSON
cp "$top"/tests/device/{run_vllm_engine.sh,vllm_engine_driver.py,make_vllm_tokenizer.py} "$DEST/kit/"
cp "$top"/tests/device/qwen3.5-35b-a3b-synthetic/config.*.synthetic.json "$DEST/kit/"

rm -rf "$DEST"/p[0-9]*
mkdir -p "$WHEELS/tar/wheels"
ln -sf "$WHEELS/vllm-trim.whl" "$WHEELS/tar/wheels/vllm-$VLLM_VERSION-trim.whl"
ln -sfn "$WHEELS/deps" "$WHEELS/tar/wheels/deps"
tar -ch -C "$WHEELS/tar" wheels | split -b 46M -d - "$WHEELS/tar/kit.tar."
n=0
for part in "$WHEELS"/tar/kit.tar.*; do
  n=$((n + 1)); mkdir -p "$DEST/p$n"; mv "$part" "$DEST/p$n/"
done
ls -la "$DEST"/p* "$DEST/kit" "$DEST/kit/argv"
