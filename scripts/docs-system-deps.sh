#!/usr/bin/env bash
# The Debian package `make docs` needs beyond the virtual environment: Graphviz's `dot`,
# which renders the diagrams (installed only when missing; scripts/apt-install.sh).
exec "$(dirname "$0")/apt-install.sh" dot graphviz
