#!/usr/bin/env bash
# scripts/apt-install.sh COMMAND PACKAGE: install Debian's PACKAGE when COMMAND is missing.
# Needs root for that (as on the CI machines). Another apt running at the same moment (an
# unattended upgrade, a second set-up script) is waited for, up to APT_LOCK_WAIT seconds
# (default 600), not taken for a failure.
set -euo pipefail
command_name=$1 package=$2
if command -v "$command_name" >/dev/null; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "$command_name is missing and this is not root: run 'sudo apt-get install $package'" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
wait_secs=${APT_LOCK_WAIT:-600}

# apt-get waits for the dpkg lock itself when told how long to...
install() {
  apt-get -o DPkg::Lock::Timeout="$wait_secs" install -y -qq "$package" >/dev/null
}

# ...but `apt-get update` does not wait for the package lists' lock: retry while that
# lock is what failed it.
update() {
  local deadline=$((SECONDS + wait_secs)) err
  while ! err=$(apt-get -o DPkg::Lock::Timeout="$wait_secs" update -qq 2>&1 >/dev/null); do
    if ! grep -q "Could not get lock" <<<"$err" || [ "$SECONDS" -ge "$deadline" ]; then
      echo "$err" >&2
      return 1
    fi
    sleep 2
  done
}

install || { update && install; }
command -v "$command_name" >/dev/null
