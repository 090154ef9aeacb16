"""The Qdrant backend's reads: dense and BM25 (sparse vectors), and the view a search holds."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from qdrant_client import QdrantClient, models

from memory_pipeline.errors import IndexUnavailableError
from memory_pipeline.index import bm25
from memory_pipeline.index.versions import Manifest, dir_size

Ranked = list[tuple[int, float]]
Totals = dict[str, list[int]]  # space -> [documents, tokens]
DENSE, SPARSE = "dense", "bm25"
PAGE = 1_000


def term_index(token: str) -> int:
    return int.from_bytes(hashlib.blake2b(token.encode(), digest_size=4).digest(), "little")


def _query_vector(terms: Sequence[str]) -> models.SparseVector:
    weights: Counter[int] = Counter(term_index(t) for t in terms)
    return models.SparseVector(indices=list(weights), values=[float(v) for v in weights.values()])


def doc_vector(tokens: Sequence[str], avgdl: float) -> models.SparseVector:
    norm = bm25.K1 * (1.0 - bm25.B + bm25.B * bm25.quantize_length(len(tokens)) / avgdl)
    weights: dict[int, float] = {}
    for term, tf in Counter(tokens).items():
        index = term_index(term)
        weights[index] = weights.get(index, 0.0) + (1.0 + bm25.K1) * tf / (tf + norm)
    return models.SparseVector(indices=list(weights), values=list(weights.values()))


def _in_spaces(spaces: Collection[str]) -> models.FieldCondition:
    return models.FieldCondition(key="space", match=models.MatchAny(any=sorted(spaces)))


def _ranked(points: Iterable[models.ScoredPoint]) -> Ranked:
    out = [(int(p.id), float(p.score)) for p in points if p.score > 0.0]
    out.sort(key=lambda p: (-p[1], p[0]))
    return out


@dataclass(frozen=True)
class QdrantDense:
    client: QdrantClient
    collection: str
    remote: bool

    def search(self, query: np.ndarray, top_n: int, *, allowed: np.ndarray | None = None) -> Ranked:
        if top_n <= 0 or (allowed is not None and not len(allowed)):
            return []
        where = None
        if allowed is not None:
            where = models.Filter(must=[models.HasIdCondition(has_id=allowed.tolist())])
        found = self.client.query_points(
            self.collection,
            query=query.astype(np.float32).tolist(),
            using=DENSE,
            limit=top_n,
            query_filter=where,
            search_params=models.SearchParams(exact=True) if where and self.remote else None,
        ).points
        out = [(int(p.id), float(p.score)) for p in found]
        out.sort(key=lambda p: (-p[1], p[0]))
        return out

    def scores_for(self, query: np.ndarray, ids: np.ndarray) -> tuple[Ranked, np.ndarray]:
        if not len(ids):
            return [], np.zeros(0, dtype=np.int64)
        points = self.client.retrieve(self.collection, ids.tolist(), with_vectors=[DENSE])
        if not points:
            return [], np.asarray(ids, dtype=np.int64)
        held = np.asarray([int(p.id) for p in points], dtype=np.int64)
        vecs = np.asarray([_dense_of(p) for p in points], dtype=np.float32)
        scores = vecs @ query.astype(np.float32)
        found = [(int(i), float(s)) for i, s in zip(held, scores, strict=True)]
        return found, np.setdiff1d(np.asarray(ids, dtype=np.int64), held)

    def member_ids(self) -> np.ndarray:
        return _scroll_ids(self.client, self.collection, None)


@dataclass(frozen=True)
class QdrantSparse:
    client: QdrantClient
    collection: str
    remote: bool
    totals: Totals  # of the spaces it reads
    spaces: frozenset[str] | None  # None: every space

    @property
    def num_docs(self) -> int:
        return sum(n for n, _ in self.totals.values())

    def ids(self) -> np.ndarray:
        where: list[Any] = [models.HasVectorCondition(has_vector=SPARSE)]
        if self.spaces is not None:
            where.append(_in_spaces(self.spaces))
        return _scroll_ids(self.client, self.collection, models.Filter(must=where))

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
        must: list[Any] = []
        if self.spaces is not None:
            must.append(_in_spaces(self.spaces))
        if ids is not None:
            must.append(models.HasIdCondition(has_id=sorted(int(i) for i in ids)))
        found = self.client.query_points(
            self.collection,
            query=_query_vector(terms),
            using=SPARSE,
            limit=top_n,
            query_filter=models.Filter(must=must) if must else None,
            search_params=self._idf_scope(),
        ).points
        return _ranked(found)

    def _idf_scope(self) -> models.SearchParams | None:
        # Local mode's collection-wide idf is over live points already; a server's counts
        # deleted points until they are optimised away, so it gets the corpus spelled out.
        if self.spaces is None and not self.remote:
            return None
        corpus = models.Filter(must=[_in_spaces(self.spaces or self.totals)])
        return models.SearchParams(idf=models.IdfCorpusParams(corpus=corpus))

    def score_external(
        self, query_tokens: Sequence[str], docs: Sequence[tuple[int, Sequence[str]]]
    ) -> Ranked:
        return bm25.score_external(query_tokens, docs, self._index_stats)

    def _index_stats(self, terms: list[str]) -> bm25.IndexStats:
        space = [_in_spaces(self.spaces)] if self.spaces is not None else []
        df = {
            t: self.client.count(
                self.collection,
                count_filter=models.Filter(
                    must=[
                        *space,
                        models.FieldCondition(key="terms", match=models.MatchValue(value=t)),
                    ]
                ),
                exact=True,
            ).count
            for t in terms
        }
        return bm25.IndexStats(
            self.num_docs,
            float(sum(t for _, t in self.totals.values())),
            lambda t: df.get(t, 0),
        )


def _dense_of(point: models.Record) -> list[float]:
    vectors = point.vector
    if not isinstance(vectors, dict):
        raise IndexUnavailableError(
            f"Qdrant point {point.id} has no named vector {DENSE!r}; run rebuild-index"
        )
    return vectors[DENSE]  # type: ignore[return-value]


def _scroll_ids(client: QdrantClient, collection: str, where: models.Filter | None) -> np.ndarray:
    ids: list[int] = []
    offset: Any = None
    while True:
        points, offset = client.scroll(
            collection, scroll_filter=where, limit=PAGE, offset=offset, with_payload=False
        )
        ids.extend(int(p.id) for p in points)
        if offset is None:
            break
    return np.asarray(sorted(ids), dtype=np.int64)


@dataclass
class QdrantView:
    """The collection as one search sees it."""

    manifest: Manifest
    client: QdrantClient
    collection: str
    remote: bool
    totals: Totals
    folder: Path | None  # local mode's folder
    spaces: frozenset[str] | None = None

    @property
    def dense(self) -> QdrantDense:
        return QdrantDense(self.client, self.collection, self.remote)

    @property
    def sparse(self) -> QdrantSparse:
        totals = {s: t for s, t in self.totals.items() if self.spaces is None or s in self.spaces}
        return QdrantSparse(self.client, self.collection, self.remote, totals, self.spaces)

    def for_spaces(self, read: Collection[str] | None) -> QdrantView:
        if read is None or set(self.totals) <= set(read):
            return replace(self, spaces=None)
        return replace(self, spaces=frozenset(read))

    def member_ids(self) -> np.ndarray:
        return self.dense.member_ids()

    def stored_sparse_ids(self) -> np.ndarray:
        return replace(self, spaces=None).sparse.ids()

    def size_bytes(self) -> int:
        if self.folder is not None:
            return dir_size(self.folder)
        # A server does not report bytes per collection: vectors and weights, estimated.
        return self.manifest.n_dense * (4 * self.manifest.dim + 512)
