#!/usr/bin/env bash
# Local model hubs for the whole test session (Molecule hosts reach them over the docker bridge):
#   olah (a real Hugging Face mirror, offline) and tests/testbed/modelscope_server.py (the ModelScope
#   download API), both serving ONE git repo built from the tiny test model (LLMFLEET_TEST_MODEL_DIR from
#   40-tiny-model.sh, or a synthetic model when that is absent). Also a wheelhouse of the hub clients for
#   Molecule hosts (pip inside a container cannot verify TLS here; air-gapped hosts work the same way).
# Idempotent: a second run reuses the repo, the wheels and servers that still answer.
# The other tiny architectures of 40-tiny-model.sh (LLMFLEET_TEST_ARCH_MODEL_DIRS, name=dir,...) go into the same
# mirror root as llmfleet-test/<name>, deployed by repo id without a profile file (#29 item 6); so do the pooling
# model and LoRA adapters of 41-tiny-pooling-model.sh (LLMFLEET_TEST_EXTRA_MODEL_DIRS), listed apart in
# LLMFLEET_TEST_HUB_EXTRA_REPOS (they are no generators to deploy alone).
# Appends: LLMFLEET_TEST_HUB_ARCH_REPOS (llmfleet-test/<name>@<commit>,...), LLMFLEET_TEST_HUB_REPO,
#   LLMFLEET_TEST_HUB_COMMIT, LLMFLEET_TEST_HUB_MODEL_DIR,
#   LLMFLEET_TEST_HF_ENDPOINT(_FROM_HOSTS), LLMFLEET_TEST_MS_ENDPOINT(_FROM_HOSTS), LLMFLEET_TEST_WHEELHOUSE,
#   LLMFLEET_TEST_HF_MIRROR_LOG_DIR (olah's access logs: the fleet scenario counts what the hosts downloaded).
# testbed-needs: 40-tiny-model 41-tiny-pooling-model venv
set -euo pipefail
env_file=${1:?usage: 50-hub-mirrors.sh ENV_FILE}
top=$(cd "$(dirname "$0")/../../.." && pwd)
state="$top/.cache/hub-mirrors"
mkdir -p "$state"
py=${LLMFLEET_PYTHON:-$top/.venv/bin/python}
[ -x "$py" ] || py=$(command -v python3)
bindir=$(dirname "$py")
hf_port=${LLMFLEET_HF_MIRROR_PORT:-18790}
ms_port=${LLMFLEET_MS_MIRROR_PORT:-18791}
repo=llmfleet-test/tiny-qwen3-moe
bridge=$(grep '^LLMFLEET_TESTBED_BRIDGE_IP=' "$env_file" | tail -1 | cut -d= -f2- || true)
bridge=${bridge:-172.17.0.1}

model=$(grep '^LLMFLEET_TEST_MODEL_DIR=' "$env_file" | tail -1 | cut -d= -f2- || true)
if [ -z "$model" ] || [ ! -f "$model/config.json" ]; then
  model="$state/synthetic-model"
  [ -f "$model/model.safetensors.index.json" ] || "$py" "$top/tests/testbed/hub_repo.py" synth "$model" --shard-mb 1,2 >/dev/null
