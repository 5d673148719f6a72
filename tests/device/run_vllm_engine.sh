#!/usr/bin/env bash
# The real vLLM CUDA engine (vLLM 0.22.0, random weights of the real Qwen3.5-35B-A3B shapes) run with the
# collection's own rendered `vllm serve` arguments, on a lent GPU machine that has python3 with torch 2.11,
# triton and transformers but no Docker and no network.  tests/device/README.md says how to stage and call it.
#
#   run_vllm_engine.sh receive N   copy the staged part N (.devstage/pN/*) to $STAGE/parts (upload calls)
#   run_vllm_engine.sh start       join the parts, install vLLM + deps into $STAGE/site, write the model dirs,
#                                  then start `all` detached (setsid) so that it outlives this call
#   run_vllm_engine.sh wait S      wait up to S seconds for `all` to finish; pack $STAGE/logs into $OUT/logs.tgz
#   run_vllm_engine.sh all         the runs, in this order (each log: $STAGE/logs/<kind>_<case>.log):
#       offline_bf16_32768_prefix-on      planner argv; + offline throughput, 512 x 1024 tokens in, 256 out
#       serve_bf16_32768_prefix-on        `vllm serve MODEL --served-model-name .. --host .. --port .. <argv>`,
#                                         then /v1/models, /v1/completions, /v1/chat/completions
#       offline_bf16_32768_prefix-off     planner argv with features.prefix_caching false (mamba cache 'none')
#       offline_fp8_32768_prefix-on       planner argv for the FP8 checkpoint
#       offline_bf16_262144_prefix-on     planner argv at the native context
#       offline_seed_bf16_32768_eager-092 the seed article's flags; + the same throughput run
#   run_vllm_engine.sh run CASE...  only these (offline_<case> / serve_<case>), in the foreground
#   run_vllm_engine.sh humming      (re)write the stand-in humming package into $STAGE/site
#
# Every log starts with one line `HARNESS_JSON {...}`: the case, the rendered argv, the device-only additions,
# the environment set here.  Device-only, never in the collection's output: --load-format dummy,
# --gdn-prefill-backend triton (FlashInfer is not installed), the env below, a stand-in `humming` package (vLLM
# imports every quantization backend) and the generated tokenizer (make_vllm_tokenizer.py): serve needs one, and
# so does offline, since the rendered --reasoning-parser qwen3 refuses --skip-tokenizer-init.
set -u -o pipefail
STAGE=${STAGE:-/root/stage}
LOGS=$STAGE/logs
PY=${PYTHON:-python3}
SERVED_NAME=qwen3.5-35b-a3b
PORT=8000
export PATH=$PATH:/usr/local/nvidia/bin
export PYTHONPATH=$STAGE/site PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_USE_DEEP_GEMM=0 VLLM_ALLOW_INSECURE_SERIALIZATION=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ENV_KEYS="PYTHONPATH HF_HUB_OFFLINE TRANSFORMERS_OFFLINE VLLM_USE_FLASHINFER_SAMPLER VLLM_USE_DEEP_GEMM VLLM_ALLOW_INSECURE_SERIALIZATION NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS"

note() { echo "[$(date -u +%T)] $*" | tee -a "$LOGS/harness.log"; }

header() {  # header LOG CASE_JSON KIND COMMAND...
  local log=$1 case_json=$2 kind=$3; shift 3
  "$PY" - "$case_json" "$kind" "$ENV_KEYS" "$@" > "$log" <<'PY'
import json, os, sys
case = json.load(open(sys.argv[1]))
env = {k: os.environ.get(k) for k in sys.argv[3].split()}
print("HARNESS_JSON " + json.dumps({"kind": sys.argv[2], "case": case.get("case"), "model": case.get("model"),
      "rendered_argv": case.get("argv"), "source": case.get("source", "tests/device/render_vllm_argv.yml"),
      "plan": case.get("plan"), "env": env, "command": sys.argv[4:]}, sort_keys=True))
PY
}

