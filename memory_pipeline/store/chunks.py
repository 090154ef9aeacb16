"""Chunks and their tags: reads by id, document and filter; memory fields; access counts."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.orm import Session

from memory_pipeline.errors import InvalidInputError, NotFoundError
from memory_pipeline.store.base import StoreBase
from memory_pipeline.store.changes import Reads
from memory_pipeline.store.history import (
    REVIEWS,
    Change,
    change_of,
    is_proposal,
    loaded,
    record_changes,
    shown_value,
)
from memory_pipeline.store.rows import (
    CHUNKS_BY_ID,
    CHUNKS_BY_ID_IN_SPACES,
    batched,
    chunk_record,
    now_utc,
    tags_for,
)
from memory_pipeline.store.schema import Chunk, ChunkChange, ChunkGeneration, ChunkTag
from memory_pipeline.types import ChunkRecord, SearchFilters

_UNSET: Any = object()


class ChunkQueries(StoreBase):
    def get_chunks(self, ids: Iterable[int]) -> dict[int, ChunkRecord]:
        id_list = list(dict.fromkeys(int(i) for i in ids))
        out: dict[int, ChunkRecord] = {}
        if not id_list:
            return out
        stmt, params = self.in_spaces(CHUNKS_BY_ID, CHUNKS_BY_ID_IN_SPACES)
        with self.conn() as c:
            tags = tags_for(c, id_list)
            for batch in batched(id_list):
                for row in c.execute(stmt, {**params, "ids": list(batch)}):
                    out[row.id] = chunk_record(row, tags.get(row.id, ()))
        return out

    def document_chunks(self, doc_id: str) -> list[ChunkRecord]:
        with self.read() as s:
            rows = s.scalars(
                sa.select(Chunk)
                .where(Chunk.doc_id == doc_id, self.readable(Chunk.space))
                .order_by(Chunk.chunk_index)
            ).all()
            tags = tags_for(s, [r.id for r in rows])
            return [chunk_record(r, tags.get(r.id, ())) for r in rows]

    def document_window(
        self, doc_id: str, chunk_index: int | None = None, window: int = 1
    ) -> list[ChunkRecord]:
        """A document's chunks in order: all of them, or those within ``window`` of
        ``chunk_index``; NotFoundError for a document or position this store does not hold."""
        chunks = self.document_chunks(doc_id)
        if not chunks:
            raise NotFoundError(f"no document with doc_id {doc_id!r}")
        if chunk_index is None:
            return chunks
        if window < 0:
            raise InvalidInputError(f"window must be ≥ 0, got {window}")
        if not any(c.chunk_index == chunk_index for c in chunks):
            raise NotFoundError(
                f"document {doc_id!r} has chunks 0..{len(chunks) - 1}, not {chunk_index}"
            )
        return [c for c in chunks if abs(c.chunk_index - chunk_index) <= window]

    def contents(self, ids: Sequence[int]) -> dict[int, str]:
        with self.conn() as c:
            return Reads(c).contents(ids)

    def sparse_texts(self, ids: Sequence[int]) -> dict[int, str]:
        with self.conn() as c:
            return Reads(c).sparse_texts(ids)

    def live_ids(self, ids: Iterable[int]) -> set[int]:
        with self.conn() as c:
            return Reads(c).live_ids(ids)

    def all_ids(self) -> np.ndarray:
        with self.conn() as c:
            return Reads(c).all_ids()

    def space_restriction(self) -> np.ndarray | None:
        """The ids a search must stay within because other spaces hold chunks too, or
        None when no other space holds any (nothing to restrict: the fast path).

        Kept until the chunk generation moves: every transaction that adds or deletes
        chunks raises it, on every index backend (``ChunkGeneration``). The index's
        own state (versions, the change queue) says nothing here: pgvector writes
        neither, and an updater clearing the queue before recording its version
        returns them to an earlier value. The generation is read before the ids, so
        ids cached under it are at least as new as it; a stale answer would miss this
        space's newest chunks (never admit another space's), and none is kept.
        """
        if self.spaces.read is None:
            return None
        with self.conn() as c:
            generation = c.execute(_GENERATION).scalar_one()
            cached = self._space_cache.get(self.spaces.read)
            if cached is not None and cached[0] == generation:
                return cached[1]
            # On this connection: one idle in its transaction while another waits would
            # hang behind a rebuild's lock on ``chunks`` that waits for the idle one.
            ids = (
                self._ids(sa.select(Chunk.id), c)
                if _others_hold_chunks(c, self.spaces.read)
                else None
            )
        self._space_cache[self.spaces.read] = (generation, ids)
        return ids

    def filter_ids(self, filters: SearchFilters) -> np.ndarray:
        """Ids of live chunks matching every filter (tags: all of them must be present)."""
        return self._ids(_filtered(sa.select(Chunk.id), filters))

    def guaranteed_ids(
        self, knowledge_types: Sequence[str], min_importance: float, filters: SearchFilters
    ) -> np.ndarray:
        """Chunks a search always considers: these types or this important, within filters."""
        wanted = sa.or_(
            Chunk.knowledge_type.in_(list(knowledge_types)), Chunk.importance >= min_importance
        )
        return self._ids(_filtered(sa.select(Chunk.id).where(wanted), filters))

    def _ids(self, stmt: sa.Select[Any], conn: sa.Connection | None = None) -> np.ndarray:
        stmt = stmt.where(self.readable(Chunk.space)).order_by(Chunk.id)
        if conn is not None:
            return np.asarray(conn.execute(stmt).scalars().all(), dtype=np.int64)
        with self.conn() as c:
            return np.asarray(c.execute(stmt).scalars().all(), dtype=np.int64)

    def find_by_tag(self, tag: str) -> list[ChunkRecord]:
        with self.read() as s:
            ids = list(s.scalars(sa.select(ChunkTag.chunk_id).where(ChunkTag.tag == tag)))
        records = self.get_chunks(ids)
        return sorted(records.values(), key=lambda r: (r.doc_id, r.chunk_index))

    def set_chunk_tags(
        self,
        doc_id: str,
        chunk_index: int,
        *,
        importance: float | None = _UNSET,
        knowledge_type: str | None = _UNSET,
        tags: Sequence[str] | None = None,
        actor: str = "api",
    ) -> ChunkRecord:
        """Change a chunk's memory fields; vectors and indices are untouched. Each field
        that changes is recorded with ``actor`` (``store/history.py``)."""
        with self.write() as s:
            row = None
            if self._writable(s, doc_id, missing_ok=True):
                row = s.scalar(
                    sa.select(Chunk).where(Chunk.doc_id == doc_id, Chunk.chunk_index == chunk_index)
                )
            if row is None:
                raise NotFoundError(
                    f"no chunk {chunk_index} in document {doc_id!r}; list them with get_document_chunks"
                )
            changes: dict[str, Any] = {}
            if importance is not _UNSET:
                changes["importance"] = importance
            if knowledge_type is not _UNSET:
                changes["knowledge_type"] = knowledge_type
            if tags is not None:
                changes["tags"] = tags
            _set_fields(s, row, changes, actor)
            chunk_id = row.id
        return self.get_chunks([chunk_id])[chunk_id]

    def review_change(self, change_id: int, decision: str, *, actor: str) -> Change:
        """A person's verdict on an agent's change (``accept``: it stands; ``revert``: the
        field goes back to what it was, recorded with ``actor``), in one transaction. An
        agent's change only, of the space this store writes, not yet reviewed; a revert
        only while the field still holds what the agent set (a later change stands)."""
        if decision not in REVIEWS:
            raise InvalidInputError(f"decision must be accept or revert, got {decision!r}")
        with self.write() as s:
            row = s.get(ChunkChange, change_id)
            if row is None or row.space != self.spaces.write or not is_proposal(row):
                raise NotFoundError(
                    f"no change {change_id} of an agent's to review in space {self.spaces.write!r}"
                )
            if row.review is not None:
                raise InvalidInputError(f"change {change_id} was {row.review} already")
            if decision == "revert":
                chunk = s.scalar(
                    sa.select(Chunk).where(
                        Chunk.doc_id == row.doc_id,
                        Chunk.chunk_index == row.chunk_index,
                        Chunk.space == self.spaces.write,
                    )
                )
                if chunk is None:
                    raise InvalidInputError(
                        f"change {change_id} cannot be reverted: its chunk is gone (deleted or "
                        "forgotten); accept it to take it off the list"
                    )
                now = _field_value(s, chunk, row.field)
                if now != loaded(row.after):
                    raise InvalidInputError(
                        f"change {change_id} cannot be reverted: the chunk's {row.field} was "
                        f"changed again since (it is {shown_value(now)} now); that change stands"
                    )
                _set_fields(s, chunk, {row.field: loaded(row.before)}, actor)
            row.review = REVIEWS[decision]
            row.reviewed_at = now_utc()
            s.flush()
            return change_of(row)

    def record_access(self, ids: Sequence[int], when: dt.datetime | None = None) -> None:
        if not ids:
            return
        when = when or now_utc()
        with self.write() as s:
            s.execute(
                sa.update(Chunk)
                .where(Chunk.id.in_(list(ids)))
                .values(access_count=Chunk.access_count + 1, last_accessed_at=when)
            )


_GENERATION = sa.select(ChunkGeneration.generation)


def _set_fields(s: Session, row: Chunk, changes: dict[str, Any], actor: str) -> None:
    """Set memory fields of the chunk ``row`` (importance, knowledge_type, tags) inside
    ``s``, each change recorded with ``actor``: the one way they are written."""
    changed: list[tuple[str, Any, Any]] = []
    for field, value in changes.items():
        before = _field_value(s, row, field)
        if field == "tags":
            s.execute(sa.delete(ChunkTag).where(ChunkTag.chunk_id == row.id))
            if value:
                rows = [{"chunk_id": row.id, "tag": t} for t in dict.fromkeys(value)]
                s.execute(sa.insert(ChunkTag), rows)
            value = sorted(dict.fromkeys(value))
        elif field in ("importance", "knowledge_type"):
            setattr(row, field, value)
        else:
            raise InvalidInputError(f"not a memory field: {field!r}")
        changed.append((field, before, value))
    record_changes(
        s, space=row.space, actor=actor, doc_id=row.doc_id,
        chunk_index=row.chunk_index, changes=changed,
    )  # fmt: skip


def _field_value(s: Session, row: Chunk, field: str) -> Any:
    """A memory field's value as the history records it (tags: sorted)."""
    if field == "tags":
        return sorted(s.scalars(sa.select(ChunkTag.tag).where(ChunkTag.chunk_id == row.id)))
    return getattr(row, field)


