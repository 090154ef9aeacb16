"""Engine creation and schema migration for SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from memory_pipeline.errors import InvalidInputError, StorageError
from memory_pipeline.store.failures import DATABASE_UNCHANGED, storage_error
from memory_pipeline.store.urls import sqlite_file as sqlite_file
from memory_pipeline.store.urls import sqlite_url as sqlite_url

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"
#: The newest schema revision (the last file in ``migrations/versions``), known without
#: loading the migration tool: opening a current database only reads its revision.
HEAD_REVISION = "0011"
VERSION_TABLE = "alembic_version"
SQLITE_BUSY_TIMEOUT_MS = 30_000
WRITE_OPTION = "memory_pipeline_write"


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


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """A connection that cannot write ``path``: SQLite's ``mode=ro``.

    Reading a WAL database needs its -shm file beside it; when the folder cannot take
    one (it is read-only too, or its disk is full), nobody can be writing the file in
    WAL mode either, so it is read as it stands (``immutable=1``).
    """
    uri = f"file:{quote(str(path))}?mode=ro"
    options: dict[str, Any] = {
        "uri": True,
        "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000,
        "isolation_level": None,
        "check_same_thread": False,  # the pool hands connections between threads
    }
    conn = sqlite3.connect(uri, **options)
    try:
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1")  # opens the file (and its -shm)
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        name = getattr(exc, "sqlite_errorname", "") or ""
        if not name.startswith(("SQLITE_CANTOPEN", "SQLITE_IOERR", "SQLITE_FULL")):
            raise
    return sqlite3.connect(f"{uri}&immutable=1", **options)


def _read_only_pragmas(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    dbapi_conn.execute("PRAGMA foreign_keys=ON")


def _sqlite_begin(conn: sa.Connection) -> None:
    write = conn.get_execution_options().get(WRITE_OPTION, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def writer(engine: Engine) -> Engine:
    """The same engine (same pool) whose transactions take the write lock up front."""
    return engine.execution_options(**{WRITE_OPTION: True})


def describe(engine: Engine) -> str:
    """The database as a message names it: its file, or its URL without the password."""
    if engine.dialect.name == "sqlite":
        return f"the database {engine.url.database}"
    return f"the database {engine.url.render_as_string(hide_password=True)}"


def _storage_errors(engine: Engine) -> None:
    """A full disk, a read-only file or an I/O error reaches the caller as a
    ``StorageError`` saying so (and what to do), not as the driver's exception."""
    where = describe(engine)

    def handle(context: sa.engine.ExceptionContext) -> None:
        error = storage_error(context.original_exception, where, DATABASE_UNCHANGED)
        if error is not None:
            raise error

    sa.event.listen(engine, "handle_error", handle)


def create_engine(url: str, *, read_only: bool = False) -> Engine:
    """Build an engine; SQLite gets WAL, a busy timeout and foreign keys.

    ``read_only`` opens an existing SQLite file so that nothing can be written to it
    (nor its journal mode changed); other databases ignore it.
    """
    if url.startswith("sqlite"):
        db_file = sqlite_file(url)
        if db_file is not None:
            parent = db_file.parent
            if not parent.exists():
                raise InvalidInputError(
                    f"database folder {parent} does not exist; create it or point "
                    "HYBRID_RAG_DB_PATH somewhere else"
                )
        if read_only and db_file is not None:
            engine = sa.create_engine(
                sqlite_url(db_file), creator=lambda: _connect_read_only(db_file)
            )
            sa.event.listen(engine, "connect", _read_only_pragmas)
        else:
            # isolation_level=None hands BEGIN to us: a write transaction takes the
            # lock up front (BEGIN IMMEDIATE) instead of failing on a lock upgrade.
            engine = sa.create_engine(
                url,
                connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "isolation_level": None},
            )
            sa.event.listen(engine, "connect", _sqlite_pragmas)
        sa.event.listen(engine, "begin", _sqlite_begin)
        _storage_errors(engine)
        return engine
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    try:
        engine = sa.create_engine(url, pool_pre_ping=True)
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError) as exc:
        raise InvalidInputError(
            f"database URL {url!r} cannot be used ({exc}); give a file (HYBRID_RAG_DB_PATH) "
            "or a URL such as postgresql://user@/memory?host=/var/run/postgresql"
        ) from exc
    _storage_errors(engine)
    return engine


def _alembic_config() -> Config:
    from alembic.config import Config

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
    current, head = revisions(engine)
    if current == head:
        return
    from alembic import command
    from alembic.runtime.migration import MigrationContext

    cfg = _alembic_config()
    with writer(engine).begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
        if MigrationContext.configure(conn).get_current_revision() == head:
            return
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


def revisions(engine: Engine) -> tuple[str | None, str | None]:
    """The schema revision the database is at, and the newest this code knows.

    Read with a plain query of Alembic's own table (what Alembic reads too): None for a
    database without one; with several rows (not a single line of revisions), all of
    them, which no head equals, so ``migrate`` hands the case to Alembic.
    """
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table(VERSION_TABLE):
            return None, HEAD_REVISION
        rows = conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    current = rows[0] if len(rows) == 1 else (",".join(sorted(rows)) or None)
    return current, HEAD_REVISION


def cannot_migrate(
    engine: Engine, current: str | None, head: str | None, exc: StorageError
) -> StorageError:
    """A database behind this code's schema that cannot be written to bring it up."""
    return StorageError(
        f"{describe(engine)} has schema revision {current or 'none'} and this version needs "
        f"{head}, but it cannot be upgraded: {exc}",
        exc.kind,
    )