gpu_idle() {  # wait until the previous engine released the GPU
  local used=
  command -v nvidia-smi > /dev/null || return 0
  for _ in $(seq 1 30); do
    used=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1)
    [ -n "$used" ] && [ "$used" -lt 2000 ] && return 0
    sleep 2
  done
  note "GPU still shows ${used:-?} MiB used"
}

model_dir() { case $1 in fp8_*|*_fp8_*) echo "$STAGE/model/fp8" ;; *) echo "$STAGE/model/bf16" ;; esac; }

BENCH_CASES=" bf16_32768_prefix-on seed_bf16_32768_eager-092 "
BENCH=512,1024,256

offline() {  # offline CASE [--bench N,IN,OUT]; the BENCH_CASES get --bench $BENCH
  local c=$1; shift
  case $BENCH_CASES in *" $c "*) [ $# -eq 0 ] && set -- --bench "$BENCH" ;; esac
  local log=$LOGS/offline_$c.log json=$STAGE/kit/argv/$c.json
  gpu_idle
  header "$log" "$json" offline "$PY" vllm_engine_driver.py offline "$json" "$(model_dir "$c")" "$@"
  note "offline $c: start"
  timeout 540 "$PY" "$STAGE/kit/vllm_engine_driver.py" offline "$json" "$(model_dir "$c")" "$@" >> "$log" 2>&1
  local rc=$?
  echo "HARNESS_EXIT {\"rc\": $rc}" >> "$log"
  note "offline $c: rc=$rc $(grep -ho 'Maximum concurrency.*' "$log" | head -1)"
}

serve() {  # serve CASE: the vllm_server role's command line, argv from the plan, + device-only arguments
  local c=$1 json=$STAGE/kit/argv/$1.json log=$LOGS/serve_$1.log model
  model=$(model_dir "$c")
  mapfile -t argv < <("$PY" -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["argv"]))' "$json")
  local cmd=("$PY" -m vllm.entrypoints.cli.main serve "$model" --served-model-name "$SERVED_NAME"
             --host 0.0.0.0 --port "$PORT" "${argv[@]}" --load-format dummy --gdn-prefill-backend triton)
  gpu_idle
  header "$log" "$json" serve "${cmd[@]}"
  note "serve $c: start"
  local t0=$SECONDS
  "${cmd[@]}" >> "$log" 2>&1 &
  local pid=$!
  "$PY" "$STAGE/kit/vllm_engine_driver.py" client "$PORT" "$SERVED_NAME" --chat --timeout 480 --server-pid $pid \
    >> "$log" 2>&1
  local rc=$?
  echo "HARNESS_SERVE {\"client_rc\": $rc, \"wall_s_to_answers\": $((SECONDS - t0))}" >> "$log"
  kill -INT $pid 2>/dev/null
  for _ in $(seq 1 45); do kill -0 $pid 2>/dev/null || break; sleep 1; done
  if kill -0 $pid 2>/dev/null; then pkill -KILL -P $pid; kill -KILL $pid; fi
  wait $pid 2>/dev/null
  echo "HARNESS_EXIT {\"client_rc\": $rc}" >> "$log"
  note "serve $c: client rc=$rc $(grep -ho 'Maximum concurrency.*' "$log" | head -1)"
}

humming_standin() {
  # humming-kernels is not installed, but vLLM imports every quantization backend's module (FP8 configs reach
  # vllm/model_executor/layers/quantization/humming.py, which imports humming.dtypes, .layer, .schema, ...):
  # packages whose every attribute is an empty class.  An empty package alone is not enough (seen 2026-12-01).
  local m
  for m in "" dtypes layer schema config utils utils/weight; do
    mkdir -p "$STAGE/site/humming/$m"
    printf '# device-harness stand-in for humming-kernels\ndef __getattr__(name):\n    return type(name, (), {})\n' \
      > "$STAGE/site/humming/$m/__init__.py"
  done
}