fi
arch_dirs=$(grep '^LLMFLEET_TEST_ARCH_MODEL_DIRS=' "$env_file" | tail -1 | cut -d= -f2- || true)
extra_dirs=$(grep '^LLMFLEET_TEST_EXTRA_MODEL_DIRS=' "$env_file" | tail -1 | cut -d= -f2- || true)
publish_list() {  # publish_list NAME=DIR,... LIST_FILE: each as llmfleet-test/<name>; LIST_FILE gets <repo>@<commit> lines
  : > "$2"
  for entry in $(echo "$1" | tr ',' ' '); do
    name=${entry%%=*}
    echo "llmfleet-test/$name@$("$py" "$top/tests/testbed/hub_repo.py" publish "${entry#*=}" "$state/root" "llmfleet-test/$name")" \
      >> "$2"
  done
}
# Rebuild the repos only when a model's files changed.
stamp=$(for d in "$model" $(echo "$arch_dirs,$extra_dirs" | tr ',' '\n' | cut -d= -f2-); do
          (cd "$d" && find . -type f -printf "$d %P %s %T@\n"); done | LC_ALL=C sort | sha256sum | cut -c1-16)
if [ "$(cat "$state/repo.stamp" 2>/dev/null)" != "$stamp" ] || [ ! -d "$state/root/models/$repo/.git" ]; then
  "$py" "$top/tests/testbed/hub_repo.py" publish "$model" "$state/root" "$repo" > "$state/commit"
  publish_list "$arch_dirs" "$state/arch-repos"
  publish_list "$extra_dirs" "$state/extra-repos"
  echo "$stamp" > "$state/repo.stamp"
  for pidf in "$state"/*.pid; do [ -e "$pidf" ] && kill "$(cat "$pidf")" 2>/dev/null || true; rm -f "$pidf"; done
  sleep 1
fi
commit=$(cat "$state/commit")

answers() { curl -s -o /dev/null -m 3 "$1"; }
# A mirror left running by another checkout answers on the same port but serves ITS repo: stop it.
port_pid() { ss -ltnpH "sport = :$1" 2>/dev/null | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2; }
if answers "http://127.0.0.1:$hf_port/" && ! curl -sf -o /dev/null -m 3 "http://127.0.0.1:$hf_port/api/models/$repo/revision/$commit"; then
  pid=$(port_pid "$hf_port"); [ -n "$pid" ] && kill "$pid" 2>/dev/null && sleep 1
fi
if answers "http://127.0.0.1:$ms_port/" && ! curl -s -m 3 "http://127.0.0.1:$ms_port/api/v1/models/$repo/repo/files?Revision=$commit&Recursive=True" | grep -q '"Code": *200'; then
  pid=$(port_pid "$ms_port"); [ -n "$pid" ] && kill "$pid" 2>/dev/null && sleep 1
fi
if ! answers "http://127.0.0.1:$hf_port/api/models/$repo/revision/main"; then
  cat > "$state/olah.toml" <<TOML
[basic]
host = "0.0.0.0"
port = $hf_port
mirrors-path = ["$state/root"]
repos-path = "$state/olah-repos"
log-path = "$state/olah-logs"
[accessibility]
offline = true
TOML
  # The subshell becomes olah (exec) and holds no descriptor of ours: a caller that reads this script's output to
  # its end (subprocess with a pipe) is not kept waiting by a subshell that outlives the script.
  (cd "$state" && exec nohup setsid "$bindir/olah-cli" -c "$state/olah.toml") > "$state/olah.log" 2>&1 < /dev/null &
  echo $! > "$state/olah.pid"
fi
if ! answers "http://127.0.0.1:$ms_port/api/v1/repos/internalAccelerationInfo"; then
  nohup setsid "$py" "$top/tests/testbed/modelscope_server.py" --root "$state/root" --host 0.0.0.0 --port "$ms_port" \
    > "$state/modelscope.log" 2>&1 & echo $! > "$state/modelscope.pid"
fi
for _ in $(seq 1 60); do
  answers "http://127.0.0.1:$hf_port/api/models/$repo/revision/main" && \
    answers "http://127.0.0.1:$ms_port/api/v1/repos/internalAccelerationInfo" && break
  sleep 0.5
done
answers "http://127.0.0.1:$hf_port/api/models/$repo/revision/main" || { echo "olah did not start: $state/olah.log" >&2; exit 1; }

wheels="$top/.cache/wheelhouse"
if [ ! -f "$wheels/.complete" ]; then
  mkdir -p "$wheels"
  "$py" -m pip download -q -d "$wheels" "huggingface_hub>=2.4,<3" "hf-xet>=1.1" "modelscope>=1.40,<2"
  touch "$wheels/.complete"
fi
{
  echo "LLMFLEET_TEST_HUB_ARCH_REPOS=$(paste -sd, "$state/arch-repos" 2>/dev/null || true)"
  echo "LLMFLEET_TEST_HUB_EXTRA_REPOS=$(paste -sd, "$state/extra-repos" 2>/dev/null || true)"
  echo "LLMFLEET_TEST_HUB_REPO=$repo"
  echo "LLMFLEET_TEST_HUB_COMMIT=$commit"
  echo "LLMFLEET_TEST_HUB_MODEL_DIR=$model"
  echo "LLMFLEET_TEST_HF_ENDPOINT=http://127.0.0.1:$hf_port"
  echo "LLMFLEET_TEST_HF_ENDPOINT_FROM_HOSTS=http://$bridge:$hf_port"
  echo "LLMFLEET_TEST_MS_ENDPOINT=http://127.0.0.1:$ms_port"
  echo "LLMFLEET_TEST_MS_ENDPOINT_FROM_HOSTS=http://$bridge:$ms_port"
  echo "LLMFLEET_TEST_WHEELHOUSE=$wheels"
  echo "LLMFLEET_TEST_HF_MIRROR_LOG_DIR=$state/logs"
} >> "$env_file"
