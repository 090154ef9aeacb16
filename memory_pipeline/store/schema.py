"""The database schema: the single source of truth (DESIGN §1).

Indices are derived from these tables and can always be rebuilt from them.
Alembic migrations under ``migrations/`` create and evolve exactly this schema.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    BigInteger,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from memory_pipeline.spaces import DEFAULT_SPACE


class UTCDateTime(TypeDecorator[dt.datetime]):
    """Timezone-aware UTC timestamps on every backend (SQLite stores them naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: object) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC)

    def process_result_value(
        self, value: dt.datetime | None, dialect: object
    ) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC)


# Integer ids double as FAISS/tantivy ids; BigInteger on PostgreSQL, INTEGER
# (rowid alias) on SQLite so AUTOINCREMENT keeps ids from ever being reused.
ChunkId = BigInteger().with_variant(Integer(), "sqlite")

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Document(Base):
    __tablename__ = "documents"

    doc_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    # The memory space it belongs to (see memory_pipeline/spaces.py).
    space: Mapped[str] = mapped_column(String(64), index=True, server_default=DEFAULT_SPACE)
    source: Mapped[str] = mapped_column(Text, index=True)
    title: Mapped[str] = mapped_column(Text)
    fmt: Mapped[str] = mapped_column(String(16))
    content_hash: Mapped[str] = mapped_column(String(64))
    normalized_hash: Mapped[str] = mapped_column(String(64), index=True)
    byte_size: Mapped[int] = mapped_column(BigInteger)
    knowledge_type: Mapped[str | None] = mapped_column(String(16))
    importance: Mapped[float | None] = mapped_column(Float)
    source_date: Mapped[dt.date | None] = mapped_column(Date)
    source_date_rule: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    n_chunks: Mapped[int] = mapped_column(Integer)


class Chunk(Base):
    __tablename__ = "chunks"
    __table_args__ = (
        UniqueConstraint("doc_id", "chunk_index", name="uq_chunks_doc_id_chunk_index"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(ChunkId, primary_key=True, autoincrement=True)
    doc_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("documents.doc_id", ondelete="CASCADE"), index=True
    )
    chunk_index: Mapped[int] = mapped_column(Integer)
    # Its document's space, kept on the chunk so that every filter is one index away.
    space: Mapped[str] = mapped_column(String(64), index=True, server_default=DEFAULT_SPACE)
    content: Mapped[str] = mapped_column(Text)
    content_sha: Mapped[str] = mapped_column(String(64), index=True)
    token_count: Mapped[int] = mapped_column(Integer)
    knowledge_type: Mapped[str | None] = mapped_column(String(16), index=True)
    # Indexed: guaranteed candidates are looked up by importance on every memory search.
    importance: Mapped[float | None] = mapped_column(Float, index=True)
    access_count: Mapped[int] = mapped_column(Integer, default=0)
    last_accessed_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, index=True)
    source_date: Mapped[dt.date | None] = mapped_column(Date, index=True)
    # What the indices hold when it is more than the content (a turn with its context);
    # NULL: the content. ``content_sha`` is the hash of what is embedded, so vectors are
    # reused by the text they were made from.
    index_text: Mapped[str | None] = mapped_column(Text)
    # The conversation turns the chunk holds, as JSON [{turn_id, speaker, said_at}].
    turns: Mapped[str | None] = mapped_column(Text)


class ChunkTag(Base):
    __tablename__ = "chunk_tags"
    __table_args__ = (Index("ix_chunk_tags_tag", "tag"),)

    chunk_id: Mapped[int] = mapped_column(
        ChunkId, ForeignKey("chunks.id", ondelete="CASCADE"), primary_key=True
    )
    tag: Mapped[str] = mapped_column(String(512), primary_key=True)


class Embedding(Base):
    """One float32 vector per (chunk, model id); never recomputed on rebuild."""

    __tablename__ = "embeddings"

    chunk_id: Mapped[int] = mapped_column(
        ChunkId, ForeignKey("chunks.id", ondelete="CASCADE"), primary_key=True
    )
    model_id: Mapped[str] = mapped_column(String(256), primary_key=True)
    dim: Mapped[int] = mapped_column(Integer)
    vector: Mapped[bytes] = mapped_column(LargeBinary)


class IndexChange(Base):
    """Chunks added or deleted since the index last took them in.

    Written in the same transaction as the chunk itself, so the index writer
    finds exactly what changed (cost proportional to the change) and serving
    knows which live chunks the published index may not hold yet.
    """

    __tablename__ = "index_changes"
    __table_args__ = ({"sqlite_autoincrement": True},)

    seq: Mapped[int] = mapped_column(ChunkId, primary_key=True, autoincrement=True)
    chunk_id: Mapped[int] = mapped_column(ChunkId, index=True)
    op: Mapped[str] = mapped_column(String(8))


