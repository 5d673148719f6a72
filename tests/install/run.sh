#!/usr/bin/env bash
# Install test: the built tarball installs with ansible-galaxy into an empty collections path and works from a
# directory outside the checkout, as a user who never cloned the repository would run it.
#   tests/install/run.sh TARBALL        (make install-test builds the tarball first)
# Offline: the collection's dependencies (community.docker, community.general) are satisfied by the `ansible`
# bundle installed in the venv; nothing is downloaded.
set -euo pipefail
tarball=$(realpath "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/.venv/bin"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# Nothing from the checkout: no ansible.cfg, no collections/ link, no roles path.
unset ANSIBLE_CONFIG ANSIBLE_ROLES_PATH
export ANSIBLE_COLLECTIONS_PATH="$work/collections" ANSIBLE_NOCOLOR=1 ANSIBLE_LOCALHOST_WARNING=0

echo "=== ansible-galaxy collection install $(basename "$tarball") (into an empty $work/collections)"
"$bin/ansible-galaxy" collection install --offline -p "$work/collections" "$tarball"
installed="$work/collections/ansible_collections/llmfleet/vllm"
test -f "$installed/MANIFEST.json"
"$bin/ansible-galaxy" collection list llmfleet.vllm | grep -F "$work/collections/ansible_collections"

version=$("$bin/python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["collection_info"]["version"])' \
  "$installed/MANIFEST.json")
[[ $(basename "$tarball") == "llmfleet-vllm-$version.tar.gz" ]] \
  || { echo "install test: $(basename "$tarball") installed as version $version"; exit 1; }

echo "=== ansible-doc from the installed collection: every plugin and role it lists renders, without warning"
"$bin/ansible-doc" llmfleet.vllm.model_fetch | grep -F "$installed/plugins/modules/model_fetch.py"
shipped_modules=$(find "$installed/plugins/modules" -name '*.py' ! -name '__init__.py' | wc -l)
for type in module filter lookup callback role; do
  names=$("$bin/ansible-doc" -t "$type" -l llmfleet.vllm --json \
    | "$bin/python" -c 'import json, sys; print(" ".join(sorted(json.load(sys.stdin))))')
  [[ -n $names ]] || { echo "install test: ansible-doc lists no $type of llmfleet.vllm"; exit 1; }
  # shellcheck disable=SC2086  # one argument per plugin name
  "$bin/ansible-doc" -t "$type" $names >"$work/doc-$type.txt" 2>"$work/doc-$type.err" \
    || { cat "$work/doc-$type.err"; exit 1; }
  if grep -E '\[(ERROR|WARNING|DEPRECATION)' "$work/doc-$type.err"; then exit 1; fi
  count=$(wc -w <<<"$names")
  if [[ $type == module && $count -ne $shipped_modules ]]; then
    echo "install test: ansible-doc lists $count modules, the tarball ships $shipped_modules"; exit 1
  fi
  echo "$type: $count rendered"
done

echo "=== ansible-playbook llmfleet.vllm.plan (the collection's own playbook, run by name)"
printf '%s\n' 'localhost ansible_connection=local ansible_python_interpreter="{{ ansible_playbook_python }}"' > hosts
"$bin/ansible-playbook" -i hosts llmfleet.vllm.plan -e plan_report_path="$work/plan.md" \
  -e '{"plan_hardware": ["2x H200 NVLink"], "plan_models": ["Qwen/Qwen3.5-35B-A3B-FP8"]}'
echo "=== ansible-playbook --syntax-check llmfleet.vllm.site (the whole pipeline, roles by FQCN)"
"$bin/ansible-playbook" -i hosts --syntax-check llmfleet.vllm.site
grep -q '^| 2x H200 NVLink | Qwen/Qwen3.5-35B-A3B-FP8 | yes |' "$work/plan.md" \
  || { echo "install test: unexpected plan table:"; cat "$work/plan.md"; exit 1; }
echo "install test: OK ($(basename "$tarball"), version $version, installs, renders its docs and plans from outside the checkout)"
