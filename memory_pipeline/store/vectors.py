"""Vectors: stored per chunk and model id, never mixed across embedding spaces."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import sqlalchemy as sa

from memory_pipeline.errors import ModelMismatchError
from memory_pipeline.runtimes import mismatch_hint
from memory_pipeline.store.base import StoreBase
from memory_pipeline.store.changes import Reads
from memory_pipeline.store.rows import batched, stack_vectors
from memory_pipeline.store.schema import Chunk, Embedding


class VectorQueries(StoreBase):
    def vectors_for(self, ids: Sequence[int], model_id: str) -> tuple[np.ndarray, np.ndarray]:
        """(ids found, float32 matrix) for the given chunks under one model id."""
        with self.conn() as c:
            return Reads(c).vectors_for(ids, model_id)

    def iter_vectors(
        self, model_id: str, batch_size: int = 20_000
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Every stored vector of a model, by ascending chunk id, in batches."""
        for rows in self.iter_vector_rows(model_id, batch_size):
            yield (
                np.asarray([r[0] for r in rows], dtype=np.int64),
                stack_vectors([r[2] for r in rows]),
            )

    def iter_vector_rows(
        self, model_id: str, batch_size: int = 20_000, *, every_space: bool = False
    ) -> Iterator[list[tuple[int, int, bytes]]]:
        """Raw (chunk_id, dim, blob) rows of one model in keyset batches, of the chunks
        this store reads (``every_space``: of every chunk, for the index's health check,
        whose index serves every space).

        Not ``iter_vectors``: that reshapes a batch to one width and so fails (or
        silently misreads) exactly the malformed rows a health check must single out.
        """
        last = -1
        stmt = sa.select(Embedding.chunk_id, Embedding.dim, Embedding.vector).where(
            Embedding.model_id == model_id
        )
        if not every_space:
            stmt = stmt.join(Chunk, Chunk.id == Embedding.chunk_id).where(
                self.readable(Chunk.space)
            )
        while True:
            with self.conn() as c:
                rows = c.execute(
                    stmt.where(Embedding.chunk_id > last)
                    .order_by(Embedding.chunk_id)
                    .limit(batch_size)
                ).all()
            if not rows:
                return
            last = int(rows[-1][0])
            yield [(int(cid), int(dim), bytes(blob)) for cid, dim, blob in rows]

    def vectors_by_content(self, shas: Iterable[str], model_id: str) -> dict[str, np.ndarray]:
        """Vectors already computed for identical chunk text under this model."""
        wanted = list(set(shas))
        out: dict[str, np.ndarray] = {}
        with self.read() as s:
            for batch in batched(wanted):
                for sha, blob in s.execute(
                    sa.select(Chunk.content_sha, Embedding.vector)
                    .join(Embedding, Embedding.chunk_id == Chunk.id)
                    .where(Embedding.model_id == model_id, Chunk.content_sha.in_(batch))
                ):
                    out.setdefault(sha, np.frombuffer(blob, dtype=np.float32))
        return out

    def readable_contents(self, shas: Iterable[str], model_id: str) -> set[str]:
        """Which of these texts a chunk this store reads holds a vector for, under this model.

        ``vectors_by_content`` looks in every space (a vector is a function of the text);
        this tells which of those a caller may be told about.
        """
        wanted = list(set(shas))
        out: set[str] = set()
        with self.read() as s:
            for batch in batched(wanted):
                out.update(
                    s.execute(
                        sa.select(Chunk.content_sha)
                        .join(Embedding, Embedding.chunk_id == Chunk.id)
                        .where(
                            Embedding.model_id == model_id,
                            Chunk.content_sha.in_(batch),
                            self.readable(Chunk.space),
                        )
                        .distinct()
                    ).scalars()
                )
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

    def some_model_id(self) -> str | None:
        """The model id of one stored vector, or None for a memory without vectors. A store
        holds one embedding space (``check_model``), so this names it, in one row's read."""
        with self.read() as s:
            found = s.execute(sa.select(Embedding.model_id).limit(1)).scalar()
        return None if found is None else str(found)

    def check_model(self, model_id: str, dim: int) -> None:
        """Refuse to mix embedding spaces in one store (DESIGN §1)."""
        for other, (other_dim, n) in self.embedding_models().items():
            if other != model_id or other_dim != dim:
                raise ModelMismatchError(
                    f"this store holds {n} vectors of model {other!r} (dim {other_dim}); the embedder "
                    f"is {model_id!r} (dim {dim}). Use the same model, or re-embed into a new store."
                    + mismatch_hint(other, model_id)
                )
