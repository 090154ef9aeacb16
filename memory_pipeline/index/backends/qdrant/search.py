"""The Qdrant backend's reads: dense and BM25 (sparse vectors), and the view a search holds."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

import numpy as np

from memory_pipeline.errors import IndexUnavailableError
from memory_pipeline.index import bm25
from memory_pipeline.index.backends.qdrant.engine import Engine, Ranked, Where
from memory_pipeline.index.versions import Manifest

Totals = dict[str, list[int]]  # space -> [documents, tokens]


def term_index(token: str) -> int:
    return int.from_bytes(hashlib.blake2b(token.encode(), digest_size=4).digest(), "little")


def _query_vector(terms: Sequence[str]) -> tuple[list[int], list[float]]:
    weights: Counter[int] = Counter(term_index(t) for t in terms)
    return list(weights), [float(v) for v in weights.values()]


def doc_vector(tokens: Sequence[str], avgdl: float) -> tuple[list[int], list[float]]:
    """The BM25 document weights of ``tokens`` (hashed term -> weight)."""
    norm = bm25.K1 * (1.0 - bm25.B + bm25.B * bm25.quantize_length(len(tokens)) / avgdl)
    weights: dict[int, float] = {}
    for term, tf in Counter(tokens).items():
        index = term_index(term)
        weights[index] = weights.get(index, 0.0) + (1.0 + bm25.K1) * tf / (tf + norm)
    return list(weights), list(weights.values())


@dataclass(frozen=True)
class QdrantDense:
    engine: Engine
    collection: str

    def search(self, query: np.ndarray, top_n: int, *, allowed: np.ndarray | None = None) -> Ranked:
        if top_n <= 0 or (allowed is not None and not len(allowed)):
            return []
        where = None if allowed is None else Where(ids=allowed.tolist())
        exact = where is not None and self.engine.indexed
        return self.engine.search_dense(self.collection, query, top_n, where, exact=exact)

    def scores_for(self, query: np.ndarray, ids: np.ndarray) -> tuple[Ranked, np.ndarray]:
        if not len(ids):
            return [], np.zeros(0, dtype=np.int64)
        points = self.engine.retrieve(self.collection, ids.tolist(), payload=(), dense=True)
        if not points:
            return [], np.asarray(ids, dtype=np.int64)
        held = np.asarray([p.id for p in points], dtype=np.int64)
        vecs = np.asarray([_dense_of(p.id, p.dense) for p in points], dtype=np.float32)
        scores = vecs @ query.astype(np.float32)
        found = [(int(i), float(s)) for i, s in zip(held, scores, strict=True)]
        return found, np.setdiff1d(np.asarray(ids, dtype=np.int64), held)

    def member_ids(self) -> np.ndarray:
        return self.engine.scroll_ids(self.collection)


@dataclass(frozen=True)
class QdrantSparse:
    engine: Engine
    collection: str
    totals: Totals  # of the spaces it reads
    spaces: frozenset[str] | None  # None: every space

    @property
    def num_docs(self) -> int:
        return sum(n for n, _ in self.totals.values())

    def ids(self) -> np.ndarray:
        return self.engine.scroll_ids(self.collection, Where(spaces=self.spaces, has_sparse=True))

    def search(
        self, query_tokens: Sequence[str], top_n: int, *, allowed_ids: Collection[int] | None = None
    ) -> Ranked:
        terms = bm25.distinct_terms(query_tokens)
        if not terms or top_n <= 0 or (allowed_ids is not None and not allowed_ids):
            return []
        return self._search(terms, top_n, allowed_ids)

    def scores_for(self, query_tokens: Sequence[str], ids: Sequence[int]) -> Ranked:
        terms = bm25.distinct_terms(query_tokens)
        if not terms or not len(ids):
            return []
        return self._search(terms, len(ids), [int(i) for i in ids])

    def _search(self, terms: list[str], top_n: int, ids: Collection[int] | None) -> Ranked:
        where = None
        if self.spaces is not None or ids is not None:
            where = Where(spaces=self.spaces, ids=ids)
        indices, values = _query_vector(terms)
        found = self.engine.search_sparse(
            self.collection, indices, values, top_n, where, self._idf_scope()
        )
        return [(i, s) for i, s in found if s > 0.0]

    def _idf_scope(self) -> Collection[str] | None:
        # Local mode's collection-wide idf is over live points already; an indexed
        # engine's counts deleted points until they are optimised away, so it gets the
        # corpus spelled out.
        if self.spaces is None and not self.engine.indexed:
            return None
        return self.spaces or set(self.totals)

    def score_external(
        self, query_tokens: Sequence[str], docs: Sequence[tuple[int, Sequence[str]]]
    ) -> Ranked:
        return bm25.score_external(query_tokens, docs, self._index_stats)

    def _index_stats(self, terms: list[str]) -> bm25.IndexStats:
        df = {
            t: self.engine.count(self.collection, Where(spaces=self.spaces, term=t)) for t in terms
        }
        return bm25.IndexStats(
            self.num_docs,
            float(sum(t for _, t in self.totals.values())),
            lambda t: df.get(t, 0),
        )


def _dense_of(point_id: int, vector: list[float] | None) -> list[float]:
    if vector is None:
        raise IndexUnavailableError(
            f"Qdrant point {point_id} has no named vector 'dense'; run rebuild-index"
        )
    return vector


@dataclass
class QdrantView:
    """The collection as one search sees it."""

    manifest: Manifest
    engine: Engine
    collection: str
    totals: Totals
    spaces: frozenset[str] | None = None

    @property
    def dense(self) -> QdrantDense:
        return QdrantDense(self.engine, self.collection)

    @property
    def sparse(self) -> QdrantSparse:
        totals = {s: t for s, t in self.totals.items() if self.spaces is None or s in self.spaces}
        return QdrantSparse(self.engine, self.collection, totals, self.spaces)

    def for_spaces(self, read: Collection[str] | None) -> QdrantView:
        if read is None or set(self.totals) <= set(read):
            return replace(self, spaces=None)
        return replace(self, spaces=frozenset(read))

    def member_ids(self) -> np.ndarray:
        return self.dense.member_ids()

    def stored_sparse_ids(self) -> np.ndarray:
        return replace(self, spaces=None).sparse.ids()

    def size_bytes(self) -> int:
        found = self.engine.size_bytes()
        if found is not None:
            return found
        # A server does not report bytes per collection: vectors and weights, estimated.
        return self.manifest.n_dense * (4 * self.manifest.dim + 512)
