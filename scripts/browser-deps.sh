#!/usr/bin/env bash
# The Debian package the viewer's tests need beyond the virtual environment: Chromium, the
# real browser they drive (tests/ui; installed only when missing; scripts/apt-install.sh).
exec "$(dirname "$0")/apt-install.sh" chromium chromium
