#!/usr/bin/env bash
# Start the machine's PostgreSQL 15 cluster and let the current user connect
# over the Unix socket. Idempotent; needs root (as on the CI machines).
set -euo pipefail
if ! command -v pg_ctlcluster >/dev/null; then
  echo "pg_ctlcluster not found: install the postgresql package (apt-get install postgresql)" >&2
  exit 1
fi
pg_ctlcluster 15 main start 2>/dev/null || pg_lsclusters
for _ in $(seq 1 30); do
  pg_isready -q && break
  sleep 0.5
done
pg_isready
runuser -u postgres -- psql -tAc "SELECT 1 FROM pg_roles WHERE rolname='$(id -un)'" | grep -q 1 \
  || runuser -u postgres -- createuser -s "$(id -un)"
