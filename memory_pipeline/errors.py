"""Named domain errors. Every message says what was wrong and what to do next."""

from __future__ import annotations

from enum import StrEnum


class MemoryPipelineError(Exception):
    """Base class of every error the library raises on purpose."""


class InvalidInputError(MemoryPipelineError, ValueError):
    """An argument, a file or its metadata cannot be accepted as given."""


class SettingError(InvalidInputError):
    """A setting refused: ``source`` is where its value came from (a ``HYBRID_RAG_*``
    variable, or the flag a caller names), ``field`` the setting, ``detail`` what is wrong."""

    def __init__(self, source: str, field: str, detail: str) -> None:
        super().__init__(f"{source}: {detail}")
        self.source = source
        self.field = field
        self.detail = detail


class NotFoundError(MemoryPipelineError, LookupError):
    """A document, chunk or index version that was asked for does not exist."""


class ModelMismatchError(MemoryPipelineError):
    """Vectors or an index built with another embedding model or dimension."""


class IndexUnavailableError(MemoryPipelineError):
    """The index cannot be used as asked: it is missing, unreadable, corrupt or of another
    format, its backend (server or package) cannot be reached, or it cannot be written."""


class IndexBusyError(IndexUnavailableError):
    """Another process holds the index writer lock."""


class ModelUnavailableError(MemoryPipelineError):
    """A configured model cannot be loaded here (no network, wrong path...)."""


class StorageFailure(StrEnum):
    """What kept the database or the index files from being written."""

    FULL = "full"
    READ_ONLY = "read_only"
    IO = "io"
    NOT_A_DATABASE = "not_a_database"


class StorageError(MemoryPipelineError):
    """The database or the index files could not be written (or read): a full disk, a
    read-only file or folder, an I/O error. ``kind`` says which."""

    def __init__(self, message: str, kind: StorageFailure) -> None:
        super().__init__(message)
        self.kind = kind
