#!/usr/bin/env bash
# Stage the architecture matrix for the lent GPU machine (run HERE, from the repository root):
#   tests/device/arch_matrix/stage.sh DEST [WHEELS]
# DEST    a folder inside the checkout the device tool sends, ignored by git (e.g. .cache/archstage), named in carry
# WHEELS  the vLLM 0.22.0 wheel (trimmed here if not yet) + dependency wheels that tests/device/stage_vllm_engine.sh
#         downloads (default .cache/vllm-wheels; run that script once first)
# Writes DEST/kit (run.sh, stage_steps.sh, driver.py, cases.json, vllm_engine_driver.py, configs/) and DEST/p1..p5
# (the wheels in parts of 46 MiB: the kit + one part stay under the 64 MiB a call may carry).  Then, each call within
# 30 s of the last (tests/device/README.md):
#   run carry [DEST/kit, DEST/p1]  KIT=DEST bash DEST/kit/run.sh receive 1      (2, 3, 4 likewise)
#   run carry [DEST/kit, DEST/p5]  KIT=DEST bash DEST/kit/run.sh receive 5 && ONLY=lent KIT=DEST bash DEST/kit/run.sh start \
#                                   && bash /root/stage/kit/run.sh wait 540
#   run carry [DEST/kit]           bash /root/stage/kit/run.sh wait 540         (until ALL_DONE)
set -eu -o pipefail
top=$(cd "$(dirname "$0")/../../.." && pwd)
DEST=${1:?usage: stage.sh DEST [WHEELS]}
WHEELS=${2:-$top/.cache/vllm-wheels}
[ -n "$(ls "$WHEELS/deps" 2>/dev/null)" ] || {
  echo "no dependency wheels in $WHEELS/deps: run tests/device/stage_vllm_engine.sh first" >&2; exit 2; }
"$top/tests/device/trim_vllm_wheel.sh" "$WHEELS" 0.22.0
mkdir -p "$DEST/kit/configs" "$WHEELS/tar/wheels"
cp "$top"/tests/device/arch_matrix/{run.sh,driver.py,cases.json} "$top/tests/device/vllm_engine_driver.py" \
  "$top"/tests/device/{install_staged_vllm.sh,stage_steps.sh} "$DEST/kit/"
cp "$top"/tests/fixtures/model_configs/*.json "$DEST/kit/configs/"
ln -sf "$WHEELS/vllm-trim.whl" "$WHEELS/tar/wheels/vllm-0.22.0-trim.whl"
ln -sfn "$WHEELS/deps" "$WHEELS/tar/wheels/deps"
rm -f "$WHEELS"/tar/kit.tar.* && rm -rf "$DEST"/p[0-9]*
tar -ch -C "$WHEELS/tar" wheels | split -b 46M -d - "$WHEELS/tar/kit.tar."
n=0
for part in "$WHEELS"/tar/kit.tar.*; do n=$((n + 1)); mkdir -p "$DEST/p$n"; mv "$part" "$DEST/p$n/"; done
ls -la "$DEST"/p* "$DEST/kit"
