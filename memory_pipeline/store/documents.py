"""Documents: stored with their chunks, tags, vectors and queued index adds; replaced; deleted."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.orm import Session

from memory_pipeline.errors import InvalidInputError, NotFoundError
from memory_pipeline.store.base import StoreBase, no_document
from memory_pipeline.store.history import DOCUMENT, record_changes
from memory_pipeline.store.redactions import add_redactions
from memory_pipeline.store.rows import batched, content_sha, doc_info, document_row, turns_json
from memory_pipeline.store.schema import Chunk, ChunkTag, Document, Embedding
from memory_pipeline.types import DocumentInfo, NewChunk


@dataclass(frozen=True)
class TaggedDocument:
    """A document some live chunk of which carries a tag (``DocumentQueries.tagged_documents``),
    with the greatest tag of its chunks that starts with the prefix asked for."""

    doc_id: str
    title: str
    source_date: dt.date | None
    created_at: dt.datetime
    latest: str | None


@dataclass(frozen=True)
class StoredDocument:
    """What ``Store.store_document`` wrote: the new chunk ids and the versions it replaced."""

    ids: list[int]
    replaced: list[str]


class DocumentQueries(StoreBase):
    def get_document(self, doc_id: str) -> DocumentInfo | None:
        with self.read() as s:
            row = s.scalar(
                sa.select(Document).where(Document.doc_id == doc_id, self.readable(Document.space))
            )
            return doc_info(row) if row else None

    def document_labels(self, doc_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
        """doc_id -> (title, source) for the given documents (those that exist)."""
        wanted = list(dict.fromkeys(doc_ids))
        out: dict[str, tuple[str, str]] = {}
        with self.conn() as c:
            for batch in batched(wanted):
                rows = c.execute(_LABELS_BY_DOC, {"ids": list(batch)})
                out.update((d, (t, src)) for d, t, src, space in rows if self.spaces.reads(space))
        return out

    def tagged_documents(self, tag: str, prefix: str) -> list[TaggedDocument]:
        """The readable documents with a live chunk tagged ``tag``, by doc_id, each with the
        greatest of its chunks' tags starting with ``prefix`` (None: no such tag); e.g. the
        conversations with their ``transcript_last_activity:`` stamps, which sort as times."""
        tagged = (
            sa.select(Chunk.doc_id)
            .join(ChunkTag, ChunkTag.chunk_id == Chunk.id)
            .where(ChunkTag.tag == tag, self.readable(Chunk.space))
            .distinct()
            .subquery()
        )
        stamps = (
            sa.select(Chunk.doc_id, sa.func.max(ChunkTag.tag).label("latest"))
            .join(ChunkTag, ChunkTag.chunk_id == Chunk.id)
            .where(ChunkTag.tag.startswith(prefix, autoescape=True), self.readable(Chunk.space))
            .group_by(Chunk.doc_id)
            .subquery()
        )
        stmt = (
            sa.select(
                Document.doc_id,
                Document.title,
                Document.source_date,
                Document.created_at,
                stamps.c.latest,
            )
            .join(tagged, tagged.c.doc_id == Document.doc_id)
            .outerjoin(stamps, stamps.c.doc_id == Document.doc_id)
            .order_by(Document.doc_id)
        )
        with self.read() as s:
            return [TaggedDocument(*row) for row in s.execute(stmt)]

    def recent_documents(
        self,
        limit: int,
        offset: int = 0,
        *,
        tags: Iterable[str] = (),
        without_tag: str | None = None,
        knowledge_type: str | None = None,
        space: str | None = None,
    ) -> list[DocumentInfo]:
        """The readable documents, newest first by source date (else by the day stored);
        only those with a chunk tagged each of ``tags``, with none tagged ``without_tag``,
        of ``knowledge_type``, in ``space`` (one of the readable), when given."""
        when = sa.func.coalesce(Document.source_date, sa.func.date(Document.created_at))
        stmt = sa.select(Document).where(self.readable(Document.space))
        for tag in tags:
            stmt = stmt.where(Document.doc_id.in_(_tagged(tag)))
        if without_tag is not None:
            stmt = stmt.where(Document.doc_id.not_in(_tagged(without_tag)))
        if knowledge_type is not None:
            stmt = stmt.where(Document.knowledge_type == knowledge_type)
        if space is not None:
            stmt = stmt.where(Document.space == space)
        stmt = stmt.order_by(when.desc(), Document.created_at.desc(), Document.doc_id)
        with self.read() as s:
            return [doc_info(row) for row in s.scalars(stmt.limit(limit).offset(offset))]

    def spaces_of(self, doc_ids: Iterable[str]) -> dict[str, str]:
        """The space of each of ``doc_ids`` that is readable."""
        out: dict[str, str] = {}
        with self.read() as s:
            for batch in batched(list(dict.fromkeys(doc_ids))):
                stmt = sa.select(Document.doc_id, Document.space).where(
                    Document.doc_id.in_(batch), self.readable(Document.space)
                )
                out.update((doc_id, space) for doc_id, space in s.execute(stmt))
        return out

    def count_documents_tagged(self, tag: str) -> int:
        """How many readable documents have a readable chunk tagged ``tag``."""
        ids = _tagged(tag).where(self.readable(Chunk.space)).distinct().subquery()
        with self.read() as s:
            return int(s.scalar(sa.select(sa.func.count()).select_from(ids)) or 0)

    def document_footprint(self, doc_id: str) -> tuple[int, int]:
        """(chunks, stored vectors) of a readable document: what deleting it removes."""
        chunks = sa.select(Chunk.id).where(Chunk.doc_id == doc_id, self.readable(Chunk.space))
        with self.read() as s:
            n_chunks = s.scalar(sa.select(sa.func.count()).select_from(chunks.subquery()))
            n_vectors = s.scalar(
                sa.select(sa.func.count())
                .select_from(Embedding)
                .where(Embedding.chunk_id.in_(chunks))
            )
        return int(n_chunks or 0), int(n_vectors or 0)

    def documents_tagged(self, doc_ids: Iterable[str], tag: str) -> set[str]:
        """Those of ``doc_ids`` with a readable chunk tagged ``tag``."""
        out: set[str] = set()
        with self.read() as s:
            for batch in batched(list(dict.fromkeys(doc_ids))):
                stmt = _tagged(tag).where(Chunk.doc_id.in_(batch), self.readable(Chunk.space))
                out.update(s.scalars(stmt))
        return out

    def chunk_days(self) -> list[tuple[str | None, dt.date, dt.date, int]]:
        """The readable chunks counted by (knowledge type, day stored, source date else
        the day stored): what the viewer's charts of growth and age are drawn from."""
        stored = sa.func.date(Chunk.created_at)
        dated = sa.func.coalesce(Chunk.source_date, stored)
        stmt = (
            sa.select(Chunk.knowledge_type, stored, dated, sa.func.count())
            .where(self.readable(Chunk.space))
            .group_by(Chunk.knowledge_type, stored, dated)
        )
        with self.read() as s:
            return [(kt, _day(a), _day(b), int(n)) for kt, a, b, n in s.execute(stmt)]

    def documents_by_source(self, source: str) -> list[DocumentInfo]:
        with self.read() as s:
            rows = s.scalars(
                sa.select(Document).where(
                    Document.source == source, Document.space == self.spaces.write
                )
            ).all()
            return [doc_info(r) for r in rows]

    def documents_without_source_date(self) -> list[DocumentInfo]:
        with self.read() as s:
            rows = s.scalars(
                sa.select(Document).where(
                    Document.source_date.is_(None), Document.space == self.spaces.write
                )
            ).all()
            return [doc_info(r) for r in rows]

    def set_source_date(self, doc_id: str, day: dt.date, rule: str) -> int:
        """Set a document's date and its chunks' (where unset); returns chunks changed."""
        with self.write() as s:
            self._writable(s, doc_id)
            s.execute(
                sa.update(Document)
                .where(Document.doc_id == doc_id)
                .values(source_date=day, source_date_rule=rule)
            )
            result = s.execute(
                sa.update(Chunk)
                .where(Chunk.doc_id == doc_id, Chunk.source_date.is_(None))
                .values(source_date=day)
            )
            return int(result.rowcount)  # type: ignore[attr-defined]

    def add_document(
        self,
        doc: DocumentInfo,
        chunks: Sequence[NewChunk],
        vectors: np.ndarray,
        model_id: str,
        tags: Sequence[str] = (),
        replace: Sequence[str] = (),
    ) -> list[int]:
        """Store a document, its chunks, tags and vectors in one transaction.

        ``replace`` names documents (an older version of the same source) that
        are deleted in the same transaction, so a reader never sees both or neither.
        """
        vectors = _checked_vectors(chunks, vectors)
        with self.write() as s:
            for old in replace:
                if self._writable(s, old, missing_ok=True):
                    self._delete_document(s, old)
            return self._insert_document(s, doc, chunks, vectors, model_id, tags)

    def store_document(
        self,
        doc: DocumentInfo,
        chunks: Sequence[NewChunk],
        vectors: np.ndarray,
        model_id: str,
        tags: Sequence[str] = (),
        redactions: Mapping[str, int] | None = None,
    ) -> StoredDocument | None:
        """Store a document in place of every other version of its source, in one transaction.

        ``redactions`` (kind → n: what the redaction step took out of it) are counted in
        the same transaction, so a document stored is a document counted.

        Whether the content is already stored, and which versions it replaces, is
        decided inside the write transaction: two writers storing the same file at
        once see each other (the second gets ``None``: already stored), and never
        leave two versions of one source.
        """
        vectors = _checked_vectors(chunks, vectors)
        with self.write() as s:
            if s.get(Document, doc.doc_id) is not None:
                return None
            older = list(
                s.scalars(
                    sa.select(Document.doc_id)
                    .where(Document.source == doc.source, Document.space == self.spaces.write)
                    .order_by(Document.created_at)
                )
            )
            for old in older:
                self._delete_document(s, old)
            ids = self._insert_document(s, doc, chunks, vectors, model_id, tags)
            if redactions:
                add_redactions(s, redactions, self.spaces.write)
            return StoredDocument(ids=ids, replaced=older)

    def delete_document(self, doc_id: str, *, actor: str = "api") -> int:
        """Delete a document with its chunks, tags and vectors; returns chunks removed. The
        deletion is recorded with ``actor`` (its title, source and chunk count before)."""
        with self.write() as s:
            self._writable(s, doc_id)
            row = s.get(Document, doc_id)
            n = self._delete_document(s, doc_id)
            if n is None or row is None:
                raise NotFoundError(no_document(doc_id))
            before = {"title": row.title, "source": row.source, "chunks": n}
            record_changes(
                s, space=self.spaces.write, actor=actor, doc_id=doc_id, chunk_index=None,
                changes=[(DOCUMENT, before, None)],
            )  # fmt: skip
            return n

    def _insert_document(
        self,
        s: Session,
        doc: DocumentInfo,
        chunks: Sequence[NewChunk],
        vectors: np.ndarray,
        model_id: str,
        tags: Sequence[str],
    ) -> list[int]:
        self.lock_index(s.connection())
        ids = _insert_document(s, doc, chunks, vectors, model_id, tags, self.spaces.write)
        self.queue_adds(s.connection(), ids)
        return ids

    def _delete_document(self, s: Session, doc_id: str) -> int | None:
        """Delete one document (cascading to chunks, tags, vectors) and queue its chunk ids."""
        self.lock_index(s.connection())
        ids = list(s.scalars(sa.select(Chunk.id).where(Chunk.doc_id == doc_id)))
        self.queue_deletes(s.connection(), ids)
        result = s.execute(sa.delete(Document).where(Document.doc_id == doc_id))
        if result.rowcount == 0:  # type: ignore[attr-defined]
            return None
        return len(ids)

    def counts(self) -> dict[str, int]:
        with self.read() as s:
            docs = sa.select(sa.func.count()).select_from(Document)
            chunks = sa.select(sa.func.count()).select_from(Chunk)
            return {
                "documents": int(s.scalar(docs.where(self.readable(Document.space))) or 0),
                "chunks": int(s.scalar(chunks.where(self.readable(Chunk.space))) or 0),
            }