capture_env() {
  {
    echo "date: $(date -u +%FT%TZ)  host: $(hostname)  kernel: $(uname -r)"
    nvidia-smi --query-gpu=index,name,memory.total,driver_version,compute_cap --format=csv 2>&1
    "$PY" -c 'import sys, torch, triton, transformers; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "transformers", transformers.__version__)' 2>&1
    "$PY" -c 'import vllm; print("vllm", vllm.__version__, vllm.__file__)' 2>&1 | tail -1
  } > "$LOGS/env.txt"
  # The flags of this vLLM's own `vllm serve`: the CUDA build's help, for llmfleet.vllm.vllm_flag_check.
  "$PY" -m vllm.entrypoints.cli.main serve --help=all > "$LOGS/vllm_serve_help_all.txt" 2>&1
}

all() {
  note "all: begin"
  capture_env &
  offline bf16_32768_prefix-on
  serve bf16_32768_prefix-on
  offline bf16_32768_prefix-off
  offline fp8_32768_prefix-on
  offline bf16_262144_prefix-on
  offline seed_bf16_32768_eager-092
  wait
  note "all: done"
  touch "$LOGS/ALL_DONE"
}

case ${1:-} in
  receive)
    mkdir -p "$STAGE/parts"
    cp -f .devstage/p"$2"/* "$STAGE/parts/" && ls -la "$STAGE/parts" && df -h /root | tail -1 ;;
  humming) humming_standin ;;
  start)
    mkdir -p "$LOGS" "$STAGE/site"
    rm -rf "$STAGE/kit" && cp -r .devstage/kit "$STAGE/kit"
    t0=$SECONDS
    cat "$STAGE"/parts/kit.tar.* | tar -x -C "$STAGE" || { note "start: the parts do not join"; exit 3; }
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$STAGE/site" "$STAGE"/wheels/deps/*.whl \
      > "$LOGS/install.log" 2>&1 || { note "start: pip install failed"; tail "$LOGS/install.log"; exit 3; }
    "$PY" -m zipfile -e "$STAGE"/wheels/vllm-*.whl "$STAGE/site" >> "$LOGS/install.log" 2>&1
    humming_standin
    for v in bf16 fp8; do
      mkdir -p "$STAGE/model/$v"
      cp "$STAGE/kit/config.$v.synthetic.json" "$STAGE/model/$v/config.json"
    done
    "$PY" "$STAGE/kit/make_vllm_tokenizer.py" "$STAGE/model/bf16" >> "$LOGS/install.log" 2>&1
    cp "$STAGE"/model/bf16/tok*.json "$STAGE"/model/bf16/special_tokens_map.json "$STAGE/model/fp8/"
    note "start: installed in $((SECONDS - t0)) s; $(find "$STAGE/site" -mindepth 1 -maxdepth 1 | wc -l) entries in site"
    setsid nohup bash "$STAGE/kit/run_vllm_engine.sh" all > "$LOGS/all.out" 2>&1 < /dev/null &
    echo "started all, pid $!" ;;
  wait)
    end=$((SECONDS + ${2:-540}))
    while [ ! -e "$LOGS/ALL_DONE" ] && [ $SECONDS -lt $end ]; do sleep 5; done
    cat "$LOGS/harness.log"
    grep -h "Available KV cache memory\|GPU KV cache size\|Maximum concurrency\|init engine\|STARTUP_DONE\|BENCH_JSON\|Traceback\|Error" \
      "$LOGS"/*.log 2>/dev/null | cut -c1-300 | tail -40
    [ -n "${OUT:-}" ] && tar -czf "$OUT/logs.tgz" -C "$STAGE" logs
    [ -e "$LOGS/ALL_DONE" ] && echo ALL_DONE ;;
  all) all ;;
  run)
    shift; mkdir -p "$LOGS"
    for c in "$@"; do case $c in serve_*) serve "${c#serve_}" ;; offline_*) offline "${c#offline_}" ;; esac; done ;;
  *) sed -n 2,30p "$0"; exit 2 ;;
esac
