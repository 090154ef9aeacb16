"""The index-change queue, consistent snapshots for the index writer, index versions."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import sqlalchemy as sa

from memory_pipeline.errors import ModelMismatchError
from memory_pipeline.store.base import StoreBase
from memory_pipeline.store.rows import SPARSE_TEXT, batched, now_utc, stack_vectors
from memory_pipeline.store.schema import Chunk, Embedding, IndexChange, IndexVersion


@dataclass(frozen=True)
class PendingChanges:
    """Queued index changes: their sequence numbers and the chunk ids added and deleted."""

    seqs: np.ndarray
    adds: np.ndarray
    deletes: np.ndarray

    def __bool__(self) -> bool:
        return bool(len(self.seqs))


def _clearing(seqs: Sequence[int] | np.ndarray) -> Iterator[sa.Delete]:
    """The statements that forget the queued changes ``seqs``."""
    for batch in batched([int(q) for q in seqs]):
        yield sa.delete(IndexChange).where(IndexChange.seq.in_(batch))


#: What an index takes in of a chunk: id, space, BM25 text, vector blob (None: no vector
#: of the model asked).
IndexRow = tuple[int, str, str, bytes | None]


class Reads:
    """Reads over one connection; inside ``Store.snapshot`` they share one snapshot.

    An index that lives in the store's database (pgvector) reads through them inside
    the store's own transaction (its hook's connection, or the rebuild's), and
    ``clear_changes`` is the one write it makes there on the store's tables."""

    def __init__(self, conn: sa.Connection) -> None:
        self.conn = conn

    def pending_changes(self) -> PendingChanges:
        rows = self.conn.execute(
            sa.select(IndexChange.seq, IndexChange.chunk_id, IndexChange.op)
        ).all()
        seqs = np.asarray([r[0] for r in rows], dtype=np.int64)
        adds = np.unique(np.asarray([r[1] for r in rows if r[2] == "add"], dtype=np.int64))
        dels = np.unique(np.asarray([r[1] for r in rows if r[2] == "del"], dtype=np.int64))
        return PendingChanges(seqs, adds, dels)

    def change_seqs(self) -> np.ndarray:
        seqs = self.conn.execute(sa.select(IndexChange.seq)).scalars().all()
        return np.asarray(seqs, dtype=np.int64)

    def queued_count(self) -> int:
        return int(self.conn.execute(sa.select(sa.func.count()).select_from(IndexChange)).one()[0])

    def clear_changes(self, seqs: Sequence[int] | np.ndarray) -> None:
        """``ChangeQueries.clear_changes`` in this connection's transaction."""
        for statement in _clearing(seqs):
            self.conn.execute(statement)

    def has_chunks(self) -> bool:
        """Whether the memory holds a chunk, in any space."""
        return self.conn.execute(sa.select(Chunk.id).limit(1)).first() is not None

    def live_ids(self, ids: Iterable[int]) -> set[int]:
        live: set[int] = set()
        for batch in batched(list({int(i) for i in ids})):
            live.update(self.conn.execute(sa.select(Chunk.id).where(Chunk.id.in_(batch))).scalars())
        return live

    def all_ids(self) -> np.ndarray:
        ids = self.conn.execute(sa.select(Chunk.id).order_by(Chunk.id)).scalars().all()
        return np.asarray(ids, dtype=np.int64)

    def spaces_of(self, ids: Sequence[int]) -> dict[int, str]:
        """chunk id -> its space, for the live ones among ``ids``."""
        out: dict[int, str] = {}
        for batch in batched(list(ids)):
            rows = self.conn.execute(sa.select(Chunk.id, Chunk.space).where(Chunk.id.in_(batch)))
            out.update((int(cid), str(space)) for cid, space in rows)
        return out

    def contents(self, ids: Sequence[int]) -> dict[int, str]:
        """chunk id -> its content (what a search returns)."""
        return self._texts(ids, Chunk.content)

    def sparse_texts(self, ids: Sequence[int]) -> dict[int, str]:
        """chunk id -> the text BM25 indexes for it (``SPARSE_TEXT``)."""
        return self._texts(ids, SPARSE_TEXT)

    def _texts(self, ids: Sequence[int], column: Any) -> dict[int, str]:
        out: dict[int, str] = {}
        for batch in batched(list(ids)):
            rows = self.conn.execute(sa.select(Chunk.id, column).where(Chunk.id.in_(batch)))
            out.update((int(cid), text) for cid, text in rows)
        return out

    def vectors_for(self, ids: Sequence[int], model_id: str) -> tuple[np.ndarray, np.ndarray]:
        found: list[int] = []
        blobs: list[bytes] = []
        for batch in batched(list(ids)):
            for cid, blob in self.conn.execute(
                sa.select(Embedding.chunk_id, Embedding.vector).where(
                    Embedding.model_id == model_id, Embedding.chunk_id.in_(batch)
                )
            ):
                found.append(int(cid))
                blobs.append(blob)
        return np.asarray(found, dtype=np.int64), stack_vectors(blobs)

    def vector_dims(self, model_id: str) -> list[int]:
        """The dimensions vectors of ``model_id`` are stored with (one, normally)."""
        query = sa.select(Embedding.dim).where(Embedding.model_id == model_id).distinct()
        return [int(d) for d in self.conn.execute(query).scalars()]

    def without_vector(self, model_id: str) -> int:
        """How many live chunks have no vector of ``model_id``."""
        has_vector = sa.exists().where(
            Embedding.chunk_id == Chunk.id, Embedding.model_id == model_id
        )
        query = sa.select(sa.func.count()).select_from(Chunk).where(~has_vector)
        return int(self.conn.execute(query).scalar_one())

    def index_rows(self, ids: Sequence[int], model_id: str) -> list[IndexRow]:
        """(id, space, BM25 text, vector blob or None) of the live chunks among ``ids``
        (one batch), by id: what an index takes in of a chunk."""
        query = _index_rows(model_id, outer=True).where(Chunk.id.in_([int(i) for i in ids]))
        return _as_index_rows(self.conn.execute(query.order_by(Chunk.id)))

    def index_rows_after(self, last: int, model_id: str, limit: int) -> list[IndexRow]:
        """``index_rows`` of the next ``limit`` chunks with a vector after id ``last``."""
        query = _index_rows(model_id, outer=False).where(Chunk.id > last)
        return _as_index_rows(self.conn.execute(query.order_by(Chunk.id).limit(limit)))

    def stored_vectors(self, ids: np.ndarray, model_id: str) -> tuple[np.ndarray, np.ndarray]:
        """Vectors of live chunks, sorted by id, for an index to take in; in one snapshot,
        a live chunk without one is another model's (refused, with what to do)."""
        if not len(ids):
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        found, vecs = self.vectors_for(ids.tolist(), model_id)
        if len(found) < len(ids):
            missing = np.setdiff1d(ids, found)
            raise ModelMismatchError(
                f"{len(missing)} live chunks (e.g. ids {missing[:5].tolist()}) have no vector of "
                f"model {model_id!r}; re-ingest them with this model or configure the model "
                "they were embedded with"
            )
        order = np.argsort(found)
        return found[order], np.ascontiguousarray(vecs[order], dtype=np.float32)


