"""Hybrid retrieval: dense ∪ sparse → RRF → cross-encoder → MMR → top_k (DESIGN §2).

Correct without waiting for the pipeline: chunks the published index does not
hold yet (queued in the store's index changes) are scored here directly, and ids the index
returns that are no longer live in the store are dropped and counted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from memory_pipeline.embedding.base import Embedder
from memory_pipeline.errors import InvalidInputError, ModelMismatchError
from memory_pipeline.index.dense import search_segments
from memory_pipeline.index.reader import IndexReader, LoadedVersion
from memory_pipeline.index.tokenizer import tokenize
from memory_pipeline.search.fusion import reciprocal_rank_fusion
from memory_pipeline.search.mmr import mmr_select
from memory_pipeline.search.rerank import Reranker
from memory_pipeline.store import Store
from memory_pipeline.types import ChunkRecord, SearchFilters, SearchHit, SearchResult, SearchStats

Ranked = list[tuple[int, float]]


@dataclass(frozen=True)
class SearchParams:
    top_k: int = 5
    top_n: int = 50
    rrf_k: int = 60
    enable_mmr: bool = False
    mmr_lambda: float = 0.7
    use_reranker: bool = True
    rerank_depth: int = 30
    record_access: bool = True

    def validate(self) -> None:
        if not 1 <= self.top_k <= 1000:
            raise InvalidInputError(f"top_k must be between 1 and 1000, got {self.top_k}")
        if not 1 <= self.top_n <= 10_000:
            raise InvalidInputError(f"top_n must be between 1 and 10000, got {self.top_n}")
        if not 0.0 <= self.mmr_lambda <= 1.0:
            raise InvalidInputError(f"mmr_lambda must be in [0, 1], got {self.mmr_lambda}")


class _Timer:
    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - start) * 1000


class HybridSearcher:
    def __init__(
        self,
        store: Store,
        reader: IndexReader,
        embedder: Embedder,
        reranker: Reranker | None,
        reranker_status: str,
    ) -> None:
        self.store = store
        self.reader = reader
        self.embedder = embedder
        self.reranker = reranker
        self.reranker_status = reranker_status

    def search(
        self,
        query: str,
        filters: SearchFilters | None = None,
        params: SearchParams | None = None,
        *,
        query_vector: np.ndarray | None = None,
    ) -> SearchResult:
        params = params or SearchParams()
        params.validate()
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("query must be a non-empty string")
        filters = filters or SearchFilters()
        timer = _Timer()
        stats = SearchStats(reranker=self.reranker.name if self.reranker else "none")

        with timer.stage("embed_query"):
            qvec = query_vector if query_vector is not None else self.embedder.embed_query(query)
        tokens = tokenize(query)
        with timer.stage("load_index"):
            version = self.reader.current()
        if version is not None:
            self._check_space(version, qvec)
            stats.index_version = version.manifest.version
        with timer.stage("filters"):
            allowed = None if filters.is_empty() else self.store.filter_ids(filters)

        dense: Ranked = []
        sparse: Ranked = []
        if version is not None:
            with timer.stage("dense"):
                dense = search_segments(
                    version.segments, qvec, params.top_n, deleted=version.deleted, allowed=allowed
                )
            with timer.stage("sparse"):
                sparse = version.sparse.search(tokens, params.top_n, allowed_ids=_as_set(allowed))
        with timer.stage("unindexed"):
            extra_dense, extra_sparse, n_extra = self._unindexed(version, qvec, tokens, allowed)
        stats.unindexed_searched = n_extra
        if n_extra:
            dense = _merge(dense, extra_dense, params.top_n)
            sparse = _merge(sparse, extra_sparse, params.top_n)

        with timer.stage("fusion"):
            fused = reciprocal_rank_fusion(
                [[i for i, _ in dense], [i for i, _ in sparse]], k=params.rrf_k
            )
        stats.candidates = len(fused)
        pool_size = max(params.top_k * 4, params.rerank_depth if self._rerank_on(params) else 0, 20)
        with timer.stage("hydrate"):
            records = self._hydrate(fused, pool_size, stats)
        pool = list(records.values())
        scores = {cid: s for cid, s in fused}
        dense_map, sparse_map = dict(dense), dict(sparse)
        dense_rank = {cid: r for r, (cid, _) in enumerate(dense, 1)}
        sparse_rank = {cid: r for r, (cid, _) in enumerate(sparse, 1)}
        final = {r.id: scores[r.id] for r in pool}
        ce_scores: dict[int, float] = {}

        if self._rerank_on(params) and pool and self.reranker is not None:
            with timer.stage("rerank"):
                head = pool[: params.rerank_depth]
                ce = self.reranker.score(query, [r.content for r in head])
                ce_scores = {r.id: float(s) for r, s in zip(head, ce, strict=True)}
                pool = sorted(head, key=lambda r: -ce_scores[r.id]) + pool[params.rerank_depth :]
                final.update(ce_scores)
        elif params.use_reranker:
            stats.notes.append(f"cross-encoder skipped: {self.reranker_status}")

        if params.enable_mmr and len(pool) > 1:
            with timer.stage("mmr"):
                ids, vecs = self.store.vectors_for([r.id for r in pool], self.embedder.model_id)
                by_id = {int(i): v for i, v in zip(ids, vecs, strict=True)}
                usable = [r for r in pool if r.id in by_id]
                chosen = mmr_select(
                    [r.id for r in usable],
                    [final[r.id] for r in usable],
                    np.stack([by_id[r.id] for r in usable]),
                    k=params.top_k,
                    lambda_=params.mmr_lambda,
                )
                order = {cid: i for i, cid in enumerate(chosen)}
                pool = sorted((r for r in usable if r.id in order), key=lambda r: order[r.id])

        top = pool[: params.top_k]
        hits = [
            SearchHit(
                chunk_id=r.id,
                doc_id=r.doc_id,
                chunk_index=r.chunk_index,
                content=r.content,
                knowledge_type=r.knowledge_type,
                importance=r.importance,
                tags=list(r.tags),
                access_count=r.access_count,
                created_at=r.created_at,
                source_date=r.source_date,
                score=float(final[r.id]),
                stage_scores={
                    "dense": dense_map.get(r.id),
                    "dense_rank": dense_rank.get(r.id),
                    "sparse": sparse_map.get(r.id),
                    "sparse_rank": sparse_rank.get(r.id),
                    "rrf": scores[r.id],
                    "cross_encoder": ce_scores.get(r.id),
                },
            )
            for r in top
        ]
        if params.record_access and hits:
            with timer.stage("record_access"):
                self.store.record_access([h.chunk_id for h in hits])
        stats.timings_ms = {k: round(v, 3) for k, v in timer.ms.items()}
        return SearchResult(query=query, hits=hits, stats=stats)

    # ----------------------------------------------------------------- helpers
    def _rerank_on(self, params: SearchParams) -> bool:
        return params.use_reranker and self.reranker is not None

    def _check_space(self, version: LoadedVersion, qvec: np.ndarray) -> None:
        m = version.manifest
        if m.model_id != self.embedder.model_id or (m.dim and m.dim != qvec.shape[-1]):
            raise ModelMismatchError(
                f"published index is in the space of {m.model_id!r} (dim {m.dim}), the query "
                f"embedder is {self.embedder.model_id!r} (dim {qvec.shape[-1]}); configure the same "
                "model or rebuild the index with this one"
            )

    def _unindexed(
        self,
        version: LoadedVersion | None,
        qvec: np.ndarray,
        tokens: list[str],
        allowed: np.ndarray | None,
    ) -> tuple[Ranked, Ranked, int]:
        """Score live chunks the published version may lack, so ingest is searchable at once."""
        ids = self.store.pending_adds()
        if allowed is not None and ids:
            ids = np.intersect1d(np.asarray(ids, dtype=np.int64), allowed).tolist()
        if not ids:
            return [], [], 0
        found, vecs = self.store.vectors_for(ids, self.embedder.model_id)
        dense = (
            [(int(i), float(s)) for i, s in zip(found, vecs @ qvec, strict=True)]
            if len(found)
            else []
        )
        dense.sort(key=lambda p: (-p[1], p[0]))
        contents = self.store.contents(ids)
        docs = [(cid, tokenize(text)) for cid, text in contents.items()]
        if version is not None:
            sparse = version.sparse.score_external(tokens, docs)
        else:
            sparse = _standalone_bm25(tokens, docs)
        return dense, sparse, len(ids)

    def _hydrate(self, fused: Ranked, pool_size: int, stats: SearchStats) -> dict[int, ChunkRecord]:
        """Chunk records for the best fused ids: not-live ids dropped, identical text collapsed."""
        out: dict[int, ChunkRecord] = {}
        seen_text: set[str] = set()
        start = 0
        while len(out) < pool_size and start < len(fused):
            batch = [cid for cid, _ in fused[start : start + pool_size]]
            start += pool_size
            records = self.store.get_chunks(batch)
            for cid in batch:
                rec = records.get(cid)
                if rec is None:
                    stats.orphan_index_entries += 1
                    continue
                key = " ".join(rec.content.split())
                if key in seen_text:
                    stats.duplicate_contents += 1
                    continue
                seen_text.add(key)
                out[cid] = rec
        return out


def _as_set(allowed: np.ndarray | None) -> set[int] | None:
    return None if allowed is None else set(allowed.tolist())


def _merge(a: Ranked, b: Ranked, top_n: int) -> Ranked:
    merged = {**dict(a), **dict(b)}
    return sorted(merged.items(), key=lambda p: (-p[1], p[0]))[:top_n]


def _standalone_bm25(tokens: Sequence[str], docs: Sequence[tuple[int, Sequence[str]]]) -> Ranked:
    """BM25 over the given documents alone (only when nothing is published yet)."""
    from math import log

    if not docs or not tokens:
        return []
    n = len(docs)
    avgdl = sum(len(d) for _, d in docs) / n or 1.0
    df: dict[str, int] = {}
    for _, d in docs:
        for t in set(d):
            df[t] = df.get(t, 0) + 1
    out: Ranked = []
    for cid, d in docs:
        tf: dict[str, int] = {}
        for t in d:
            tf[t] = tf.get(t, 0) + 1
        score = 0.0
        for t in set(tokens):
            if t in tf:
                idf = log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                score += idf * tf[t] * 2.2 / (tf[t] + 1.2 * (0.25 + 0.75 * len(d) / avgdl))
        if score > 0:
            out.append((cid, score))
    out.sort(key=lambda p: (-p[1], p[0]))
    return out