class ChunkGeneration(Base):
    """One row: a number raised by every transaction that adds or deletes chunks.

    Raised at the end of that transaction (``StoreBase.write``), so it moves exactly
    when the set of live chunks does, whatever the index backend: what is derived from
    that set (a space's ids, ``ChunkQueries.space_restriction``) is kept until it moves.
    """

    __tablename__ = "chunk_generation"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    generation: Mapped[int] = mapped_column(BigInteger)


class SpaceRoot(Base):
    """A project root whose sessions were captured into a space, and when last: what
    ``memory-pipeline spaces`` lists beside each space's counts. Two roots on one space
    are two projects sharing it."""

    __tablename__ = "space_roots"

    space: Mapped[str] = mapped_column(String(64), primary_key=True)
    root: Mapped[str] = mapped_column(String(4096), primary_key=True)
    last_capture_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)


class Handed(Base):
    """What the memory gave an agent: a recall block a hook injected, the chunks handed
    over with a prompt, or the hits of a search it made over MCP; per space, the latest few hundred kept (``store/handed.py``).
    The query is kept redacted; a hit is named by its chunk, not copied."""

    __tablename__ = "handed"
    __table_args__ = (Index("ix_handed_space", "space"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    space: Mapped[str] = mapped_column(String(64))
    at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    kind: Mapped[str] = mapped_column(String(16))  # "recall" | "search" | "prompt"
    session: Mapped[str | None] = mapped_column(String(256))
    query: Mapped[str | None] = mapped_column(Text)
    block: Mapped[str | None] = mapped_column(Text)  # the recall block as injected
    hits: Mapped[str] = mapped_column(Text)  # JSON: [[doc_id, chunk_index, score, title]]


class ChunkChange(Base):
    """A change a person or an agent made to the memory: a chunk's importance, knowledge
    type or tags (``chunk_index`` set), or a document deleted (``field`` "document"); from
    what to what (JSON), by whom (``actor``: mcp, cli, page, pipeline, api) and when.
    Written in the change's own transaction (``store/history.py``)."""

    __tablename__ = "chunk_changes"
    __table_args__ = (
        Index("ix_chunk_changes_space", "space"),
        Index("ix_chunk_changes_doc", "doc_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    space: Mapped[str] = mapped_column(String(64))
    at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    actor: Mapped[str] = mapped_column(String(16))
    doc_id: Mapped[str] = mapped_column(String(64))
    chunk_index: Mapped[int | None] = mapped_column(Integer)
    field: Mapped[str] = mapped_column(String(32))
    before: Mapped[str | None] = mapped_column(Text)  # JSON
    after: Mapped[str | None] = mapped_column(Text)  # JSON
    #: A person's verdict on an agent's change: accepted, reverted (None: not yet).
    review: Mapped[str | None] = mapped_column(String(16))
    reviewed_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)


class Redaction(Base):
    """How many secrets (by kind) and private spans a space's texts had taken out before
    they were kept: counted as they are taken, so a later delete does not lower it."""

    __tablename__ = "redactions"

    space: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(48), primary_key=True)
    count: Mapped[int] = mapped_column(BigInteger)


class IndexVersion(Base):
    __tablename__ = "index_versions"

    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    model_id: Mapped[str] = mapped_column(String(256))
    dim: Mapped[int] = mapped_column(Integer)
    n_dense: Mapped[int] = mapped_column(Integer)
    n_sparse: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(16))
    added: Mapped[int] = mapped_column(Integer)
    removed: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)


class ForgettingRun(Base):
    """One real forgetting run. Its archive lines count only once status is "archived".

    The run row commits as "pending" before any line is appended to the archive and
    turns "archived" in the same transaction that deletes the chunks, so a chunk is
    live or archived at every instant, never both and never neither.
    """

    __tablename__ = "forgetting_runs"

    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    status: Mapped[str] = mapped_column(String(16))  # "pending" | "archived"
    dry_run: Mapped[bool] = mapped_column()
    params: Mapped[str] = mapped_column(Text)  # JSON
    n_candidates: Mapped[int] = mapped_column(Integer)
    n_archived: Mapped[int] = mapped_column(Integer)


class ArchiveRestore(Base):
    """An archived chunk brought back: its archive line no longer counts as archived."""

    __tablename__ = "archive_restores"

    archive_key: Mapped[str] = mapped_column(String(96), primary_key=True)  # "run_id:chunk_id"
    restored_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    new_chunk_id: Mapped[int] = mapped_column(ChunkId)