def _as_index_rows(rows: Iterable[Any]) -> list[IndexRow]:
    return [(int(cid), str(space), str(text), vector) for cid, space, text, vector in rows]


def _index_rows(model_id: str, *, outer: bool) -> sa.Select[Any]:
    on = (Embedding.chunk_id == Chunk.id) & (Embedding.model_id == model_id)
    return (
        sa.select(Chunk.id, Chunk.space, SPARSE_TEXT, Embedding.vector)
        .select_from(Chunk)
        .join(Embedding, on, isouter=outer)
    )


class ChangeQueries(StoreBase):
    @contextmanager
    def snapshot(self) -> Iterator[Reads]:
        """Reads that all see the database as it was at one instant.

        The index writer reads queued changes, live ids, vectors and texts in
        several statements; a writer committing between two of them (a delete, an
        ingest) must not make those reads disagree. SQLite in WAL mode keeps one
        snapshot for a whole read transaction; PostgreSQL needs REPEATABLE READ.
        """
        with self.engine.connect() as conn:
            if self.backend == "postgresql":
                conn = conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                yield Reads(conn)

    def pending_changes(self) -> PendingChanges:
        """The changes not yet taken in by the index."""
        with self.conn() as c:
            return Reads(c).pending_changes()

    def last_change(self) -> int:
        with self.conn() as c:
            return int(c.execute(sa.select(sa.func.max(IndexChange.seq))).scalar() or 0)

    def pending_adds(self) -> list[int]:
        """Live chunks that the published index may not hold yet."""
        if self.index_hook is not None:  # it holds every chunk once committed
            return []
        with self.conn() as c:
            # A join, not IN (SELECT ...): the queue is usually tiny and must drive the plan;
            # the space is checked here, not in SQL, so the planner never starts from the
            # chunks of a space instead.
            stmt = (
                sa.select(IndexChange.chunk_id, Chunk.space)
                .join(Chunk, Chunk.id == IndexChange.chunk_id)
                .where(IndexChange.op == "add")
                .distinct()
            )
            return [int(i) for i, space in c.execute(stmt) if self.spaces.reads(space)]

    def unqueued_chunks(self) -> tuple[int, int]:
        """(chunks held, chunks of them with no queued add), read in one statement, so at
        one instant: a delete or an ingest committed meanwhile moves both or neither."""
        queued: sa.ColumnElement[bool] = sa.exists().where(
            IndexChange.chunk_id == Chunk.id, IndexChange.op == "add"
        )
        if self.index_hook is not None:  # the service holds every chunk once committed
            queued = sa.false()
        unqueued = sa.func.coalesce(sa.func.sum(sa.case((queued, 0), else_=1)), 0)
        stmt = sa.select(sa.func.count(), unqueued).select_from(Chunk)
        with self.conn() as c:
            held, unseen = c.execute(stmt.where(self.readable(Chunk.space))).one()
        return int(held), int(unseen)

    def clear_changes(self, seqs: Sequence[int] | np.ndarray) -> None:
        """Forget the queued changes the published index has taken in (idempotent).

        By their sequence numbers, not "everything up to the last one": on
        PostgreSQL a transaction that drew a lower number may commit after the
        index read the queue, and its change must stay queued.
        """
        if not len(seqs):
            return
        with self.write() as s:
            for statement in _clearing(seqs):
                s.execute(statement)

    def record_index_version(
        self,
        *,
        version: int,
        model_id: str,
        dim: int,
        n_dense: int,
        n_sparse: int,
        kind: str,
        added: int,
        removed: int,
    ) -> None:
        with self.write() as s:
            s.merge(
                IndexVersion(
                    version=version,
                    model_id=model_id,
                    dim=dim,
                    n_dense=n_dense,
                    n_sparse=n_sparse,
                    kind=kind,
                    added=added,
                    removed=removed,
                    created_at=now_utc(),
                )
            )
