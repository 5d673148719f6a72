#!/usr/bin/env bash
# Architecture matrix on the real vLLM CUDA engine (vLLM 0.22.0), run on a lent GPU machine (tests/device/README.md,
# "Architecture matrix").  Uses the vLLM install that tests/device/run_vllm_engine.sh made in $STAGE/site.
#   run.sh receive [N...] copy the staged parts N ($PARTS/pN/*, $PARTS default $KIT, .cache/archstage; none named:
#                         every one carried) to $STAGE/parts
#   run.sh start          join + install (as run_vllm_engine.sh start, without its cases), then `all` detached
#   run.sh wait S         wait up to S s; logs to $OUT/logs.tgz
#   run.sh all            every case of cases.json (ONLY: a subset), one engine at a time, log $STAGE/logs/<case>.log
# receive, start and wait: ../stage_steps.sh (copied into the kit by stage.sh).
set -u -o pipefail
STAGE=${STAGE:-/root/stage}
KIT=${KIT:-.cache/archstage}
PARTS=${PARTS:-$KIT}
LOGS=$STAGE/logs
KIT_SRC=$KIT/kit
WAIT_PATTERN='Traceback\|Error\|error'
# beside this file in the kit; one folder up in the repository
steps=$(dirname "${BASH_SOURCE[0]}")/stage_steps.sh
[ -e "$steps" ] || steps=$(dirname "${BASH_SOURCE[0]}")/../stage_steps.sh
# shellcheck source=tests/device/stage_steps.sh
. "$steps"
PY=${PYTHON:-python3}
export PATH=$PATH:/usr/local/nvidia/bin
export PYTHONPATH=$STAGE/site PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_USE_DEEP_GEMM=0 VLLM_ALLOW_INSECURE_SERIALIZATION=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

gpu_idle() {
  local used=
  for _ in $(seq 1 30); do
    used=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1)
    [ -n "$used" ] && [ "$used" -lt 2000 ] && return 0
    sleep 2
  done
  note "GPU still shows ${used:-?} MiB used"
}

one() {
  local c=$1 cfg log limit
  cfg=$("$PY" -c 'import json,sys; print(next(x["config"] for x in json.load(open(sys.argv[1]))["cases"] if x["case"]==sys.argv[2]))' "$STAGE/kit/cases.json" "$c")
  mkdir -p "$STAGE/models/$cfg"
  cp "$STAGE/kit/configs/$cfg.json" "$STAGE/models/$cfg/config.json"
  log=$LOGS/$c.log
  case $c in *eager*) limit=240 ;; *) limit=420 ;; esac
  gpu_idle
  note "$c: start"
  echo "HARNESS_JSON {\"case\": \"$c\", \"config\": \"$cfg\", \"limit_s\": $limit}" > "$log"
  timeout "$limit" "$PY" "$STAGE/kit/driver.py" "$STAGE/kit/cases.json" "$c" "$STAGE/models/$cfg" >> "$log" 2>&1
  echo "HARNESS_EXIT {\"rc\": $?}" >> "$log"
  note "$c: $(grep -ho 'Available KV cache memory: [0-9.]* GiB\|Maximum concurrency[^\"]*' "$log" | tr '\n' ' ' | cut -c1-200)"
}

case ${1:-} in
  receive) shift; stage_receive "$@" ;;
  start) stage_start ;;
  wait) stage_wait "${2:-540}" ;;
  all)
    note "all: begin"
    # ONLY="case ...": those cases; ONLY=lent: the cases whose "gpu" names the GPU that came (nvidia-smi's name),
    # in cases.json's order, so one staged kit serves whichever card is lent and the first cases are the ones to keep.
    lent=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
    for c in $("$PY" -c 'import json,sys
cases = json.load(open(sys.argv[1]))["cases"]
if sys.argv[3] == "lent":
    cases = [x for x in cases if x.get("gpu") and x["gpu"] in sys.argv[2].split()]
print(" ".join(x["case"] for x in cases))' "$STAGE/kit/cases.json" "$lent" "${ONLY:-}"); do
      [ -n "${ONLY:-}" ] && [ "$ONLY" != lent ] && case " $ONLY " in *" $c "*) ;; *) continue ;; esac
      one "$c"
    done
    note "all: done"; touch "$LOGS/ALL_DONE" ;;
  run) shift; mkdir -p "$LOGS"; for c in "$@"; do one "$c"; done ;;
  *) sed -n 2,10p "$0"; exit 2 ;;
esac
