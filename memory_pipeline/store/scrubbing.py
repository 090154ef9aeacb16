"""Reads and the one write of a scrub (``memory/scrub.py``): the stored texts of the spaces
a memory may change, and their redacted replacements in one transaction.

What a scrub may change is what forgetting may: the space the store writes, or every
space for an all-spaces binding (``Spaces.may_write``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from memory_pipeline.store.base import StoreBase
from memory_pipeline.store.engine import SQLITE_BUSY_TIMEOUT_MS, sqlite_file
from memory_pipeline.store.rows import BATCH, batched
from memory_pipeline.store.schema import (
    Chunk,
    ChunkChange,
    ChunkTag,
    Document,
    Embedding,
    Handed,
)


@dataclass(frozen=True)
class StoredChunk:
    id: int
    doc_id: str
    chunk_index: int
    space: str
    content: str
    index_text: str | None
    tags: tuple[str, ...]
    turns: str | None = None  # the chunks.turns column: JSON, for a turn's chunk


@dataclass(frozen=True)
class ChunkFix:
    """A chunk's texts as they are to be kept, and its vector of them (``model_id``'s)."""

    id: int
    content: str
    index_text: str | None
    content_sha: str
    token_count: int
    vector: bytes
    dim: int
    drop_tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class DocumentFix:
    doc_id: str
    title: str
    source: str


@dataclass(frozen=True)
class HandedFix:
    id: int
    query: str | None
    block: str | None
    hits: str


@dataclass(frozen=True)
class ChangeFix:
    """A history record's before and after (JSON) as they are to be kept."""

    id: int
    before: str | None
    after: str | None


@dataclass(frozen=True)
class ScrubWrite:
    """Everything one scrub rewrites in the database."""

    chunks: Sequence[ChunkFix] = ()
    documents: Sequence[DocumentFix] = ()
    handed: Sequence[HandedFix] = ()
    history: Sequence[ChangeFix] = ()
    model_id: str = ""


