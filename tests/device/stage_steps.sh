#!/usr/bin/env bash
# The steps every staged device harness shares (sourced by many_models/run.sh and arch_matrix/run.sh; each stage
# script copies it beside run.sh). The harness sets, before sourcing:
#   STAGE         where the machine keeps the run (/root/stage): parts/, site/, kit/, logs/
#   PARTS         the folder this call carries the staged parts in (pN/kit.tar.NN, one part of 46 MiB per pN)
#   KIT_SRC       the kit folder copied to $STAGE/kit by `start` (it holds run.sh, this file, install_staged_vllm.sh)
#   WAIT_PATTERN  a grep pattern (basic regex) of the log lines `wait` prints
# and defines its own `all` verb: run.sh all, which `start` runs detached.
#   stage_receive [N...]  copy the parts $PARTS/pN/* to $STAGE/parts (no N: every $PARTS/p*/ this call carries)
#   stage_start           join + install the wheels into $STAGE/site (install_staged_vllm.sh), then `all` detached
#   stage_wait [S]        wait up to S s (540) for $LOGS/ALL_DONE; print the harness log, pack the logs to $OUT
LOGS=${LOGS:-$STAGE/logs}

note() { echo "[$(date -u +%T)] $*" | tee -a "$LOGS/harness.log"; }

stage_receive() {
  local n dirs=()
  if [ $# -eq 0 ]; then
    for n in "$PARTS"/p[0-9]*/; do [ -d "$n" ] && dirs+=("${n%/}"); done
  else
    for n in "$@"; do dirs+=("$PARTS/p$n"); done
  fi
  [ ${#dirs[@]} -gt 0 ] || { echo "receive: no parts under $PARTS (p1, p2, ...)" >&2; return 2; }
  mkdir -p "$STAGE/parts"
  for n in "${dirs[@]}"; do cp -f "$n"/* "$STAGE/parts/" || return 1; done
  ls -la "$STAGE/parts"
}

stage_start() {
  local t0
  mkdir -p "$LOGS" "$STAGE/site"
  rm -rf "$STAGE/kit" && cp -r "$KIT_SRC" "$STAGE/kit"
  t0=$SECONDS
  bash "$STAGE/kit/install_staged_vllm.sh" "$STAGE" || { note "start: install failed"; exit 3; }
  note "start: installed in $((SECONDS - t0)) s"
  setsid nohup bash "$STAGE/kit/run.sh" all > "$LOGS/all.out" 2>&1 < /dev/null &
  echo "started all, pid $!"
}

stage_wait() {
  local end=$((SECONDS + ${1:-540}))
  while [ ! -e "$LOGS/ALL_DONE" ] && [ $SECONDS -lt $end ]; do sleep 5; done
  cat "$LOGS/harness.log"
  grep -h "$WAIT_PATTERN" "$LOGS"/*.log 2>/dev/null | cut -c1-240 | tail -25
  [ -n "${OUT:-}" ] && tar -czf "$OUT/logs.tgz" -C "$STAGE" logs
  [ -e "$LOGS/ALL_DONE" ] && echo ALL_DONE
}
