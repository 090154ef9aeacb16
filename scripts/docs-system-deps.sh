#!/usr/bin/env bash
# The Debian packages `make docs` needs beyond the virtual environment: Graphviz's
# `dot`, which renders the diagrams. Installs it only when it is missing; needs root
# for that (as on the CI machines).
set -euo pipefail
if command -v dot >/dev/null; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "Graphviz's dot is missing and this is not root: run 'sudo apt-get install graphviz'" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq graphviz >/dev/null \
  || { apt-get update -qq && apt-get install -y -qq graphviz >/dev/null; }
command -v dot >/dev/null
