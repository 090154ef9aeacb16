#!/usr/bin/env bash
# Screenshots of built documentation pages in headless Chromium (Debian's chromium),
# to look at what the site shows: scripts/screenshot_docs.sh [PAGE.html ...]
# Needs `make docs` first; writes docs/_build/screenshots/<page>.png.
set -euo pipefail
cd "$(dirname "$0")/.."
html=docs/_build/html
out=docs/_build/screenshots
command -v chromium >/dev/null || { echo "chromium not found: apt-get install chromium" >&2; exit 1; }
test -f "$html/index.html" || { echo "no $html/index.html: run make docs first" >&2; exit 1; }
mkdir -p "$out"
pages=("$@")
[ ${#pages[@]} -gt 0 ] || pages=(concepts.html readme-ja.html evaluation.html reference/mcp-tools.html)
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
for page in "${pages[@]}"; do
  name=$(echo "${page%.html}" | tr '/' '-')
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" --window-size="${WIDTH:-1280},${HEIGHT:-2000}" \
    --screenshot="$out/$name.png" "file://$PWD/$html/$page" 2>/dev/null
  echo "$out/$name.png"
done
