"""The store: every write and read of the source of truth goes through here."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.orm import Session

from memory_pipeline.errors import InvalidInputError, ModelMismatchError, NotFoundError
from memory_pipeline.store.engine import create_engine, migrate, writer
from memory_pipeline.store.forgetting import ForgettingQueries
from memory_pipeline.store.reports import ReportQueries
from memory_pipeline.store.schema import (
    Chunk,
    ChunkTag,
    Document,
    Embedding,
    IndexChange,
    IndexVersion,
)
from memory_pipeline.types import ChunkRecord, DocumentInfo, NewChunk, SearchFilters

_UNSET: Any = object()
# SQLite caps bound parameters per statement; stay well below on every backend.
_BATCH = 900


def _batched(items: Sequence[Any], size: int = _BATCH) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def now_utc() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Store(ReportQueries, ForgettingQueries):
    """SQLAlchemy-backed store of documents, chunks, tags, vectors and index versions."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = create_engine(url)
        self._writer = writer(self.engine)
        migrate(self.engine)

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
        """One transaction: everything inside commits together or not at all."""
        with Session(self._writer) as session, session.begin():
            yield session

    # ---------------------------------------------------------------- documents
    def get_document(self, doc_id: str) -> DocumentInfo | None:
        with self.read() as s:
            row = s.get(Document, doc_id)
            return _doc_info(row) if row else None

    def document_labels(self, doc_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
        """doc_id -> (title, source) for the given documents (those that exist)."""
        wanted = list(dict.fromkeys(doc_ids))
        out: dict[str, tuple[str, str]] = {}
        with self.conn() as c:
            for batch in _batched(wanted):
                rows = c.execute(_LABELS_BY_DOC, {"ids": list(batch)})
                out.update((d, (t, src)) for d, t, src in rows)
        return out

    def documents_by_source(self, source: str) -> list[DocumentInfo]:
        with self.read() as s:
            rows = s.scalars(sa.select(Document).where(Document.source == source)).all()
            return [_doc_info(r) for r in rows]

    def documents_without_source_date(self) -> list[DocumentInfo]:
        with self.read() as s:
            rows = s.scalars(sa.select(Document).where(Document.source_date.is_(None))).all()
            return [_doc_info(r) for r in rows]

    def set_source_date(self, doc_id: str, day: dt.date, rule: str) -> int:
        """Set a document's date and its chunks' (where unset); returns chunks changed."""
        with self.write() as s:
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
                _delete_document(s, old)
            return _insert_document(s, doc, chunks, vectors, model_id, tags)

    def store_document(
        self,
        doc: DocumentInfo,
        chunks: Sequence[NewChunk],
        vectors: np.ndarray,
        model_id: str,
        tags: Sequence[str] = (),
    ) -> StoredDocument | None:
        """Store a document in place of every other version of its source, in one transaction.

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
                    .where(Document.source == doc.source)
                    .order_by(Document.created_at)
                )
            )
            for old in older:
                _delete_document(s, old)
            ids = _insert_document(s, doc, chunks, vectors, model_id, tags)
            return StoredDocument(ids=ids, replaced=older)

    def delete_document(self, doc_id: str) -> int:
        """Delete a document with its chunks, tags and vectors; returns chunks removed."""
        with self.write() as s:
            n = _delete_document(s, doc_id)
            if n is None:
                raise NotFoundError(
                    f"no document with doc_id {doc_id!r}; find ids with search or find_by_tag"
                )
            return n

    def counts(self) -> dict[str, int]:
        with self.read() as s:
            return {
                "documents": int(s.scalar(sa.select(sa.func.count()).select_from(Document)) or 0),
                "chunks": int(s.scalar(sa.select(sa.func.count()).select_from(Chunk)) or 0),
            }

    # ------------------------------------------------------------------- chunks
    def get_chunks(self, ids: Iterable[int]) -> dict[int, ChunkRecord]:
        id_list = list(dict.fromkeys(int(i) for i in ids))
        out: dict[int, ChunkRecord] = {}
        if not id_list:
            return out
        with self.conn() as c:
            tags = _tags_for(c, id_list)
            for batch in _batched(id_list):
                for row in c.execute(_CHUNKS_BY_ID, {"ids": list(batch)}):
                    out[row.id] = _chunk_record(row, tags.get(row.id, ()))
        return out

    def document_chunks(self, doc_id: str) -> list[ChunkRecord]:
        with self.read() as s:
            rows = s.scalars(
                sa.select(Chunk).where(Chunk.doc_id == doc_id).order_by(Chunk.chunk_index)
            ).all()
            tags = _tags_for(s, [r.id for r in rows])
            return [_chunk_record(r, tags.get(r.id, ())) for r in rows]

    def contents(self, ids: Sequence[int]) -> dict[int, str]:
        with self.conn() as c:
            return Reads(c).contents(ids)

    def live_ids(self, ids: Iterable[int]) -> set[int]:
        with self.conn() as c:
            return Reads(c).live_ids(ids)

    def all_ids(self) -> np.ndarray:
        with self.conn() as c:
            return Reads(c).all_ids()

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

    # ------------------------------------------------------------ index changes
    def pending_changes(self) -> PendingChanges:
        """The changes not yet taken in by the index."""
        with self.conn() as c:
            return Reads(c).pending_changes()

    def last_change(self) -> int:
        with self.conn() as c:
            return int(c.execute(sa.select(sa.func.max(IndexChange.seq))).scalar() or 0)

    def pending_adds(self) -> list[int]:
        """Live chunks that the published index may not hold yet."""
        with self.conn() as c:
            # A join, not IN (SELECT ...): the queue is usually tiny and must drive the plan.
            stmt = (
                sa.select(IndexChange.chunk_id)
                .join(Chunk, Chunk.id == IndexChange.chunk_id)
                .where(IndexChange.op == "add")
                .distinct()
            )
            return [int(i) for i in c.execute(stmt).scalars()]

    def clear_changes(self, seqs: Sequence[int] | np.ndarray) -> None:
        """Forget the queued changes the published index has taken in (idempotent).

        By their sequence numbers, not "everything up to the last one": on
        PostgreSQL a transaction that drew a lower number may commit after the
        index read the queue, and its change must stay queued.
        """
        if not len(seqs):
            return
        with self.write() as s:
            for batch in _batched([int(q) for q in seqs]):
                s.execute(sa.delete(IndexChange).where(IndexChange.seq.in_(batch)))

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

    def _ids(self, stmt: sa.Select[Any]) -> np.ndarray:
        with self.conn() as c:
            ids = c.execute(stmt.order_by(Chunk.id)).scalars().all()
        return np.asarray(ids, dtype=np.int64)

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
    ) -> ChunkRecord:
        """Change a chunk's memory fields; vectors and indices are untouched."""
        with self.write() as s:
            row = s.scalar(
                sa.select(Chunk).where(Chunk.doc_id == doc_id, Chunk.chunk_index == chunk_index)
            )
            if row is None:
                raise NotFoundError(
                    f"no chunk {chunk_index} in document {doc_id!r}; list them with get_document_chunks"
                )
            if importance is not _UNSET:
                row.importance = importance
            if knowledge_type is not _UNSET:
                row.knowledge_type = knowledge_type
            if tags is not None:
                s.execute(sa.delete(ChunkTag).where(ChunkTag.chunk_id == row.id))
                if tags:
                    s.execute(sa.insert(ChunkTag), [{"chunk_id": row.id, "tag": t} for t in tags])
            chunk_id = row.id
        return self.get_chunks([chunk_id])[chunk_id]

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

    # --------------------------------------------------------------- embeddings
    def vectors_for(self, ids: Sequence[int], model_id: str) -> tuple[np.ndarray, np.ndarray]:
        """(ids found, float32 matrix) for the given chunks under one model id."""
        with self.conn() as c:
            return Reads(c).vectors_for(ids, model_id)

    def iter_vectors(
        self, model_id: str, batch_size: int = 20_000
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Every stored vector of a model, by ascending chunk id, in batches."""
        last = -1
        while True:
            with self.read() as s:
                rows = s.execute(
                    sa.select(Embedding.chunk_id, Embedding.vector)
                    .where(Embedding.model_id == model_id, Embedding.chunk_id > last)
                    .order_by(Embedding.chunk_id)
                    .limit(batch_size)
                ).all()
            if not rows:
                return
            last = int(rows[-1][0])
            yield np.asarray([r[0] for r in rows], dtype=np.int64), _stack([r[1] for r in rows])

    def vectors_by_content(self, shas: Iterable[str], model_id: str) -> dict[str, np.ndarray]:
        """Vectors already computed for identical chunk text under this model."""
        wanted = list(set(shas))
        out: dict[str, np.ndarray] = {}
        with self.read() as s:
            for batch in _batched(wanted):
                for sha, blob in s.execute(
                    sa.select(Chunk.content_sha, Embedding.vector)
                    .join(Embedding, Embedding.chunk_id == Chunk.id)
                    .where(Embedding.model_id == model_id, Chunk.content_sha.in_(batch))
                ):
                    out.setdefault(sha, np.frombuffer(blob, dtype=np.float32))
        return out

    def embedding_models(self) -> dict[str, tuple[int, int]]:
        """model id -> (dimension, vector count) for every model with stored vectors."""
        with self.read() as s:
            rows = s.execute(
                sa.select(Embedding.model_id, Embedding.dim, sa.func.count()).group_by(
                    Embedding.model_id, Embedding.dim
                )
            ).all()
        return {str(m): (int(d), int(n)) for m, d, n in rows}

    def check_model(self, model_id: str, dim: int) -> None:
        """Refuse to mix embedding spaces in one store (DESIGN §1)."""
        for other, (other_dim, n) in self.embedding_models().items():
            if other != model_id or other_dim != dim:
                raise ModelMismatchError(
                    f"this store holds {n} vectors of model {other!r} (dim {other_dim}); the embedder "
                    f"is {model_id!r} (dim {dim}). Use the same model, or re-embed into a new store."
                )

    # ------------------------------------------------------------ index versions
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


@dataclass(frozen=True)
class StoredDocument:
    """What ``Store.store_document`` wrote: the new chunk ids and the versions it replaced."""

    ids: list[int]
    replaced: list[str]


@dataclass(frozen=True)
class PendingChanges:
    """Queued index changes: their sequence numbers and the chunk ids added and deleted."""

    seqs: np.ndarray
    adds: np.ndarray
    deletes: np.ndarray

    def __bool__(self) -> bool:
        return bool(len(self.seqs))


class Reads:
    """Reads over one connection; inside ``Store.snapshot`` they share one snapshot."""

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

    def live_ids(self, ids: Iterable[int]) -> set[int]:
        live: set[int] = set()
        for batch in _batched(list({int(i) for i in ids})):
            live.update(self.conn.execute(sa.select(Chunk.id).where(Chunk.id.in_(batch))).scalars())
        return live

    def all_ids(self) -> np.ndarray:
        ids = self.conn.execute(sa.select(Chunk.id).order_by(Chunk.id)).scalars().all()
        return np.asarray(ids, dtype=np.int64)

    def contents(self, ids: Sequence[int]) -> dict[int, str]:
        out: dict[int, str] = {}
        for batch in _batched(list(ids)):
            rows = self.conn.execute(sa.select(Chunk.id, Chunk.content).where(Chunk.id.in_(batch)))
            out.update((int(cid), text) for cid, text in rows)
        return out

    def vectors_for(self, ids: Sequence[int], model_id: str) -> tuple[np.ndarray, np.ndarray]:
        found: list[int] = []
        blobs: list[bytes] = []
        for batch in _batched(list(ids)):
            for cid, blob in self.conn.execute(
                sa.select(Embedding.chunk_id, Embedding.vector).where(
                    Embedding.model_id == model_id, Embedding.chunk_id.in_(batch)
                )
            ):
                found.append(int(cid))
                blobs.append(blob)
        return np.asarray(found, dtype=np.int64), _stack(blobs)


def content_sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _stack(blobs: Sequence[bytes]) -> np.ndarray:
    if not blobs:
        return np.zeros((0, 0), dtype=np.float32)
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1).copy()


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
) -> list[int]:
    """Insert one document with its chunks, tags, vectors and queued index adds."""
    dim = int(vectors.shape[1]) if vectors.ndim == 2 else 0
    s.add(
        Document(
            doc_id=doc.doc_id,
            source=doc.source,
            title=doc.title,
            fmt=doc.fmt,
            content_hash=doc.content_hash,
            normalized_hash=doc.normalized_hash,
            byte_size=doc.byte_size,
            knowledge_type=doc.knowledge_type,
            importance=doc.importance,
            source_date=doc.source_date,
            source_date_rule=doc.source_date_rule,
            created_at=doc.created_at,
            n_chunks=len(chunks),
        )
    )
    s.flush()
    rows = [
        {
            "doc_id": doc.doc_id,
            "chunk_index": c.chunk_index,
            "content": c.content,
            "content_sha": content_sha(c.content),
            "token_count": c.token_count,
            "knowledge_type": doc.knowledge_type,
            "importance": doc.importance,
            "access_count": 0,
            "created_at": doc.created_at,
            "source_date": doc.source_date,
        }
        for c in chunks
    ]
    ids: list[int] = []
    for batch in _batched(rows):
        result = s.execute(
            sa.insert(Chunk).returning(Chunk.id, sort_by_parameter_order=True), list(batch)
        )
        ids.extend(int(i) for i in result.scalars())
    if tags:
        s.execute(sa.insert(ChunkTag), [{"chunk_id": i, "tag": t} for i in ids for t in tags])
    if ids:
        s.execute(sa.insert(IndexChange), [{"chunk_id": i, "op": "add"} for i in ids])
        s.execute(
            sa.insert(Embedding),
            [
                {"chunk_id": i, "model_id": model_id, "dim": dim, "vector": v.tobytes()}
                for i, v in zip(ids, vectors, strict=True)
            ],
        )
    return ids


def _delete_document(s: Session, doc_id: str) -> int | None:
    """Delete one document (cascading to chunks, tags, vectors) and queue its chunk ids."""
    ids = list(s.scalars(sa.select(Chunk.id).where(Chunk.doc_id == doc_id)))
    result = s.execute(sa.delete(Document).where(Document.doc_id == doc_id))
    if result.rowcount == 0:  # type: ignore[attr-defined]
        return None
    if ids:
        s.execute(sa.insert(IndexChange), [{"chunk_id": i, "op": "del"} for i in ids])
    return len(ids)


# Expanding bind parameters: one cached statement however many ids (hot search path).
_CHUNKS_BY_ID = sa.select(Chunk.__table__).where(
    Chunk.__table__.c.id.in_(sa.bindparam("ids", expanding=True))
)
_LABELS_BY_DOC = sa.select(Document.doc_id, Document.title, Document.source).where(
    Document.doc_id.in_(sa.bindparam("ids", expanding=True))
)
_TAGS_BY_CHUNK = (
    sa.select(ChunkTag.chunk_id, ChunkTag.tag)
    .where(ChunkTag.chunk_id.in_(sa.bindparam("ids", expanding=True)))
    .order_by(ChunkTag.tag)
)


def _tags_for(s: Session | sa.Connection, ids: Sequence[int]) -> dict[int, tuple[str, ...]]:
    tags: dict[int, list[str]] = defaultdict(list)
    for batch in _batched(list(ids)):
        for cid, tag in s.execute(_TAGS_BY_CHUNK, {"ids": list(batch)}):
            tags[int(cid)].append(tag)
    return {k: tuple(v) for k, v in tags.items()}


def _chunk_record(row: Any, tags: tuple[str, ...]) -> ChunkRecord:
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
    )


def _doc_info(row: Document) -> DocumentInfo:
    return DocumentInfo(
        doc_id=row.doc_id,
        source=row.source,
        title=row.title,
        fmt=row.fmt,
        content_hash=row.content_hash,
        normalized_hash=row.normalized_hash,
        byte_size=row.byte_size,
        knowledge_type=row.knowledge_type,
        importance=row.importance,
        source_date=row.source_date,
        source_date_rule=row.source_date_rule,
        created_at=row.created_at,
        n_chunks=row.n_chunks,
    )