def _others_hold_chunks(c: sa.Connection, read: frozenset[str]) -> bool:
    """Whether a chunk of a space outside ``read`` exists: one index range probe per gap
    between the read spaces (not a scan of the chunks)."""
    bounds = [None, *sorted(read), None]
    for low, high in itertools.pairwise(bounds):
        stmt = sa.select(Chunk.id)
        if low is not None:
            stmt = stmt.where(Chunk.space > low)
        if high is not None:
            stmt = stmt.where(Chunk.space < high)
        if c.execute(stmt.limit(1)).first() is not None:
            return True
    return False


def _filtered(stmt: sa.Select[Any], filters: SearchFilters) -> sa.Select[Any]:
    if filters.knowledge_types:
        stmt = stmt.where(Chunk.knowledge_type.in_(filters.knowledge_types))
    if filters.doc_ids:
        stmt = stmt.where(Chunk.doc_id.in_(filters.doc_ids))
    if filters.created_after:
        stmt = stmt.where(Chunk.created_at >= filters.created_after)
    if filters.created_before:
        stmt = stmt.where(Chunk.created_at <= filters.created_before)
    if filters.source_date_from:
        stmt = stmt.where(Chunk.source_date >= filters.source_date_from)
    if filters.source_date_to:
        stmt = stmt.where(Chunk.source_date <= filters.source_date_to)
    for tag in filters.tags:
        stmt = stmt.where(Chunk.id.in_(sa.select(ChunkTag.chunk_id).where(ChunkTag.tag == tag)))
    return stmt
