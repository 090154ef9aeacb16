"""Storage failures said plainly: what happened, to which file, that nothing was lost, what to do.

One table per source of the failure (SQLite's error names, PostgreSQL's SQLSTATEs, the
operating system's errno), one message per kind. The database engine turns its driver's
errors into a ``StorageError`` here (``engine``); the index writer does the same for
the files it writes.
"""

from __future__ import annotations

import errno
import sqlite3

from memory_pipeline.errors import StorageError, StorageFailure

# SQLite's primary result codes (an extended one, e.g. SQLITE_IOERR_WRITE, starts with one).
_SQLITE: dict[str, StorageFailure] = {
    "SQLITE_FULL": StorageFailure.FULL,
    "SQLITE_READONLY": StorageFailure.READ_ONLY,
    # A database (or its -wal/-shm beside it) that cannot be opened for writing.
    "SQLITE_CANTOPEN": StorageFailure.READ_ONLY,
    "SQLITE_PERM": StorageFailure.READ_ONLY,
    "SQLITE_IOERR": StorageFailure.IO,
    "SQLITE_NOTADB": StorageFailure.NOT_A_DATABASE,
    "SQLITE_CORRUPT": StorageFailure.NOT_A_DATABASE,
}
# PostgreSQL: disk_full, read_only_sql_transaction, io_error.
_SQLSTATE: dict[str, StorageFailure] = {
    "53100": StorageFailure.FULL,
    "25006": StorageFailure.READ_ONLY,
    "58030": StorageFailure.IO,
}
_ERRNO: dict[int, StorageFailure] = {
    errno.ENOSPC: StorageFailure.FULL,
    errno.EDQUOT: StorageFailure.FULL,
    errno.EROFS: StorageFailure.READ_ONLY,
    errno.EACCES: StorageFailure.READ_ONLY,
    errno.EPERM: StorageFailure.READ_ONLY,
    errno.EIO: StorageFailure.IO,
}

# What happened to ``where``, and what to do about it.
_SAID: dict[StorageFailure, tuple[str, str]] = {
    StorageFailure.FULL: (
        "{where} could not be written: the disk is full ({detail})",
        "Free some space on that disk (or move the memory to another one) and try again.",
    ),
    StorageFailure.READ_ONLY: (
        "{where} cannot be written here ({detail})",
        "Check the permissions of the file and of its folder (SQLite also writes -wal and "
        "-shm files beside the database) and that the disk is not mounted read-only; "
        "reading the memory still works.",
    ),
    StorageFailure.IO: (
        "{where} could not be read or written: an I/O error ({detail})",
        "Check the disk (the kernel log, a file system check), then check the memory's "
        "health (health / index_health).",
    ),
    StorageFailure.NOT_A_DATABASE: (
        "{where} is not a SQLite database, or is damaged ({detail})",
        "Point HYBRID_RAG_DB_PATH at the memory's database, or restore this one from a "
        "backup; moving it aside makes a new, empty memory.",
    ),
}

DATABASE_UNCHANGED = "SQLite and PostgreSQL roll back what they could not finish"
INDEX_UNCHANGED = (
    "the published index version is unchanged and the store still holds every change; "
    "the next index update takes them in"
)


def failure_of(exc: BaseException) -> StorageFailure | None:
    """The kind of storage failure ``exc`` (a driver or OS error) reports, or None."""
    if isinstance(exc, sqlite3.Error):
        name = getattr(exc, "sqlite_errorname", "") or ""
        return _SQLITE.get("_".join(name.split("_")[:2]))
    sqlstate = getattr(exc, "sqlstate", None)
    if isinstance(sqlstate, str):
        return _SQLSTATE.get(sqlstate)
    if isinstance(exc, OSError) and exc.errno is not None:
        return _ERRNO.get(exc.errno)
    return None


def storage_error(exc: BaseException, where: str, unchanged: str) -> StorageError | None:
    """``exc`` as a ``StorageError`` about ``where`` ("the database /x/memory.db"), or None
    when it is no storage failure. ``unchanged`` says why nothing was lost."""
    kind = failure_of(exc)
    if kind is None:
        return None
    what, todo = _SAID[kind]
    detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    if kind is StorageFailure.NOT_A_DATABASE:  # nothing this command did, nothing it lost
        return StorageError(f"{what.format(where=where, detail=detail)}. {todo}", kind)
    return StorageError(
        f"{what.format(where=where, detail=detail)}; nothing was lost ({unchanged}). {todo}",
        kind,
    )


def file_error(exc: OSError, unchanged: str) -> StorageError | None:
    """``storage_error`` for an OS error about a file no layer below named (an archive,
    a ledger, a report): the file is the one the error names."""
    where = f"the file {exc.filename}" if exc.filename else "a file of the memory"
    return storage_error(exc, where, unchanged)
