"""Shared pieces of the store's modules: batching, row mapping, cached statements."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import fields
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.orm import Session

from memory_pipeline.store.schema import Chunk, ChunkTag, Document
from memory_pipeline.types import ChunkRecord, DocumentInfo, Turn

# SQLite caps bound parameters per statement; stay well below on every backend.
BATCH = 900


def batched(items: Sequence[Any], size: int = BATCH) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# What BM25 indexes for a chunk: its content, or, for a chunk with an index text (a
# conversation turn with its context), the index text and then the content again, so the
# turn's own words count twice against its neighbours' once (measured on LoCoMo:
# docs/conversations.md). Dense vectors embed the index text as it is.
SPARSE_TEXT = sa.case(
    (Chunk.index_text.is_(None), Chunk.content),
    else_=Chunk.index_text + "\n" + Chunk.content,
)


def now_utc() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def content_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def turns_json(turns: Sequence[Turn]) -> str | None:
    """The ``chunks.turns`` column: JSON, or NULL for a chunk that holds no turn."""
    return json.dumps([t.to_dict() for t in turns], ensure_ascii=False) if turns else None


def turns_from(value: str | None) -> tuple[Turn, ...]:
    return tuple(Turn.from_dict(t) for t in json.loads(value)) if value else ()


def stack_vectors(blobs: Sequence[bytes]) -> np.ndarray:
    if not blobs:
        return np.zeros((0, 0), dtype=np.float32)
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1).copy()


# Expanding bind parameters: one cached statement however many ids (hot search path).
CHUNKS_BY_ID = sa.select(Chunk.__table__).where(
    Chunk.__table__.c.id.in_(sa.bindparam("ids", expanding=True))
)
# ... and within spaces (the ``spaces`` parameter), also compiled once.
CHUNKS_BY_ID_IN_SPACES = CHUNKS_BY_ID.where(
    Chunk.__table__.c.space.in_(sa.bindparam("spaces", expanding=True))
)


TAGS_BY_CHUNK = (
    sa.select(ChunkTag.chunk_id, ChunkTag.tag)
    .where(ChunkTag.chunk_id.in_(sa.bindparam("ids", expanding=True)))
    .order_by(ChunkTag.tag)
)


def tags_for(s: Session | sa.Connection, ids: Sequence[int]) -> dict[int, tuple[str, ...]]:
    tags: dict[int, list[str]] = defaultdict(list)
    for batch in batched(list(ids)):
        for cid, tag in s.execute(TAGS_BY_CHUNK, {"ids": list(batch)}):
            tags[int(cid)].append(tag)
    return {k: tuple(v) for k, v in tags.items()}


def chunk_record(row: Any, tags: tuple[str, ...]) -> ChunkRecord:
    return ChunkRecord(
        id=int(row.id),
        doc_id=row.doc_id,
        chunk_index=row.chunk_index,
        content=row.content,
        token_count=row.token_count,
        knowledge_type=row.knowledge_type,
        importance=row.importance,
        tags=tags,
        access_count=row.access_count,
        last_accessed_at=row.last_accessed_at,
        created_at=row.created_at,
        source_date=row.source_date,
        space=row.space,
        index_text=row.index_text,
        turns=turns_from(row.turns),
    )


# DocumentInfo's fields are the documents table's columns by name (all but ``space``),
# so both directions copy by these names and a new field needs no new line here.
_DOCUMENT_FIELDS = tuple(f.name for f in fields(DocumentInfo))


def doc_info(row: Document | sa.Row[Any]) -> DocumentInfo:
    """A documents row (ORM object or Core row) as the DocumentInfo it stores."""
    return DocumentInfo(**{name: getattr(row, name) for name in _DOCUMENT_FIELDS})


def document_row(doc: DocumentInfo, *, space: str, n_chunks: int) -> Document:
    """The documents row that stores ``doc`` in ``space`` with ``n_chunks`` chunks."""
    values = {name: getattr(doc, name) for name in _DOCUMENT_FIELDS}
    return Document(**(values | {"space": space, "n_chunks": n_chunks}))