def _checked_vectors(chunks: Sequence[NewChunk], vectors: np.ndarray) -> np.ndarray:
    if len(chunks) != len(vectors):
        raise InvalidInputError(f"{len(chunks)} chunks but {len(vectors)} vectors")
    return np.ascontiguousarray(vectors, dtype=np.float32)


def _insert_document(
    s: Session,
    doc: DocumentInfo,
    chunks: Sequence[NewChunk],
    vectors: np.ndarray,
    model_id: str,
    tags: Sequence[str],
    space: str,
) -> list[int]:
    """Insert one document (into ``space``) with its chunks, tags and vectors; returns the
    new chunk ids (the caller queues them for the index)."""
    dim = int(vectors.shape[1]) if vectors.ndim == 2 else 0
    s.add(document_row(doc, space=space, n_chunks=len(chunks)))
    s.flush()
    rows = [
        {
            "doc_id": doc.doc_id,
            "space": space,
            "chunk_index": c.chunk_index,
            "content": c.content,
            "content_sha": content_sha(c.indexed_text),
            "index_text": c.index_text,
            "turns": turns_json(c.turns),
            "token_count": c.token_count,
            "knowledge_type": doc.knowledge_type,
            "importance": doc.importance,
            "access_count": 0,
            "created_at": doc.created_at,
            # A conversation's chunk dates from when it was said, not the whole session.
            "source_date": next(
                (t.said_at.date() for t in c.turns if t.said_at is not None), doc.source_date
            ),
        }
        for c in chunks
    ]
    ids: list[int] = []
    for batch in batched(rows):
        result = s.execute(
            sa.insert(Chunk).returning(Chunk.id, sort_by_parameter_order=True), list(batch)
        )
        ids.extend(int(i) for i in result.scalars())
    if tags:
        s.execute(sa.insert(ChunkTag), [{"chunk_id": i, "tag": t} for i in ids for t in tags])
    if ids:
        s.execute(
            sa.insert(Embedding),
            [
                {"chunk_id": i, "model_id": model_id, "dim": dim, "vector": v.tobytes()}
                for i, v in zip(ids, vectors, strict=True)
            ],
        )
    return ids


# By key only, the space checked on the rows found: given ``space IN (...)`` as well,
# SQLite (without statistics) walked the space's index through every document of the
# space once ten ids were asked for.
_LABELS_BY_DOC = sa.select(Document.doc_id, Document.title, Document.source, Document.space).where(
    Document.doc_id.in_(sa.bindparam("ids", expanding=True))
)


def _tagged(tag: str) -> sa.Select[Any]:
    return (
        sa.select(Chunk.doc_id)
        .join(ChunkTag, ChunkTag.chunk_id == Chunk.id)
        .where(ChunkTag.tag == tag)
    )


def _day(value: object) -> dt.date:
    """A SQL ``date()``: a date on PostgreSQL, ISO text on SQLite."""
    return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value))
