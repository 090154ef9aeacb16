"""The store's connection and transactions, which every query module builds on."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, Self

import sqlalchemy as sa
from sqlalchemy.orm import Session

from memory_pipeline.errors import InvalidInputError, NotFoundError, StorageError
from memory_pipeline.spaces import Spaces
from memory_pipeline.store.engine import (
    cannot_migrate,
    create_engine,
    migrate,
    revisions,
    sqlite_file,
    writer,
)
from memory_pipeline.store.schema import ChunkGeneration, Document, IndexChange

# Set on a connection whose transaction added or deleted chunks (``StoreBase.write``).
_CHUNKS_CHANGED = "memory_pipeline_chunks_changed"
_NEXT_GENERATION = sa.update(ChunkGeneration).values(generation=ChunkGeneration.generation + 1)


class InTransactionIndex(Protocol):
    """An index kept inside the store's own database and transactions (pgvector): what a
    write adds or deletes reaches it before the same commit, so nothing is ever queued."""

    def lock(self, conn: sa.Connection) -> None:
        """Called before this transaction writes chunk rows: the index's lock comes first
        in every writer, as in a rebuild (whose tables reference ``chunks``), so the two
        never wait on each other's locks at once."""
        ...

    def added(self, conn: sa.Connection, ids: Sequence[int]) -> None:
        """Chunks (with their vectors) inserted by this transaction."""
        ...

    def deleted(self, conn: sa.Connection, ids: Sequence[int]) -> None:
        """Chunks this transaction is about to delete."""
        ...


class StoreBase:
    """An engine over one database (migrated on open), and the three ways to use it.

    ``spaces`` binds it: every read of documents, chunks and tags sees only the spaces
    it reads, and every write lands in (and may only change) the space it writes. The
    index writer's reads (``snapshot``) and the vectors reused by content are the two
    exceptions: the index and the vectors serve every space.
    """

    def __init__(self, url: str, *, spaces: Spaces | None = None, read_only: bool = False) -> None:
        """``read_only``: open an existing SQLite file so that nothing is written to it
        (every write fails with a ``StorageError``); it is migrated first only if it is
        behind this code's schema, and only if it can be written."""
        self.url = url
        self.spaces = spaces or Spaces()
        # read spaces -> (store generation, ids to restrict searches to); see space_restriction
        self._space_cache: dict[frozenset[str], tuple[int, Any]] = {}
        db_file = sqlite_file(url)
        self.read_only = read_only and db_file is not None and db_file.exists()
        self.engine = self._open(url) if self.read_only else _migrated(create_engine(url))
        self._writer = writer(self.engine)
        # A transaction that rolls back changed no chunks.
        sa.event.listen(self.engine, "rollback", _forget_chunk_changes)
        # Set by an index backend that lives in this database; otherwise changes are queued.
        self.index_hook: InTransactionIndex | None = None

    @staticmethod
    def _open(url: str) -> sa.Engine:
        """A read-only engine over ``url``, once its schema is current."""
        engine = create_engine(url, read_only=True)
        current, head = revisions(engine)
        if current == head:
            return engine
        engine.dispose()
        try:
            _migrated(create_engine(url)).dispose()
        except StorageError as exc:
            raise cannot_migrate(engine, current, head, exc) from exc
        return create_engine(url, read_only=True)

    def lock_index(self, conn: sa.Connection) -> None:
        """Before a transaction inserts or deletes chunks: an index in this database
        takes its lock first (``InTransactionIndex.lock``)."""
        if self.index_hook is not None:
            self.index_hook.lock(conn)

    def queue_adds(self, conn: sa.Connection, ids: Sequence[int]) -> None:
        """Chunks this transaction inserted (vectors stored): the index learns of them in
        the same transaction, by its hook or through the index-change queue, and the
        chunk generation is raised as the transaction ends (``write``)."""
        if not ids:
            return
        if self.index_hook is not None:
            self.index_hook.added(conn, ids)
        else:
            conn.execute(sa.insert(IndexChange), [{"chunk_id": i, "op": "add"} for i in ids])
        conn.info[_CHUNKS_CHANGED] = True

    def queue_deletes(self, conn: sa.Connection, ids: Sequence[int]) -> None:
        """Chunks this transaction deletes (call before the delete)."""
        if not ids:
            return
        if self.index_hook is not None:
            self.index_hook.deleted(conn, ids)
        else:
            conn.execute(sa.insert(IndexChange), [{"chunk_id": i, "op": "del"} for i in ids])
        conn.info[_CHUNKS_CHANGED] = True

    def bound(self, spaces: Spaces) -> Self:
        """This store under another binding: the same engine, writing and reading as
        ``spaces`` says (``Spaces.bound(space)``: one space alone). The one way to re-bind
        a store. The two share their connections: close one of them, once."""
        if spaces == self.spaces:
            return self
        other = copy.copy(self)
        other.spaces = spaces
        return other

    def readable(self, column: Any) -> Any:
        """``column`` (a space column) is one this store reads."""
        return sa.true() if self.spaces.read is None else column.in_(sorted(self.spaces.read))

    def in_spaces(self, every: Any, scoped: Any) -> tuple[Any, dict[str, Any]]:
        """One of two prepared statements and its parameters: ``scoped`` takes the read
        spaces as its ``spaces`` parameter (hot paths keep one compiled statement)."""
        if self.spaces.read is None:
            return every, {}
        return scoped, {"spaces": sorted(self.spaces.read)}

    def _writable(self, s: Session, doc_id: str, *, missing_ok: bool = False) -> bool:
        """Whether ``doc_id`` is in the space this store writes; a document of another
        space is missing (``NotFoundError``, or False with ``missing_ok``) unless this
        store reads it, when the error says it is read-only here."""
        space = s.scalar(sa.select(Document.space).where(Document.doc_id == doc_id))
        if space == self.spaces.write:
            return True
        if space is not None and self.spaces.reads(space):
            raise InvalidInputError(
                f"document {doc_id!r} is in space {space!r}, which this memory reads but "
                f"does not write (it writes to {self.spaces.write!r})"
            )
        if missing_ok:
            return False
        raise NotFoundError(no_document(doc_id))

    @property
    def backend(self) -> str:
        return self.engine.dialect.name

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def read(self) -> Iterator[Session]:
        with Session(self.engine) as session:
            yield session

    @contextmanager
    def conn(self) -> Iterator[sa.Connection]:
        """A plain connection for hot read paths (no ORM object construction)."""
        with self.engine.connect() as conn:
            yield conn

    @contextmanager
    def write(self) -> Iterator[Session]:
        """One transaction: everything inside commits together or not at all.

        One that added or deleted chunks (``queue_adds``, ``queue_deletes``) raises the
        chunk generation as its last statement, in every backend (pgvector queues
        nothing): the generation's row lock is then held only for the commit, so two
        writers never wait on each other's rows while holding it.
        """
        with Session(self._writer) as session, session.begin():
            yield session
            if session.connection().info.pop(_CHUNKS_CHANGED, False):
                session.execute(_NEXT_GENERATION)


def _forget_chunk_changes(conn: sa.Connection) -> None:
    conn.info.pop(_CHUNKS_CHANGED, None)


def _migrated(engine: sa.Engine) -> sa.Engine:
    try:
        migrate(engine)
    except BaseException:
        engine.dispose()
        raise
    return engine


def no_document(doc_id: str) -> str:
    return f"no document with doc_id {doc_id!r}; find ids with search or find_by_tag"
