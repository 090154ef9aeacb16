"""The Dagster instance file (``$DAGSTER_HOME/dagster.yaml``) that ``make run`` writes.

* telemetry off;
* run monitoring with a worker-death check (``launcher.LocalRunLauncher``): a run whose
  worker died is marked failed, and the pool slots of a finished run are freed after
  ``FREE_SLOTS_AFTER_SECONDS``, so a killed run jams nothing;
* run retries for crashes only (a worker that died, not a step that failed), for the
  jobs that opt in with ``dagster/max_retries`` (the idempotent ingest and index jobs);
* run concurrency: a few runs at once, but one writer of the memory at a time
  (runs tagged ``memory_pipeline/writer``), and every pool (``index_writer``,
  ``source_ingest``) one step at a time;
* storage: SQLite files under ``$DAGSTER_HOME/storage`` by default; PostgreSQL
  (``dagster-postgres``, installed with the project) when the memory store is on
  PostgreSQL too — the connection URL (``postgresql+psycopg2://…``) is read from
  ``DAGSTER_PG_URL`` when Dagster starts, never written into the file.

Usage: ``python -m memory_pipeline.pipeline.instance DAGSTER_HOME [--storage postgres]``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from memory_pipeline.durable import replace_text
from memory_pipeline.pipeline.tags import WRITER_TAG

MAX_CONCURRENT_RUNS = 4
MONITOR_POLL_SECONDS = 15
FREE_SLOTS_AFTER_SECONDS = 10  # after a run ends, slots it still claims are freed
START_TIMEOUT_SECONDS = 300  # a run "starting" this long (its worker never came up) fails
LAUNCHER = {"module": "memory_pipeline.pipeline.launcher", "class": "LocalRunLauncher"}
POSTGRES_URL_ENV = "DAGSTER_PG_URL"
STORAGE = ("sqlite", "postgres")


def instance_config(home: Path, storage: str = "sqlite") -> dict[str, Any]:
    if storage not in STORAGE:
        raise ValueError(f"storage must be one of {', '.join(STORAGE)}, got {storage!r}")
    store: dict[str, Any]
    if storage == "sqlite":
        store = {"sqlite": {"base_dir": str(home.absolute() / "storage")}}
    else:
        store = {"postgres": {"postgres_url": {"env": POSTGRES_URL_ENV}}}
    return {
        "telemetry": {"enabled": False},
        "storage": store,
        "run_launcher": dict(LAUNCHER),
        "run_monitoring": {
            "enabled": True,
            "start_timeout_seconds": START_TIMEOUT_SECONDS,
            "cancel_timeout_seconds": START_TIMEOUT_SECONDS,
            "max_resume_run_attempts": 0,  # a dead worker fails the run; retries start anew
            "poll_interval_seconds": MONITOR_POLL_SECONDS,
            "free_slots_after_run_end_seconds": FREE_SLOTS_AFTER_SECONDS,
        },
        "run_retries": {"enabled": True, "max_retries": 0, "retry_on_asset_or_op_failure": False},
        "concurrency": {
            "runs": {
                "max_concurrent_runs": MAX_CONCURRENT_RUNS,
                "tag_concurrency_limits": [{"key": WRITER_TAG, "limit": 1}],
            },
            "pools": {"default_limit": 1, "granularity": "op"},
        },
    }


def write_instance(home: Path, storage: str = "sqlite") -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "dagster.yaml"
    header = (
        "# Written by `make run` (python -m memory_pipeline.pipeline.instance); rewritten on each run.\n"
        "# PostgreSQL storage: run it with --storage postgres and set "
        f"{POSTGRES_URL_ENV}; see docs/dagster.md.\n"
    )
    body = yaml.safe_dump(instance_config(home, storage), sort_keys=False)
    replace_text(path, header + body)  # a running Dagster may be reading it
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="write $DAGSTER_HOME/dagster.yaml")
    parser.add_argument("home", help="the DAGSTER_HOME folder")
    parser.add_argument("--storage", choices=STORAGE, default="sqlite")
    args = parser.parse_args(argv)
    path = write_instance(Path(args.home), args.storage)
    print(f"wrote {path} ({args.storage} storage)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
