"""Engine creation and schema migration for SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

from memory_pipeline.errors import InvalidInputError

MIGRATIONS = Path(__file__).parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 30_000
WRITE_OPTION = "memory_pipeline_write"


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def _enable_wal(cur: Any) -> None:
    """Switch the file to WAL, waiting out another process doing the same.

    Changing the journal mode needs the file to itself, and SQLite may refuse at
    once ("database is locked") instead of calling the busy handler, e.g. while a
    second process opens the same new file. The mode is stored in the file, so the
    wait ends as soon as one of them has switched it.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # WAL lets the serving process read while the pipeline writes; the busy
    # timeout turns brief writer contention into a wait instead of an error.
    # The busy timeout first: switching a new file to WAL waits for a lock too.
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    _enable_wal(cur)
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def _sqlite_begin(conn: sa.Connection) -> None:
    write = conn.get_execution_options().get(WRITE_OPTION, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def writer(engine: Engine) -> Engine:
    """The same engine (same pool) whose transactions take the write lock up front."""
    return engine.execution_options(**{WRITE_OPTION: True})


def create_engine(url: str) -> Engine:
    """Build an engine; SQLite gets WAL, a busy timeout and foreign keys."""
    if url.startswith("sqlite"):
        db_path = url.split("///", 1)[-1]
        if db_path and db_path != ":memory:":
            parent = Path(db_path).parent
            if not parent.exists():
                raise InvalidInputError(
                    f"database folder {parent} does not exist; create it or point "
                    "HYBRID_RAG_DB_PATH somewhere else"
                )
        # isolation_level=None hands BEGIN to us: a write transaction takes the
        # lock up front (BEGIN IMMEDIATE) instead of failing on a lock upgrade.
        engine = sa.create_engine(
            url,
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "isolation_level": None},
        )
        sa.event.listen(engine, "connect", _sqlite_pragmas)
        sa.event.listen(engine, "begin", _sqlite_begin)
        return engine
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    try:
        return sa.create_engine(url, pool_pre_ping=True)
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError) as exc:
        raise InvalidInputError(
            f"database URL {url!r} cannot be used ({exc}); give a file (HYBRID_RAG_DB_PATH) "
            "or a URL such as postgresql://user@/memory?host=/var/run/postgresql"
        ) from exc


def _alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


# Any fixed 64-bit number: the advisory lock that makes PostgreSQL migrations take turns.
_PG_MIGRATION_LOCK = 0x6D656D6F72790001


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest revision (a no-op when it is current).

    Safe when several processes open one new database at once: the migration
    runs inside a transaction that first takes a lock (SQLite: ``BEGIN IMMEDIATE``,
    PostgreSQL: an advisory lock), then reads the revision again, so the
    processes that waited find the schema made and do nothing.
    """
    cfg = _alembic_config()
    head = ScriptDirectory.from_config(cfg).get_current_head()
    with engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    if current == head:
        return
    with writer(engine).begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
        if MigrationContext.configure(conn).get_current_revision() == head:
            return
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