class ScrubQueries(StoreBase):
    def changeable(self, column: Any) -> Any:
        """``column`` (a space column) is one this store may change."""
        return sa.true() if self.spaces.read is None else column == self.spaces.write

    def stored_chunks(self) -> Iterator[StoredChunk]:
        """Every chunk of the changeable spaces with its texts and tags, by id."""
        last = 0
        stmt = sa.select(
            Chunk.id,
            Chunk.doc_id,
            Chunk.chunk_index,
            Chunk.space,
            Chunk.content,
            Chunk.index_text,
            Chunk.turns,
        ).where(self.changeable(Chunk.space))
        while True:
            with self.conn() as c:
                rows = c.execute(stmt.where(Chunk.id > last).order_by(Chunk.id).limit(BATCH)).all()
                ids = [int(r.id) for r in rows]
                tags: dict[int, list[str]] = {}
                for chunk_id, tag in c.execute(
                    sa.select(ChunkTag.chunk_id, ChunkTag.tag)
                    .where(ChunkTag.chunk_id.in_(ids))
                    .order_by(ChunkTag.chunk_id, ChunkTag.tag)
                ):
                    tags.setdefault(int(chunk_id), []).append(str(tag))
            if not rows:
                return
            for r in rows:
                yield StoredChunk(
                    int(r.id),
                    str(r.doc_id),
                    int(r.chunk_index),
                    str(r.space),
                    str(r.content),
                    r.index_text,
                    tuple(tags.get(int(r.id), ())),
                    r.turns,
                )
            last = ids[-1]

    def stored_documents(self) -> list[tuple[str, str, str, str]]:
        """(doc_id, space, title, source) of every document of the changeable spaces."""
        stmt = sa.select(Document.doc_id, Document.space, Document.title, Document.source)
        with self.conn() as c:
            rows = c.execute(stmt.where(self.changeable(Document.space)).order_by(Document.doc_id))
            return [(str(d), str(s), str(t), str(src)) for d, s, t, src in rows]

    def stored_handed(self) -> list[tuple[int, str, str | None, str | None, str]]:
        """(id, space, query, block, hits JSON) of what was handed in the changeable spaces."""
        stmt = sa.select(Handed.id, Handed.space, Handed.query, Handed.block, Handed.hits)
        with self.conn() as c:
            rows = c.execute(stmt.where(self.changeable(Handed.space)).order_by(Handed.id))
            return [(int(i), str(s), q, b, str(h)) for i, s, q, b, h in rows]

    def stored_history(self) -> list[tuple[int, str, str | None, str | None]]:
        """(id, space, before, after) of every recorded change in the changeable spaces."""
        stmt = sa.select(ChunkChange.id, ChunkChange.space, ChunkChange.before, ChunkChange.after)
        with self.conn() as c:
            rows = c.execute(
                stmt.where(self.changeable(ChunkChange.space)).order_by(ChunkChange.id)
            )
            return [(int(i), str(s), b, a) for i, s, b, a in rows]

    def write_scrub(self, change: ScrubWrite) -> None:
        """One transaction: each chunk's texts, content hash and vector (``model_id``'s;
        another model's vector of the old text is dropped), its tags that held a secret,
        each document's title and source, each handed record. An index kept in this
        database (pgvector) drops and takes in the changed chunks in the same transaction;
        the others are rebuilt by the caller."""
        ids = [fix.id for fix in change.chunks]
        with self.write() as s:
            conn = s.connection()
            if self.backend == "sqlite":  # a page rewritten keeps no old bytes in its free space
                conn.exec_driver_sql("PRAGMA secure_delete = ON")
            if ids:
                self.lock_index(conn)
            for batch in batched(ids):
                allowed = set(
                    s.scalars(
                        sa.select(Chunk.id).where(Chunk.id.in_(batch), self.changeable(Chunk.space))
                    )
                )
                if len(allowed) != len(batch):
                    raise ValueError("a scrub may change only the spaces its memory writes")
            if ids and self.index_hook is not None:
                self.index_hook.deleted(conn, ids)
            for fix in change.chunks:
                s.execute(
                    sa.update(Chunk)
                    .where(Chunk.id == fix.id)
                    .values(
                        content=fix.content,
                        index_text=fix.index_text,
                        content_sha=fix.content_sha,
                        token_count=fix.token_count,
                    )
                )
                s.execute(sa.delete(Embedding).where(Embedding.chunk_id == fix.id))
                s.execute(
                    sa.insert(Embedding).values(
                        chunk_id=fix.id, model_id=change.model_id, dim=fix.dim, vector=fix.vector
                    )
                )
                if fix.drop_tags:
                    s.execute(
                        sa.delete(ChunkTag).where(
                            ChunkTag.chunk_id == fix.id, ChunkTag.tag.in_(fix.drop_tags)
                        )
                    )
            if ids and self.index_hook is not None:
                self.index_hook.added(conn, ids)
            for doc in change.documents:
                s.execute(
                    sa.update(Document)
                    .where(Document.doc_id == doc.doc_id, self.changeable(Document.space))
                    .values(title=doc.title, source=doc.source)
                )
            for kept in change.history:
                s.execute(
                    sa.update(ChunkChange)
                    .where(ChunkChange.id == kept.id, self.changeable(ChunkChange.space))
                    .values(before=kept.before, after=kept.after)
                )
            for record in change.handed:
                s.execute(
                    sa.update(Handed)
                    .where(Handed.id == record.id, self.changeable(Handed.space))
                    .values(query=record.query, block=record.block, hits=record.hits)
                )

    def purge_freed(self) -> tuple[list[str], bool]:
        """Rewrite the database's files so that no freed page keeps an earlier text; what
        was done, one line each, and whether all of it was (a reader that holds SQLite's
        write-ahead log open through every try keeps it from being truncated). SQLite: the write-ahead log checkpointed and truncated,
        then ``VACUUM`` (a fresh copy of the live pages only), then truncated again.
        PostgreSQL: ``VACUUM FULL`` of the tables a scrub rewrites (fresh table files;
        the old ones are removed), their statistics made again and ``pg_statistic``
        rewritten (an ANALYZE keeps sampled values of a column), and a ``CHECKPOINT``; what its write-ahead log and any
        standby or backup still hold is beyond this command (docs/hygiene.md)."""
        done: list[str] = []
        db_file = sqlite_file(self.url)
        if db_file is not None:
            # a connection of its own, outside any transaction (VACUUM cannot run in one)
            conn = sqlite3.connect(
                db_file, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000, isolation_level=None
            )
            try:
                conn.execute("PRAGMA secure_delete = ON")
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                conn.execute("VACUUM")
                for _ in range(CHECKPOINT_TRIES):  # each waits out readers (busy timeout)
                    busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                    if not busy:
                        break
            finally:
                conn.close()
            done.append(
                "SQLite: VACUUM, write-ahead log truncated"
                + (" (not yet: a reader held it; run scrub --apply again)" if busy else "")
            )
            return done, not busy
        elif self.backend == "postgresql":
            with self.engine.connect() as c:
                c = c.execution_options(isolation_level="AUTOCOMMIT")
                names = set(sa.inspect(c).get_table_names())
                tables = [t for t in sorted(names) if t in SCRUBBED or t.startswith("pgv_")]
                for table in tables:
                    c.exec_driver_sql(f'VACUUM (FULL, ANALYZE) "{table}"')
                said = f"PostgreSQL: VACUUM FULL of {len(tables)} tables"
                # an ANALYZE (autovacuum's, during the scrub) kept sampled values of the old
                # texts as column statistics: made again from the new rows, the old
                # statistics' rows rewritten away (only a superuser may; else a warning)
                c.exec_driver_sql("VACUUM FULL pg_catalog.pg_statistic")
                said += ", their statistics made again"
                try:
                    c.exec_driver_sql("CHECKPOINT")
                    said += ", CHECKPOINT"
                except sa.exc.DBAPIError:
                    said += " (CHECKPOINT not permitted to this role)"
                done.append(said)
        return done, True


#: Checkpoints tried after the VACUUM, each waiting out readers up to the busy timeout.
CHECKPOINT_TRIES = 3
#: The tables whose rows a scrub rewrites.
SCRUBBED = {"chunks", "documents", "chunk_tags", "embeddings", "handed", "chunk_changes"}
