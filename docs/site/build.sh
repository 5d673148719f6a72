#!/usr/bin/env bash
# Builds the collection's docs site (make docs): antsibull-docs writes a page per module, plugin and role entry
# point from the collection as the checkout holds it (plugin DOCUMENTATION, meta/argument_specs.yml) plus the extra
# docs of docs/docsite/, and Sphinx renders them with the guides of docs/ (Markdown, through MyST) into HTML.
#   docs/site/build.sh [DEST]      (default .cache/docs; the site is DEST/html, its front page DEST/html/index.html)
# Offline: no intersphinx (docs/site/conf.py links Ansible's own pages by URL). Warnings fail the build.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=$(realpath -m "${1:-$root/.cache/docs}")
bin="$root/.venv/bin"
export PATH="$bin:$PATH" ANSIBLE_COLLECTIONS_PATH="$root/collections" ANSIBLE_CONFIG="$root/ansible.cfg"

rm -rf "$dest" && mkdir -p "$dest/rst"
chmod og-w "$dest/rst"  # antsibull-docs wants the directory writable by itself only
cd "$root"
antsibull-docs --config-file docs/site/antsibull-docs.cfg collection --cleanup everything --fail-on-error \
  --use-current --squash-hierarchy --dest-dir "$dest/rst" llmfleet.vllm
# The guides: each docsite page (docs/docsite/rst/*.rst) is a label, a stand-in text for sites built from the
# installed collection, and a marker line naming its Markdown source, `.. llmfleet-guide: docs/PLANNER.md`. Here
# the page becomes its label and an include of that file (MyST; the guide's own heading is the title), copied
# under guides/ (Sphinx reads an include path that starts with / from the top of the site's sources).
mkdir -p "$dest/rst/guides"
for page in "$dest"/rst/docsite/*.rst; do
  source=$(sed -n 's/^\.\. llmfleet-guide: *//p' "$page")
  [[ -n $source ]] || { echo "$page: no '.. llmfleet-guide: FILE' marker" >&2; exit 1; }
  cp "$source" "$dest/rst/guides/"
  label=$(grep -m1 '^\.\. _ansible_collections\.' "$page")
  printf '%s\n\n.. include:: /guides/%s\n   :parser: myst_parser.sphinx_\n' "$label" "$(basename "$source")" >"$page"
done
sphinx-build -b html -c docs/site -d "$dest/doctrees" -W --keep-going -q "$dest/rst" "$dest/html"
echo "docs site: $dest/html/index.html ($(find "$dest/html" -name '*.html' | wc -l) pages, $(du -sh "$dest/html" | cut -f1))"
