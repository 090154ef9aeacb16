"""Hybrid retrieval: dense ∪ sparse → fusion → cross-encoder → MMR → top_k (DESIGN §2).

Correct without waiting for the pipeline: chunks the published index does not
hold yet (queued in the store's index changes) are scored here directly, and ids the index
returns that are no longer live in the store are dropped and counted.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from memory_pipeline.embedding.base import Embedder
from memory_pipeline.errors import InvalidInputError, ModelMismatchError
from memory_pipeline.index import bm25
from memory_pipeline.index.dense import scores_for_ids, search_segments
from memory_pipeline.index.reader import IndexReader, LoadedVersion
from memory_pipeline.index.tokenizer import tokenize
from memory_pipeline.memory.rerank import memory_rerank
from memory_pipeline.memory.scoring import MemoryFields, MemoryParams
from memory_pipeline.search.fusion import (
    DEFAULT_FUSION,
    FUSION_METHODS,
    Fusion,
    on_scale,
    parse_fusion,
)
from memory_pipeline.search.mmr import mmr_select
from memory_pipeline.search.rerank import Reranker
from memory_pipeline.store import Store
from memory_pipeline.types import ChunkRecord, SearchFilters, SearchHit, SearchResult, SearchStats

Ranked = list[tuple[int, float]]


@dataclass(frozen=True)
class SearchParams:
    top_k: int = 5
    top_n: int = 50
    fusion: str = DEFAULT_FUSION
    rrf_k: int = 60
    enable_mmr: bool = False
    mmr_lambda: float = 0.7
    use_reranker: bool = True
    rerank_depth: int = 30
    record_access: bool = True
    enable_memory_rerank: bool = False
    memory: MemoryParams = field(default_factory=MemoryParams)
    guaranteed_types: tuple[str, ...] = ("principle",)
    guaranteed_importance_threshold: float = 0.7
    guaranteed_candidates_limit: int = 50
    now: dt.datetime | None = None

    def validate(self) -> None:
        if not 1 <= self.top_k <= 1000:
            raise InvalidInputError(f"top_k must be between 1 and 1000, got {self.top_k}")
        if not 1 <= self.top_n <= 10_000:
            raise InvalidInputError(f"top_n must be between 1 and 10000, got {self.top_n}")
        parse_fusion(self.fusion)
        if not 0.0 <= self.mmr_lambda <= 1.0:
            raise InvalidInputError(f"mmr_lambda must be in [0, 1], got {self.mmr_lambda}")
        if not 0 <= self.guaranteed_candidates_limit <= 1000:
            raise InvalidInputError(
                f"guaranteed_candidates_limit must be in [0, 1000], got {self.guaranteed_candidates_limit}"
            )


class _Timer:
    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - start) * 1000


@dataclass
class _Run:
    """One search in flight: its inputs and what each stage has found so far."""

    query: str
    qvec: np.ndarray
    tokens: list[str]
    params: SearchParams
    allowed: np.ndarray | None
    version: LoadedVersion | None
    stats: SearchStats
    timer: _Timer
    dense: Ranked = field(default_factory=list)
    sparse: Ranked = field(default_factory=list)
    # Every candidate scored by both retrievers (convex fusion only); see _complete.
    dense_all: Ranked = field(default_factory=list)
    sparse_all: Ranked = field(default_factory=list)
    # Scores of every queued (not yet indexed) chunk, before the top-N cut.
    unindexed_dense: dict[int, float] = field(default_factory=dict)
    unindexed_sparse: dict[int, float] = field(default_factory=dict)
    fused: Ranked = field(default_factory=list)
    pool: list[ChunkRecord] = field(default_factory=list)
    relevance: dict[int, float] = field(default_factory=dict)
    final: dict[int, float] = field(default_factory=dict)
    extra: dict[int, dict[str, float | int | None]] = field(default_factory=dict)


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
        with timer.stage("load_index"):
            version = self.reader.current()
        if version is not None:
            self._check_space(version, qvec)
            stats.index_version = version.manifest.version
        with timer.stage("filters"):
            allowed = None if filters.is_empty() else self.store.filter_ids(filters)
        run = _Run(query, qvec, tokenize(query), params, allowed, version, stats, timer)

        self._retrieve(run)
        self._add_guaranteed(run, filters)
        self._cross_encode(run)
        self._memory_axis(run)
        self._diversify(run)
        with timer.stage("labels"):
            hits = self._hits(run)
        if params.record_access and hits:
            with timer.stage("record_access"):
                self.store.record_access([h.chunk_id for h in hits])
        stats.timings_ms = {k: round(v, 3) for k, v in timer.ms.items()}
        return SearchResult(query=query, hits=hits, stats=stats)

    # ------------------------------------------------------------------ stages
    def _retrieve(self, run: _Run) -> None:
        """Dense and sparse top-N (filters first), the unindexed delta, then fusion."""
        p, version = run.params, run.version
        if version is not None:
            with run.timer.stage("dense"):
                run.dense = search_segments(
                    version.segments,
                    run.qvec,
                    p.top_n,
                    deleted=version.deleted,
                    allowed=run.allowed,
                )
            with run.timer.stage("sparse"):
                run.sparse = version.sparse.search(
                    run.tokens, p.top_n, allowed_ids=_as_set(run.allowed)
                )
        with run.timer.stage("unindexed"):
            extra_dense, extra_sparse, n_extra = self._unindexed(
                version, run.qvec, run.tokens, run.allowed
            )
        run.stats.unindexed_searched = n_extra
        if n_extra:
            run.stats.notes.append(
                f"{n_extra} chunks are not in the published index yet and were scored directly; "
                "an index update (update-index / update_index) makes this cheap again"
            )
            run.dense = _merge(run.dense, extra_dense, p.top_n)
            run.sparse = _merge(run.sparse, extra_sparse, p.top_n)
            run.unindexed_dense = dict(extra_dense)
            run.unindexed_sparse = dict(extra_sparse)
        method = FUSION_METHODS[Fusion(p.fusion)]
        if method.complete:
            run.dense_all, run.sparse_all = self._complete(run)
        with run.timer.stage("fusion"):
            run.fused = method.fuse(
                run.dense_all or run.dense, run.sparse_all or run.sparse, p.rrf_k
            )
        run.stats.candidates = len(run.fused)
        # Later stages re-order the pool; without them only top_k (plus a margin for
        # collapsed duplicates and orphans) is ever shown.
        reorders = p.enable_mmr or p.enable_memory_rerank
        pool_size = max(
            p.top_k * 4 if reorders else p.top_k + 5,
            p.rerank_depth if self._rerank_on(p) else 0,
        )
        with run.timer.stage("hydrate"):
            records = self._hydrate(run.fused, pool_size, run.stats)
        run.pool = list(records.values())
        run.relevance = {cid: s for cid, s in run.fused}

    def _add_guaranteed(self, run: _Run, filters: SearchFilters) -> None:
        """Principles and important chunks matching the filters join the pool, by relevance.

        They are scored like everyone else and never forced to the top: with RRF, the
        score of a rank just past the dense top-N cut; with the convex combination,
        their dense score on the dense list's scale (below its worst, so below 0).
        """
        p, version = run.params, run.version
        if not p.enable_memory_rerank or p.guaranteed_candidates_limit == 0 or version is None:
            return
        with run.timer.stage("guaranteed"):
            ids = self.store.guaranteed_ids(
                p.guaranteed_types, p.guaranteed_importance_threshold, filters
            )
            if not len(ids):
                return
            best = search_segments(
                version.segments,
                run.qvec,
                p.guaranteed_candidates_limit,
                deleted=version.deleted,
                allowed=ids,
            )
            have = {r.id for r in run.pool}
            new = [(cid, rank, s) for rank, (cid, s) in enumerate(best, 1) if cid not in have]
            records = self.store.get_chunks([cid for cid, _, _ in new])
            place = FUSION_METHODS[Fusion(p.fusion)].place_guaranteed
            placed = on_scale([s for _, _, s in new], run.dense_all)
            for (cid, rank, _), dense_part in zip(new, placed, strict=True):
                if cid in records:
                    run.pool.append(records[cid])
                    run.relevance[cid] = place(rank, dense_part, p.rrf_k, p.top_n)
                    run.extra.setdefault(cid, {})["guaranteed"] = 1
            run.stats.guaranteed_added = sum(1 for cid, _, _ in new if cid in records)

    def _cross_encode(self, run: _Run) -> None:
        p = run.params
        run.final = {r.id: run.relevance[r.id] for r in run.pool}
        if not (self._rerank_on(p) and run.pool and self.reranker is not None):
            if p.use_reranker:
                run.stats.notes.append(f"cross-encoder skipped: {self.reranker_status}")
            return
        with run.timer.stage("rerank"):
            # Guaranteed candidates sit at the end of the pool; give them a seat too.
            head = run.pool[: p.rerank_depth] + [
                r for r in run.pool[p.rerank_depth :] if "guaranteed" in run.extra.get(r.id, {})
            ]
            ce = self.reranker.score(run.query, [r.content for r in head])
            for r, score in zip(head, ce, strict=True):
                run.final[r.id] = float(score)
                run.extra.setdefault(r.id, {})["cross_encoder"] = float(score)
            in_head = {r.id for r in head}
            rest = [r for r in run.pool if r.id not in in_head]
            run.pool = sorted(head, key=lambda r: -run.final[r.id]) + rest
            # Chunks the cross-encoder did not see rank below every chunk it did.
            floor = min(run.final[r.id] for r in head) if head else 0.0
            for r in rest:
                run.final[r.id] = min(run.final[r.id], floor) - 1e-9

    def _memory_axis(self, run: _Run) -> None:
        p = run.params
        if not p.enable_memory_rerank or not run.pool:
            return
        with run.timer.stage("memory"):
            kept, cut = memory_rerank(
                [run.final[r.id] for r in run.pool],
                [memory_fields(r) for r in run.pool],
                p.memory,
                p.now,
            )
            run.stats.importance_cut = len(cut)
            ordered = []
            for item in kept:
                rec = run.pool[item.position]
                m = item.memory
                run.final[rec.id] = float(m.score or 0.0)
                run.extra.setdefault(rec.id, {}).update(
                    relevance_norm=m.relevance,
                    decay=m.decay,
                    access_boost=m.boost,
                    age_days=round(m.age_days, 2),
                    memory=m.score,
                )
                ordered.append(rec)
            run.pool = ordered

    def _diversify(self, run: _Run) -> None:
        p = run.params
        if not p.enable_mmr or len(run.pool) <= 1:
            return
        with run.timer.stage("mmr"):
            ids, vecs = self.store.vectors_for([r.id for r in run.pool], self.embedder.model_id)
            by_id = {int(i): v for i, v in zip(ids, vecs, strict=True)}
            usable = [r for r in run.pool if r.id in by_id]
            chosen = mmr_select(
                [r.id for r in usable],
                [run.final[r.id] for r in usable],
                np.stack([by_id[r.id] for r in usable]),
                k=p.top_k,
                lambda_=p.mmr_lambda,
            )
            order = {cid: i for i, cid in enumerate(chosen)}
            for cid, i in order.items():
                run.extra.setdefault(cid, {})["mmr_rank"] = i + 1
            run.pool = sorted((r for r in usable if r.id in order), key=lambda r: order[r.id])

    def _hits(self, run: _Run) -> list[SearchHit]:
        dense_map = dict(run.dense_all or run.dense)
        sparse_map = dict(run.sparse_all or run.sparse)
        dense_rank = {cid: r for r, (cid, _) in enumerate(run.dense, 1)}
        sparse_rank = {cid: r for r, (cid, _) in enumerate(run.sparse, 1)}
        shown = run.pool[: run.params.top_k]
        labels = self.store.document_labels({r.doc_id for r in shown})
        return [
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
                score=float(run.final[r.id]),
                stage_scores={
                    "dense": dense_map.get(r.id),
                    "dense_rank": dense_rank.get(r.id),
                    "sparse": sparse_map.get(r.id),
                    "sparse_rank": sparse_rank.get(r.id),
                    "fused": run.relevance.get(r.id),
                    "cross_encoder": None,
                    **run.extra.get(r.id, {}),
                },
                title=labels[r.doc_id][0] if r.doc_id in labels else None,
                source=labels[r.doc_id][1] if r.doc_id in labels else None,
            )
            for r in shown
        ]

    # ----------------------------------------------------------------- helpers
    def _complete(self, run: _Run) -> tuple[Ranked, Ranked]:
        """Both retrievers' scores for every candidate either of them returned.

        A chunk in only one top-N list is scored by the other retriever too: its
        inner product with the query (from its stored vector) and its BM25 score
        (0 when it shares no term with the query). Normalising then compares real
        scores instead of treating "not in the other top-N" as that list's worst.
        """
        in_dense = {cid for cid, _ in run.dense}
        in_sparse = {cid for cid, _ in run.sparse}
        dense, sparse = list(run.dense), list(run.sparse)
        with run.timer.stage("complete_dense"):
            missing = np.asarray(sorted(in_sparse - in_dense), dtype=np.int64)
            if len(missing) and run.version is not None:
                # Exact inner products of just these ids from the published segments.
                found, missing = scores_for_ids(
                    run.version.segments, run.qvec, missing, deleted=run.version.deleted
                )
                dense += found
            queued = [cid for cid in missing.tolist() if cid in run.unindexed_dense]
            dense += [(cid, run.unindexed_dense[cid]) for cid in queued]  # scored already
            missing = np.setdiff1d(missing, queued)
            if len(missing):  # in an IVF segment: from the store
                ids, vecs = self.store.vectors_for(missing.tolist(), self.embedder.model_id)
                if len(ids):
                    dense += zip(ids.tolist(), (vecs @ run.qvec).tolist(), strict=True)
        with run.timer.stage("complete_sparse"):
            sparse += self._sparse_scores(run, sorted(in_dense - in_sparse))
        # Best first, so a list position is a rank (fusion breaks ties by best rank).
        dense.sort(key=lambda p: (-p[1], p[0]))
        sparse.sort(key=lambda p: (-p[1], p[0]))
        return dense, sparse

    def _sparse_scores(self, run: _Run, ids: list[int]) -> Ranked:
        """BM25 scores of the given chunks (0 for those sharing no term with the query)."""
        if not ids:
            return []
        scored: dict[int, float] = {}
        if run.version is not None:
            scored = dict(run.version.sparse.scores_for(run.tokens, ids))
        return [(cid, scored.get(cid, run.unindexed_sparse.get(cid, 0.0))) for cid in ids]

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
            sparse = bm25.score_documents(list(dict.fromkeys(tokens)), docs)
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


def memory_fields(record: ChunkRecord) -> MemoryFields:
    return MemoryFields(
        knowledge_type=record.knowledge_type,
        importance=record.importance,
        access_count=record.access_count,
        created_at=record.created_at,
        source_date=record.source_date,
    )


def _as_set(allowed: np.ndarray | None) -> set[int] | None:
    return None if allowed is None else set(allowed.tolist())


def _merge(a: Ranked, b: Ranked, top_n: int) -> Ranked:
    merged = {**dict(a), **dict(b)}
    return sorted(merged.items(), key=lambda p: (-p[1], p[0]))[:top_n]
