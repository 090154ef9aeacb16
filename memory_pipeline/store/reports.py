"""Read-only queries behind health, stats, the duplicate audit and evaluation.

A mixin of ``Store``: the report modules under ``memory/`` and ``evaluation/``
compute on what these return and never touch a table themselves.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from memory_pipeline.store.base import StoreBase
from memory_pipeline.store.rows import BATCH, turns_from
from memory_pipeline.store.schema import Chunk, ChunkTag, Document, Embedding, IndexChange


@dataclass(frozen=True)
class CountsReport:
    """The aggregates of ``system_stats``, read in one connection."""

    documents: int
    chunks: int
    importance_set: int
    tagged_chunks: int
    distinct_tags: int
    top_tags: list[tuple[str, int]]
    access_buckets: dict[str, int]
    total_accesses: int
    unindexed_chunks: int
    vectors_by_model: dict[str, int]
    documents_by_type: dict[str | None, int]
    chunks_by_type: dict[str | None, int]


@dataclass(frozen=True)
class DocumentRow:
    normalized_hash: str
    doc_id: str
    source: str
    title: str


class ReportQueries(StoreBase):
    """Aggregates and raw rows for the read-only reports."""

    def counts_report(
        self, access_buckets: Sequence[tuple[str, int, int | None]], top_tags: int
    ) -> CountsReport:
        """Counts, tag coverage, access buckets (label, low, high or None) and queue size."""
        count = sa.func.count
        in_chunks = self.readable(Chunk.space)
        in_docs = self.readable(Document.space)
        tagged = sa.select(ChunkTag).join(Chunk, Chunk.id == ChunkTag.chunk_id).where(in_chunks)
        tags = tagged.subquery()
        with self.conn() as c:

            def scalar(stmt: sa.Select[Any]) -> int:
                return int(c.execute(stmt).scalar_one() or 0)

            cases = []
            for label, low, high in access_buckets:
                cond = Chunk.access_count >= low
                if high is not None:
                    cond = sa.and_(cond, Chunk.access_count <= high)
                cases.append(sa.func.sum(sa.case((cond, 1), else_=0)).label(label))
            access = c.execute(
                sa.select(*cases, sa.func.sum(Chunk.access_count)).where(in_chunks)
            ).one()
            top = c.execute(
                sa.select(tags.c.tag, count().label("n"))
                .group_by(tags.c.tag)
                .order_by(sa.desc("n"), tags.c.tag)
                .limit(top_tags)
            ).all()
            unindexed = (
                sa.select(count(sa.distinct(IndexChange.chunk_id)))
                .join(Chunk, Chunk.id == IndexChange.chunk_id)
                .where(IndexChange.op == "add", in_chunks)
            )
            models = c.execute(
                sa.select(Embedding.model_id, count())
                .join(Chunk, Chunk.id == Embedding.chunk_id)
                .where(in_chunks)
                .group_by(Embedding.model_id)
            )
            doc_types = c.execute(
                sa.select(Document.knowledge_type, count())
                .where(in_docs)
                .group_by(Document.knowledge_type)
            )
            chunk_types = c.execute(
                sa.select(Chunk.knowledge_type, count())
                .where(in_chunks)
                .group_by(Chunk.knowledge_type)
            )
            return CountsReport(
                documents=scalar(sa.select(count()).select_from(Document).where(in_docs)),
                chunks=scalar(sa.select(count()).select_from(Chunk).where(in_chunks)),
                importance_set=scalar(
                    sa.select(count()).where(Chunk.importance.is_not(None), in_chunks)
                ),
                tagged_chunks=scalar(sa.select(count(sa.distinct(tags.c.chunk_id)))),
                distinct_tags=scalar(sa.select(count(sa.distinct(tags.c.tag)))),
                top_tags=[(str(t), int(n)) for t, n in top],
                access_buckets={
                    label: int(access[i] or 0) for i, (label, _lo, _hi) in enumerate(access_buckets)
                },
                total_accesses=int(access[-1] or 0),
                unindexed_chunks=scalar(unindexed),
                vectors_by_model={str(m): int(n) for m, n in models},
                documents_by_type={k: int(n) for k, n in doc_types},
                chunks_by_type={k: int(n) for k, n in chunk_types},
            )

    def chunks_without_vector(self, model_id: str) -> list[int]:
        """Live chunk ids that have no vector of ``model_id``, ascending."""
        has_vector = sa.exists().where(
            Embedding.chunk_id == Chunk.id, Embedding.model_id == model_id
        )
        with self.conn() as c:
            ids = c.execute(sa.select(Chunk.id).where(~has_vector).order_by(Chunk.id)).scalars()
            return [int(i) for i in ids]

    def vector_counts(self) -> dict[tuple[str, int], int]:
        """(model id, dimension) -> stored vectors; a second dimension of one model shows."""
        with self.conn() as c:
            rows = c.execute(
                sa.select(Embedding.model_id, Embedding.dim, sa.func.count()).group_by(
                    Embedding.model_id, Embedding.dim
                )
            ).all()
        return {(str(m), int(d)): int(n) for m, d, n in rows}

    def repeated_documents(self) -> list[DocumentRow]:
        """Documents sharing a normalised content hash, by hash, then oldest first."""
        in_docs = self.readable(Document.space)
        repeated = (
            sa.select(Document.normalized_hash)
            .where(in_docs)
            .group_by(Document.normalized_hash)
            .having(sa.func.count() > 1)
        )
        with self.conn() as c:
            rows = c.execute(
                sa.select(
                    Document.normalized_hash, Document.doc_id, Document.source, Document.title
                )
                .where(Document.normalized_hash.in_(repeated), in_docs)
                .order_by(Document.normalized_hash, Document.created_at, Document.doc_id)
            ).all()
        return [DocumentRow(str(h), str(d), str(s), str(t)) for h, d, s, t in rows]

    def chunk_doc_and_sha(self, ids: Sequence[int]) -> dict[int, tuple[str, str]]:
        """chunk id -> (doc_id, content sha) for the live ones among ``ids``."""
        out: dict[int, tuple[str, str]] = {}
        with self.conn() as c:
            for start in range(0, len(ids), BATCH):
                batch = list(ids[start : start + BATCH])
                for cid, doc_id, sha in c.execute(
                    sa.select(Chunk.id, Chunk.doc_id, Chunk.content_sha).where(
                        Chunk.id.in_(batch), self.readable(Chunk.space)
                    )
                ):
                    out[int(cid)] = (str(doc_id), str(sha))
        return out

    def chunk_positions(self) -> dict[int, tuple[str, int]]:
        """chunk id -> (doc_id, chunk_index) for every live chunk."""
        with self.conn() as c:
            rows = c.execute(
                sa.select(Chunk.id, Chunk.doc_id, Chunk.chunk_index).where(
                    self.readable(Chunk.space)
                )
            )
            return {int(i): (str(d), int(n)) for i, d, n in rows}

    def chunk_turn_ids(self) -> dict[int, tuple[str, ...]]:
        """chunk id -> the ids of the turns it holds, for every live chunk that holds any."""
        with self.conn() as c:
            rows = c.execute(
                sa.select(Chunk.id, Chunk.turns).where(
                    self.readable(Chunk.space), Chunk.turns.is_not(None)
                )
            )
            return {int(i): tuple(t.turn_id for t in turns_from(v)) for i, v in rows}

    def document_ids(self) -> set[str]:
        with self.conn() as c:
            stmt = sa.select(Document.doc_id).where(self.readable(Document.space))
            return {str(d) for d in c.execute(stmt).scalars()}

    def iter_content_vectors(self, model_id: str) -> Iterator[tuple[str, bytes]]:
        """(embedded text, vector blob) of every chunk with a vector of ``model_id``."""
        with self.conn() as c:
            rows = c.execute(
                sa.select(sa.func.coalesce(Chunk.index_text, Chunk.content), Embedding.vector)
                .join(Embedding, Embedding.chunk_id == Chunk.id)
                .where(Embedding.model_id == model_id)
            )
            for part in rows.partitions(5_000):
                for text, blob in part:
                    yield str(text), bytes(blob)
