"""The pipeline's last runs, for the overview, read from its Dagster instance's run storage.

The viewer reads the ``runs`` table that Dagster's run storage keeps (SQLite under the
storage folder ``dagster.yaml`` names, else the home itself, or PostgreSQL when
``dagster.yaml`` says so; docs/dagster.md),
read-only, without importing Dagster: the memory's command runs in an install without
the pipeline's extra, and importing Dagster would cost a page a second and a half.
Dagster's own columns are the contract; ``tests/ui/test_runs.py`` holds it against runs a
real Dagster instance recorded, on both storages.

Where the instance is: ``memory-pipeline ui --dagster-home``, else ``$DAGSTER_HOME``
(``make ui`` passes ``make run``'s).
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
import yaml

HOME_ENV = "DAGSTER_HOME"
#: The runs the overview lists.
LAST = 10
#: Dagster's run statuses as the overview names them.
STATUSES = {
    "QUEUED": "queued",
    "NOT_STARTED": "not started",
    "STARTING": "starting",
    "STARTED": "running",
    "SUCCESS": "succeeded",
    "FAILURE": "failed",
    "CANCELING": "cancelling",
    "CANCELED": "cancelled",
    "MANAGED": "managed",
}


@dataclass(frozen=True)
class PipelineRun:
    run_id: str
    job: str
    status: str  # Dagster's: SUCCESS, FAILURE, STARTED...
    created: dt.datetime  # UTC, as every time below
    started: dt.datetime | None = None
    ended: dt.datetime | None = None

    @property
    def seconds(self) -> float | None:
        """How long it ran; None while it runs or if it never started."""
        if self.started is None or self.ended is None:
            return None
        return (self.ended - self.started).total_seconds()


@dataclass(frozen=True)
class PipelineRuns:
    """The last runs, newest first, or why there are none to show (``note``)."""

    home: Path | None
    runs: list[PipelineRun] = field(default_factory=list)
    note: str = ""


def home_from(flag: str | Path | None) -> Path | None:
    """The Dagster home: the flag's, else ``$DAGSTER_HOME``'s, else none."""
    chosen = flag or os.environ.get(HOME_ENV, "").strip()
    return Path(chosen).expanduser() if chosen else None


def last_runs(home: Path | None, limit: int = LAST) -> PipelineRuns:
    """The last ``limit`` runs the instance at ``home`` recorded; never raises: what went
    wrong is the note."""
    if home is None:
        return PipelineRuns(
            None,
            note="The pipeline's runs show here when the viewer knows its Dagster home: "
            f"memory-pipeline ui --dagster-home DIR, or {HOME_ENV} (make ui passes make run's).",
        )
    try:
        url = runs_url(home)
    except ValueError as exc:
        return PipelineRuns(home, note=str(exc))
    if url is None:
        return PipelineRuns(home, note="No run yet: the pipeline has not run from this home.")
    try:
        return PipelineRuns(home, _read(url, limit))
    except sa.exc.SQLAlchemyError as exc:
        reason = str(exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc).splitlines()[0]
        return PipelineRuns(home, note=f"Could not read the pipeline's runs: {reason}")


def runs_url(home: Path) -> str | None:
    """The database of the runs Dagster at ``home`` keeps; None when it has none yet.

    Raises ``ValueError`` for an instance file this reader cannot follow."""
    if not home.is_dir():
        raise ValueError(f"No Dagster home at {home}.")
    config: dict[str, Any] = {}
    path = home / "dagster.yaml"
    if path.is_file():
        try:
            config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ValueError(f"Could not read {path}: {exc}") from None
    storage = config.get("storage") or {}
    if "postgres" in storage:
        given = (storage["postgres"] or {}).get("postgres_url")
        url = _value(given)
        if not url:
            raise ValueError(
                f"{path} keeps the runs on PostgreSQL; the viewer reads them given a "
                "postgres_url (or its environment variable, set here)"
            )
        scheme, sep, rest = url.partition("://")
        return f"postgresql+psycopg://{rest}" if sep and scheme.startswith("postgres") else url
    if storage and "sqlite" not in storage:
        kinds = ", ".join(sorted(storage))
        raise ValueError(f"{path} keeps the runs in {kinds}; the viewer reads SQLite or PostgreSQL")
    base = _value((storage.get("sqlite") or {}).get("base_dir")) or str(home)
    database = Path(base) / "history" / "runs.db"
    return f"sqlite:///file:{database}?mode=ro&uri=true" if database.is_file() else None


def _value(given: Any) -> str | None:
    """A setting of dagster.yaml: a string, or ``{env: NAME}``."""
    if isinstance(given, dict) and "env" in given:
        return os.environ.get(str(given["env"]), "").strip() or None
    return str(given) if given else None


def _read(url: str, limit: int) -> list[PipelineRun]:
    runs = sa.table(
        "runs",
        sa.column("run_id"),
        sa.column("pipeline_name"),
        sa.column("status"),
        sa.column("create_timestamp"),
        sa.column("start_time"),
        sa.column("end_time"),
        sa.column("id"),
    )
    stmt = sa.select(
        runs.c.run_id,
        runs.c.pipeline_name,
        runs.c.status,
        runs.c.create_timestamp,
        runs.c.start_time,
        runs.c.end_time,
    ).order_by(runs.c.id.desc())
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as c:
            rows = c.execute(stmt.limit(limit)).all()
    finally:
        engine.dispose()
    return [
        PipelineRun(
            run_id=str(run_id),
            job=str(job),
            status=str(status),
            created=_utc(created),
            started=_at(start),
            ended=_at(end),
        )
        for run_id, job, status, created, start, end in rows
    ]


def _at(stamp: float | None) -> dt.datetime | None:
    return None if stamp is None else dt.datetime.fromtimestamp(float(stamp), dt.UTC)


def _utc(value: Any) -> dt.datetime:
    """Dagster writes its create_timestamp in UTC, without a zone."""
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
