"""How a memory opens its database: writable, read-only, or read-only only if it must be."""

from __future__ import annotations

import logging
from enum import StrEnum
from pathlib import Path

from memory_pipeline.errors import StorageError, StorageFailure
from memory_pipeline.spaces import Spaces
from memory_pipeline.store.engine import sqlite_file
from memory_pipeline.store.failures import storage_error
from memory_pipeline.store.store import Store

log = logging.getLogger(__name__)


class Opening(StrEnum):
    """How a memory opens its database."""

    WRITABLE = "writable"  # every command that writes; a read-only file is an error
    READ_ONLY = "read_only"  # reports and searches that record nothing: never writes
    PREFER_WRITABLE = "prefer_writable"  # a search, a server: read-only if it must be


def open_store(url: str, spaces: Spaces, opening: Opening, *, index_folder: Path | None) -> Store:
    """The store at ``url``, opened as ``opening`` says (``store.read_only`` says how it
    was). ``index_folder``: the local index's folder, made first unless the store opens
    read-only (it is often beside the database, whose folder it may create)."""
    db_file = sqlite_file(url)
    if opening is Opening.READ_ONLY and (db_file is None or not db_file.exists()):
        opening = Opening.WRITABLE  # a new memory is made as any command would make it
    if index_folder is not None and opening is not Opening.READ_ONLY:
        _make_folder(index_folder, required=opening is Opening.WRITABLE)
    if opening is not Opening.PREFER_WRITABLE:
        return Store(url, spaces=spaces, read_only=opening is Opening.READ_ONLY)
    try:
        return Store(url, spaces=spaces)
    except StorageError as exc:
        if exc.kind is StorageFailure.NOT_A_DATABASE:
            raise
        # A read-only file or mount, a full disk, a write that fails: reading may still work.
        log.info("opening the database read-only: %s", exc)
        try:
            return Store(url, spaces=spaces, read_only=True)
        except StorageError:
            raise exc from None


def _make_folder(path: Path, *, required: bool) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        error = storage_error(exc, f"the index folder {path}", "nothing was written yet")
        if error is None:
            raise
        if required or error.kind is not StorageFailure.READ_ONLY:
            raise error from exc
