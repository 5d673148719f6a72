#!/usr/bin/env bash
# Install the staged vLLM 0.22.0 wheels on a lent GPU machine (tests/device/README.md): join the parts copied to
# STAGE/parts (kit.tar.*), pip-install the dependency wheels and unzip the trimmed vLLM wheel into STAGE/site, add the
# `humming` stand-in (vLLM imports every quantization backend), write STAGE/logs/env.txt.
#   install_staged_vllm.sh STAGE      (the harnesses' `start` verbs call it: arch_matrix/run.sh, many_models/run.sh)
set -u -o pipefail
STAGE=${1:?usage: install_staged_vllm.sh STAGE}
PY=${PYTHON:-python3}
LOGS=$STAGE/logs
mkdir -p "$LOGS" "$STAGE/site"
cat "$STAGE"/parts/kit.tar.* | tar -x -C "$STAGE" || { echo "install: the parts do not join"; exit 3; }
"$PY" -m pip install -q --no-index --no-deps --no-compile --target "$STAGE/site" "$STAGE"/wheels/deps/*.whl \
  > "$LOGS/install.log" 2>&1 || { echo "install: pip install failed"; tail "$LOGS/install.log"; exit 3; }
"$PY" -m zipfile -e "$STAGE"/wheels/vllm-*.whl "$STAGE/site" >> "$LOGS/install.log" 2>&1
for m in "" dtypes layer schema config utils utils/weight; do
  mkdir -p "$STAGE/site/humming/$m"
  printf '# device-harness stand-in for humming-kernels\ndef __getattr__(name):\n    return type(name, (), {})\n' \
    > "$STAGE/site/humming/$m/__init__.py"
done
{ nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv;
  PYTHONPATH=$STAGE/site "$PY" -c 'import vllm, torch; print("vllm", vllm.__version__, "torch", torch.__version__)'
} > "$LOGS/env.txt" 2>&1
