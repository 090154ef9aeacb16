"""Queries and writes of forgetting and restoring: memory rows, runs, archive restores.

A mixin of ``Store``. The forgetting batch and the restore decide *what* goes and
comes back (``memory/``); the transactions that make it so are here, so the rule
"a chunk is live XOR archived at every instant" is kept by one module's writes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sqlalchemy as sa

from memory_pipeline.store.base import StoreBase
from memory_pipeline.store.rows import doc_info
from memory_pipeline.store.schema import (
    ArchiveRestore,
    Base,
    Chunk,
    Document,
    ForgettingRun,
)
from memory_pipeline.types import DocumentInfo

RUN_PENDING = "pending"
RUN_ARCHIVED = "archived"
_BATCH = 500  # rows per statement: well below SQLite's bound-parameter cap
_TABLES = Base.metadata.tables


@dataclass(frozen=True)
class MemoryRow:
    """The memory-axis columns of one live chunk."""

    chunk_id: int
    doc_id: str
    chunk_index: int
    knowledge_type: str | None
    importance: float | None
    access_count: int
    created_at: dt.datetime
    source_date: dt.date | None
    last_accessed_at: dt.datetime | None


@dataclass(frozen=True)
class RunRecord:
    """A real forgetting run as recorded: its state and what it archived."""

    run_id: str
    status: str
    n_archived: int
    params: str  # JSON, as the run wrote it


@dataclass(frozen=True)
class RestoredChunk:
    """One archived chunk to bring back: its rows as stored, and its archive key."""

    document: dict[str, Any]  # the document row, used if the document went missing
    chunk: dict[str, Any]  # the chunk row without an id
    tags: tuple[str, ...]
    archive_key: str

    @property
    def position(self) -> tuple[str, int]:
        return str(self.chunk["doc_id"]), int(self.chunk["chunk_index"])


@dataclass(frozen=True)
class RestoreWrite:
    """What ``restore_chunks`` wrote: which items (by position in the call), their new ids."""

    kept: list[int]
    new_ids: list[int]
    documents_recreated: int


class ForgettingQueries(StoreBase):
    def iter_memory_rows(self) -> Iterator[MemoryRow]:
        """The memory columns of every live chunk this store may change (its write space;
        every space for an all-spaces store), streamed in one pass."""
        stmt = sa.select(
            Chunk.id,
            Chunk.doc_id,
            Chunk.chunk_index,
            Chunk.knowledge_type,
            Chunk.importance,
            Chunk.access_count,
            Chunk.created_at,
            Chunk.source_date,
            Chunk.last_accessed_at,
        )
        if self.spaces.read is not None:
            stmt = stmt.where(Chunk.space == self.spaces.write)
        with self.conn() as c:
            for part in c.execute(stmt).partitions(10_000):
                for cid, doc_id, index, kind, importance, accesses, created, day, seen in part:
                    yield MemoryRow(
                        int(cid),
                        doc_id,
                        int(index),
                        kind,
                        importance,
                        accesses or 0,
                        created,
                        day,
                        seen,
                    )

    def start_forgetting_run(
        self, run_id: str, params_json: str, n_candidates: int, when: dt.datetime
    ) -> None:
        """Record a real run as pending, before anything is archived."""
        with self.write() as s:
            s.add(
                ForgettingRun(
                    run_id=run_id,
                    created_at=when,
                    finished_at=None,
                    status=RUN_PENDING,
                    dry_run=False,
                    params=params_json,
                    n_candidates=n_candidates,
                    n_archived=0,
                )
            )

    def finish_forgetting_run(self, run_id: str, ids: Sequence[int], when: dt.datetime) -> int:
        """One transaction: the archived chunks go (tags and vectors cascade), their deletes
        are queued for the index, and the run counts as archived. Returns chunks deleted."""
        deleted = 0
        with self.write() as s:
            self.lock_index(s.connection())
            for start in range(0, len(ids), _BATCH):
                batch = list(ids[start : start + _BATCH])
                self.queue_deletes(s.connection(), batch)
                result = s.execute(
                    sa.delete(Chunk)
                    .where(Chunk.id.in_(batch))
                    .execution_options(synchronize_session=False)
                )
                deleted += int(result.rowcount)  # type: ignore[attr-defined]
            s.execute(
                sa.update(ForgettingRun)
                .where(ForgettingRun.run_id == run_id)
                .values(status=RUN_ARCHIVED, n_archived=deleted, finished_at=when)
            )
        return deleted

    def forgetting_run_statuses(self) -> dict[str, str]:
        with self.conn() as c:
            rows = c.execute(sa.select(ForgettingRun.run_id, ForgettingRun.status))
            return {str(r): str(s) for r, s in rows}

    def forgetting_run(self, run_id: str) -> RunRecord | None:
        with self.conn() as c:
            row = c.execute(
                sa.select(
                    ForgettingRun.status, ForgettingRun.n_archived, ForgettingRun.params
                ).where(ForgettingRun.run_id == run_id)
            ).first()
        if row is None:
            return None
        status, n_archived, params = row
        return RunRecord(run_id, str(status), int(n_archived or 0), str(params or "{}"))

    def restored_archive_keys(self) -> set[str]:
        with self.conn() as c:
            return {str(k) for k in c.execute(sa.select(ArchiveRestore.archive_key)).scalars()}

    def documents_info(self, doc_ids: Iterable[str]) -> dict[str, DocumentInfo]:
        wanted = sorted(set(doc_ids))
        out: dict[str, DocumentInfo] = {}
        with self.conn() as c:
            for start in range(0, len(wanted), _BATCH):
                rows = c.execute(
                    sa.select(Document.__table__).where(
                        Document.doc_id.in_(wanted[start : start + _BATCH])
                    )
                )
                out.update((row.doc_id, doc_info(row)) for row in rows)
        return out

    def live_positions(self, positions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """(doc_id, chunk_index) -> chunk id, for the given positions that hold a live chunk."""
        with self.conn() as c:
            return _live_positions(c, positions)

    def restore_chunks(
        self, items: Sequence[RestoredChunk], vectors: np.ndarray, model_id: str, when: dt.datetime
    ) -> RestoreWrite:
        """Bring chunks back with new ids in one transaction, skipping positions live by then.

        Checked again inside the write transaction (someone may have re-ingested the
        document since the caller looked). Documents that went missing are recreated;
        tags, vectors, the index queue and the restore records go in with the chunks.
        """
        with self.write() as s:
            c = s.connection()
            self.lock_index(c)
            live = _live_positions(c, (item.position for item in items))
            kept = [i for i, item in enumerate(items) if item.position not in live]
            todo = [items[i] for i in kept]
            if not todo:
                return RestoreWrite([], [], 0)
            doc_ids = sorted({item.position[0] for item in todo})
            present = set(
                c.execute(sa.select(Document.doc_id).where(Document.doc_id.in_(doc_ids))).scalars()
            )
            missing: dict[str, dict[str, Any]] = {}
            for item in todo:
                doc_id = item.position[0]
                if doc_id not in present and doc_id not in missing:
                    missing[doc_id] = item.document
            # Core executemany on the tables: no ORM bookkeeping for thousands of plain rows.
            if missing:
                c.execute(sa.insert(_TABLES["documents"]), list(missing.values()))
            # No RETURNING (row-at-a-time on SQLite): (doc_id, chunk_index) is unique, so the
            # new ids are read back by position in the same transaction.
            rows = [item.chunk for item in todo]
            for start in range(0, len(rows), _BATCH):
                c.execute(sa.insert(_TABLES["chunks"]), rows[start : start + _BATCH])
            by_position = _live_positions(c, (item.position for item in todo))
            ids = [by_position[item.position] for item in todo]
            pairs = list(zip(ids, todo, strict=True))
            tags = [{"chunk_id": i, "tag": t} for i, item in pairs for t in item.tags]
            if tags:
                c.execute(sa.insert(_TABLES["chunk_tags"]), tags)
            chosen = vectors[np.asarray(kept, dtype=np.int64)]
            dim = int(chosen.shape[1])
            c.execute(
                sa.insert(_TABLES["embeddings"]),
                [
                    {"chunk_id": i, "model_id": model_id, "dim": dim, "vector": v.tobytes()}
                    for i, v in zip(ids, chosen, strict=True)
                ],
            )
            self.queue_adds(c, ids)
            c.execute(
                sa.insert(_TABLES["archive_restores"]),
                [
                    {"archive_key": item.archive_key, "restored_at": when, "new_chunk_id": i}
                    for i, item in pairs
                ],
            )
            return RestoreWrite(kept, ids, len(missing))


def _live_positions(
    c: sa.Connection, positions: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    wanted = set(positions)
    by_doc: dict[str, set[int]] = {}
    for doc_id, index in wanted:
        by_doc.setdefault(doc_id, set()).add(index)
    docs = sorted(by_doc)
    out: dict[tuple[str, int], int] = {}
    # doc_id IN (…) AND chunk_index IN (…) seeks the unique index; a row-value IN would
    # scan it on SQLite. The result is a superset, filtered here.
    step = _BATCH // 5
    for start in range(0, len(docs), step):
        batch = docs[start : start + step]
        indexes = sorted(set().union(*(by_doc[d] for d in batch)))
        for part in range(0, len(indexes), _BATCH):
            rows = c.execute(
                sa.select(Chunk.doc_id, Chunk.chunk_index, Chunk.id).where(
                    Chunk.doc_id.in_(batch), Chunk.chunk_index.in_(indexes[part : part + _BATCH])
                )
            )
            for d, i, cid in rows:
                if (d, i) in wanted:
                    out[(str(d), int(i))] = int(cid)
    return out
