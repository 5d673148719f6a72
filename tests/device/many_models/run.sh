#!/usr/bin/env bash
# Issue #39's GPU proof on a lent H200: two models share one GPU, started one after another (the second once the
# first's /health is 200), each with the --kv-cache-memory-bytes of llmfleet.vllm.vllm_placement's plan
# (plan_argv.py, run on the controller).  vLLM 0.22.0 from the wheels tests/device/stage_vllm_engine.sh staged.
#   run.sh receive [N...] copy the staged parts N ($PARTS/pN/*; none named: every one carried) to $STAGE/parts
#   run.sh start          join + install into $STAGE/site, then `all` detached
#   run.sh wait S         wait up to S s for ALL_DONE; logs to $OUT/logs.tgz
#   run.sh all            serve each instance of argv/ in order.txt's order, ask both, stop them; then the LoRA set
#                         (lora/: Llama alone with a rank-16 adapter make_adapter.py makes here), ask base and adapter
# receive, start and wait: ../stage_steps.sh (copied beside this file by stage.sh).
set -u -o pipefail
STAGE=${STAGE:-/root/stage}
KIT=${KIT:-.devstage/mm}
PARTS=${PARTS:-.devstage}
LOGS=$STAGE/logs
KIT_SRC=$KIT
WAIT_PATTERN='Traceback\|Error\|KV cache\|CLIENT_JSON'
# beside this file in the kit; one folder up in the repository
steps=$(dirname "${BASH_SOURCE[0]}")/stage_steps.sh
[ -e "$steps" ] || steps=$(dirname "${BASH_SOURCE[0]}")/../stage_steps.sh
# shellcheck source=tests/device/stage_steps.sh
. "$steps"
PY=${PYTHON:-python3}
export PATH=$PATH:/usr/local/nvidia/bin
export PYTHONPATH=$STAGE/site PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_USE_DEEP_GEMM=0
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# the plan of the GPU that came (plan_argv.py writes one per GPU the tool may lend): H200 or H100
lent_kit() { case $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) in *H100*) echo H100 ;; *) echo H200 ;; esac; }
field() { "$PY" -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print("\n".join(v) if isinstance(v, list) else v)' "$@"; }
smi() {  # smi TAG: the GPU's memory and each process's, as nvidia-smi reports them
  { nvidia-smi --query-gpu=memory.used,memory.free,memory.total --format=csv,nounits
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,nounits; } > "$LOGS/smi_$1.csv" 2>&1
}

serve() {  # serve INSTANCE [SET]: start it, wait for /health 200 (480 s at most); 0 when healthy
  local i=$1 set=${2:-} spec=$STAGE/kit/$GPU/${2:+$2/}argv/$1.json cfg port model log t0 pid flags
  cfg=$(field "$spec" config); port=$(field "$spec" port); model=$(field "$spec" model)
  mkdir -p "$STAGE/models/$cfg" && cp "$STAGE/kit/$GPU/configs/$cfg.json" "$STAGE/models/$cfg/config.json"
  "$PY" "$STAGE/kit/make_tokenizer.py" "$STAGE/models/$cfg/config.json" "$STAGE/models/$cfg" >> "$LOGS/install.log" 2>&1
  log=$LOGS/serve_${set:+${set}_}$i.log
  mapfile -t flags < <(field "$spec" argv)
  local cmd=("$PY" -m vllm.entrypoints.cli.main serve "$STAGE/models/$cfg" --served-model-name "$model"
             --host 127.0.0.1 --port "$port" --load-format dummy "${flags[@]}")
  echo "HARNESS_JSON {\"instance\": \"$i\", \"device_only\": [\"--load-format dummy\", \"--host\", \"--port\", \"--served-model-name\"], \"argv\": \"${cmd[*]:3}\"}" > "$log"
  smi "before_${set:+${set}_}$i"
  note "$i: start (port $port)"
  t0=$SECONDS
  setsid "${cmd[@]}" >> "$log" 2>&1 < /dev/null &
  pid=$!; echo "$pid" > "$STAGE/$i.pid"
  while [ $((SECONDS - t0)) -lt 480 ]; do
    if [ "$("$PY" -c 'import sys,urllib.request as u
try: print(u.urlopen("http://127.0.0.1:%s/health" % sys.argv[1], timeout=2).status)
except Exception: print(0)' "$port")" = 200 ]; then
      echo "HARNESS_HEALTHY {\"instance\": \"$i\", \"seconds\": $((SECONDS - t0))}" >> "$log"
      note "$i: healthy after $((SECONDS - t0)) s"; smi "after_${set:+${set}_}$i"; return 0
    fi
    kill -0 "$pid" 2>/dev/null || { note "$i: exited before healthy"; return 1; }
    sleep 2
  done
  note "$i: not healthy after 480 s"; return 1
}

stop_all() {  # stop every engine and wait (60 s at most) until the GPU holds no process: the next set starts clean
  for f in "$STAGE"/*.pid; do [ -e "$f" ] && kill -- -"$(cat "$f")" 2>/dev/null; rm -f "$f"; done
  for _ in $(seq 30); do
    [ -z "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader)" ] && break; sleep 2
  done
}

case ${1:-} in
  receive) shift; stage_receive "$@" ;;
  start) stage_start ;;
  wait) stage_wait "${2:-540}" ;;
  all)
    GPU=$(lent_kit)
    note "all: begin, the plan for the $GPU: $(cat "$STAGE/kit/$GPU/order.txt")"
    read -r -a order < "$STAGE/kit/$GPU/order.txt"
    for i in "${order[@]}"; do serve "$i" || break; done
    "$PY" "$STAGE/kit/client.py" "$STAGE/kit/$GPU/argv" > "$LOGS/client.log" 2>&1
    note "client rc=$?: $(tr '\n' ' ' < "$LOGS/client.log" | cut -c1-400)"
    smi after_client
    stop_all
    if [ -d "$STAGE/kit/$GPU/lora" ]; then
      "$PY" "$STAGE/kit/make_adapter.py" "$STAGE/kit/$GPU/lora/configs/meta-llama--Llama-3.1-8B-Instruct.json" \
        "$STAGE/adapters/llama-lora" 16 >> "$LOGS/harness.log" 2>&1
      read -r -a order < "$STAGE/kit/$GPU/lora/order.txt"
      for i in "${order[@]}"; do serve "$i" lora || break; done
      "$PY" "$STAGE/kit/client.py" "$STAGE/kit/$GPU/lora/argv" > "$LOGS/client_lora.log" 2>&1
      note "lora client rc=$?: $(tr '\n' ' ' < "$LOGS/client_lora.log" | cut -c1-600)"
      smi after_lora_client
      stop_all
    fi
    note "all: done"; touch "$LOGS/ALL_DONE" ;;
  *) sed -n 2,10p "$0"; exit 2 ;;
esac
