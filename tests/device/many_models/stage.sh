#!/usr/bin/env bash
# Stage the many-models kit (run HERE, from the repository root):  tests/device/many_models/stage.sh DEST [PLANS]
# DEST   a folder inside the checkout the device tool sends, ignored by git (e.g. .devstage/mm), named in carry
# PLANS  where plan_argv.py writes each GPU's placement (plan-<GPU>.json), for the fixture (default: DEST/plans)
# The wheels: the parts p1..p5 (46 MiB each) that tests/device/stage_vllm_engine.sh or arch_matrix/stage.sh wrote
# (README.md has the calls; PARTS= names their folder on the machine).
set -eu -o pipefail
top=$(cd "$(dirname "$0")/../../.." && pwd)
DEST=${1:?usage: stage.sh DEST [PLANS]}
rm -rf "$DEST" && mkdir -p "$DEST"
cp "$top"/tests/device/many_models/{run.sh,make_tokenizer.py,make_adapter.py,client.py} \
  "$top"/tests/device/{install_staged_vllm.sh,stage_steps.sh} "$DEST/"
PYTHONPATH=$top/collections "${PYTHON:-python3}" "$top/tests/device/many_models/plan_argv.py" "$DEST" "${2:-$DEST/plans}"
find "$DEST" -type f | sort
