"""Hybrid retrieval: dense ∪ sparse → fusion → cross-encoder → MMR → top_k (DESIGN §2).

The stages after candidate generation (``retrieval``): guaranteed candidates,
the cross-encoder, a time the query names (``memory/when.py``), the memory axis, MMR,
and the hits as returned.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from memory_pipeline.embedding.base import Embedder
from memory_pipeline.errors import (
    IndexUnavailableError,
    InvalidInputError,
    ModelMismatchError,
    StorageError,
)
from memory_pipeline.index.protocols import IndexSource, IndexView
from memory_pipeline.index.tokenizer import tokenize
from memory_pipeline.ingest.relative_dates import periods_named
from memory_pipeline.memory.axis import memory_rerank
from memory_pipeline.memory.scoring import MemoryFields, boosted
from memory_pipeline.memory.when import TIME_BOOST, chunk_day, time_closeness
from memory_pipeline.memory.who import said_by, speakers_named
from memory_pipeline.runtimes import mismatch_hint
from memory_pipeline.search.cross_encoder import Reranker
from memory_pipeline.search.fusion import (
    FUSION_METHODS,
    Fusion,
    fuse_phrasings,
    on_scale,
    phrasing_weights,
)
from memory_pipeline.search.mmr import mmr_select
from memory_pipeline.search.params import SearchRequest
from memory_pipeline.search.phrasings import embed_phrasings, phrasings
from memory_pipeline.search.retrieval import Retriever
from memory_pipeline.search.run import Run, Timer
from memory_pipeline.store import Store, now_utc
from memory_pipeline.types import ChunkRecord, SearchFilters, SearchHit, SearchResult, SearchStats

log = logging.getLogger(__name__)


class HybridSearcher:
    def __init__(
        self,
        store: Store,
        reader: IndexSource,
        embedder: Embedder,
        reranker: Reranker | None,
        reranker_status: str,
    ) -> None:
        self.store = store
        self.reader = reader
        self.embedder = embedder
        self.reranker = reranker
        self.reranker_status = reranker_status
        self.retriever = Retriever(store, embedder)
        self._access_warned = False

    def search(
        self,
        query: str,
        filters: SearchFilters | None = None,
        request: SearchRequest | None = None,
        *,
        query_vector: np.ndarray | None = None,
        rewrites: Sequence[str] = (),
    ) -> SearchResult:
        """Hybrid search for ``query``; ``rewrites`` are other phrasings of it.

        Each phrasing gets its own candidates (its own query vector, its own BM25
        terms), fused as a query alone is, and the phrasings' rankings are then fused
        into one (``fusion.fuse_phrasings``: a weighted sum in which the query weighs as
        much as all rewrites together). Filters and spaces restrict every phrasing;
        guaranteed candidates, the cross-encoder (scoring against the query), the
        memory axis and MMR run once, on the fused ranking. Without rewrites the
        search is exactly the query's. ``request`` says how (default: ``SearchRequest()``);
        a store opened read-only records no access, whatever it says.
        """
        params = request or SearchRequest()
        params.validate()
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("query must be a non-empty string")
        texts = phrasings(query, rewrites)
        filters = filters or SearchFilters()
        timer = Timer()
        stats = SearchStats(reranker=self.reranker.name if self.reranker else "none")
        stats.phrasings = len(texts)
        with timer.stage("embed_query"):
            given = [] if query_vector is None else [query_vector]
            qvec, *others = given + embed_phrasings(self.embedder, texts[len(given) :])
        with timer.stage("load_index"):
            queued, version = self._read_index()
        if version is not None:
            self._check_space(version, qvec)
            stats.index_version = version.manifest.version
        with timer.stage("filters"):
            # Filters first, and the store's spaces with them: when the memory holds
            # chunks this store does not read, every retriever is restricted before its cut.
            allowed: np.ndarray | None = (
                self.store.space_restriction()
                if filters.is_empty()
                else self.store.filter_ids(filters)  # within the store's spaces already
            )
        run = Run(query, qvec, tokenize(query), params, allowed, version, stats, timer, queued)
        run.periods = periods_named(query, (params.now or now_utc()).date())

        self._retrieve(run, list(zip(texts[1:], others, strict=True)))
        self._add_guaranteed(run, filters)
        self._cross_encode(run)
        self._speaker_named(run)
        self._time_named(run)
        self._memory_axis(run)
        self._diversify(run)
        with timer.stage("labels"):
            hits = self._hits(run)
        if params.record_access and hits and not self.store.read_only:
            with timer.stage("record_access"):
                self._record_access(hits, stats)
        stats.timings_ms = {k: round(v, 3) for k, v in timer.ms.items()}
        return SearchResult(query=query, hits=hits, stats=stats)

    def _record_access(self, hits: list[SearchHit], stats: SearchStats) -> None:
        """Count the hits as accessed; a store that cannot take the write (read-only, a
        full disk) costs the count, not the answer: a note, and one warning per searcher."""
        try:
            self.store.record_access([h.chunk_id for h in hits])
        except StorageError as exc:
            note = f"this search is not counted as an access: {exc}"
            stats.notes.append(note)
            if not self._access_warned:
                self._access_warned = True
                log.warning("%s", note)

    def _published(self) -> IndexView | None:
        """The published version; without one, an error if the memory holds chunks that
        the unindexed delta does not cover either (the index folder went missing, say),
        rather than an empty answer that looks like an empty memory."""
        version = self.reader.current()
        if version is not None:
            return version
        held, unseen = self.store.unqueued_chunks()
        if not unseen:
            return None
        version = self.reader.current()  # published since the first look?
        if version is not None:
            return version
        raise IndexUnavailableError(
            f"no published index, but {unseen} of the {held} chunks this memory holds are in "
            "no index and not queued for one, so no search can find them (was the index "
            "folder deleted?); nothing is lost: run rebuild-index (it rebuilds the index from "
            "the stored vectors, nothing is re-embedded)"
        )

    # ------------------------------------------------------------------ stages
    def _retrieve(self, run: Run, rewrites: list[tuple[str, np.ndarray]]) -> None:
        """Candidates from both retrievers, fused, then the records of the best of them."""
        p = run.params
        self.retriever.retrieve(run)
        if rewrites:
            self._fuse_rewrites(run, rewrites)
        # Later stages re-order the pool; without them only top_k (plus a margin for
        # collapsed duplicates and orphans) is ever shown.
        reorders = (
            p.enable_mmr or p.enable_memory_rerank or bool(run.periods) or p.speaker_boost > 0
        )
        pool_size = max(
            p.top_k * 4 if reorders else p.top_k + 5,
            p.rerank_depth if self._rerank_on(p) else 0,
        )
        with run.timer.stage("hydrate"):
            records = self.retriever.hydrate(run.fused, pool_size, run.stats)
        run.pool = list(records.values())
        run.relevance = {cid: s for cid, s in run.fused}

    def _fuse_rewrites(self, run: Run, rewrites: list[tuple[str, np.ndarray]]) -> None:
        """Each rewrite's own candidates and fusion, then all phrasings fused into ``run.fused``.

        The query's lists stay the run's (``dense``, ``sparse``: what a hit shows and
        where guaranteed candidates are placed); a rewrite's stats are its own, so the
        pending-chunks note and counters are not repeated per phrasing.
        """
        rankings = [run.fused]
        for text, qvec in rewrites:
            other = Run(
                text,
                qvec,
                tokenize(text),
                run.params,
                run.allowed,
                run.version,
                SearchStats(),
                run.timer,
                run.queued,
            )
            self.retriever.retrieve(other)
            rankings.append(other.fused)
        with run.timer.stage("fusion"):
            run.fused = fuse_phrasings(rankings)
        run.query_weight = phrasing_weights(len(rankings))[0]
        run.stats.candidates = len(run.fused)
        for ranking in rankings:
            for cid, _ in ranking:
                found = run.extra.setdefault(cid, {})
                found["phrasings"] = int(found.get("phrasings") or 0) + 1

    def _add_guaranteed(self, run: Run, filters: SearchFilters) -> None:
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
            best = version.dense.search(run.qvec, p.guaranteed_candidates_limit, allowed=ids)
            have = {r.id for r in run.pool}
            new = [(cid, rank, s) for rank, (cid, s) in enumerate(best, 1) if cid not in have]
            records = self.store.get_chunks([cid for cid, _, _ in new])
            place = FUSION_METHODS[Fusion(p.fusion)].place_guaranteed
            placed = on_scale([s for _, _, s in new], run.dense_all)
            for (cid, rank, _), dense_part in zip(new, placed, strict=True):
                if cid in records:
                    run.pool.append(records[cid])
                    run.relevance[cid] = run.query_weight * place(
                        rank, dense_part, p.rrf_k, p.top_n
                    )
                    run.extra.setdefault(cid, {})["guaranteed"] = 1
            run.stats.guaranteed_added = sum(1 for cid, _, _ in new if cid in records)

    def _cross_encode(self, run: Run) -> None:
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

    def _speaker_named(self, run: Run) -> None:
        """A speaker the query names prefers the turns that speaker said: a bounded boost
        on the relevance (``memory/who.py``), the pool re-ordered by it; never a filter."""
        weight = run.params.speaker_boost
        if weight <= 0 or not run.pool:
            return
        with run.timer.stage("speaker"):
            named = speakers_named(run.tokens, {t.speaker for r in run.pool for t in r.turns})
            if not named:
                return
            said = [said_by(r.turns, named) for r in run.pool]
            _boost(run, "speaker_match", said, weight)
            who = ", ".join(sorted(named))
            run.stats.notes.append(f"the query names {who}: what they said is preferred")

    def _time_named(self, run: Run) -> None:
        """A time the query names prefers chunks dated near it: a bounded boost on the
        relevance (``memory/when.py``), the pool re-ordered by it; never a filter."""
        if not run.periods or not run.pool:
            return
        with run.timer.stage("time"):
            closeness = [
                time_closeness(chunk_day(r.turns, r.source_date), run.periods) for r in run.pool
            ]
            _boost(run, "time_match", closeness, TIME_BOOST)
            named = ", ".join(f"{p.text('en')}" for p in run.periods)
            run.stats.notes.append(f"the query names {named}: chunks dated near it are preferred")

    def _memory_axis(self, run: Run) -> None:
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

    def _diversify(self, run: Run) -> None:
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

    def _hits(self, run: Run) -> list[SearchHit]:
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
                turns=r.turns,
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
    def _read_index(self) -> tuple[list[int], IndexView | None]:
        """The live chunks the index may not hold yet (the queue), then the index: in
        that order, so every live chunk is in one of the two.

        Every updater makes the index hold a chunk (publishes a version, writes the
        service) before it clears the chunk's queued add (``IndexWriter.update``,
        ``QueuedIndex.update``), one updater at a time. So a live chunk missing from
        the queue as read had its add cleared already, after an index holding it was
        published, and the index as read next (or searched, for a service) still
        holds it: what is published later drops only deleted chunks. Read the other
        way round, a publication between the two reads hides a chunk from both.
        Cleared meanwhile, a queued chunk is scored directly and may come from the
        index as well: one score per id survives (``retrieval._merge``).
        """
        queued = self.store.pending_adds()
        version = self._published()
        if version is not None:  # BM25 over the partitions of the spaces it reads
            version = version.for_spaces(self.store.spaces.read)
        return queued, version

    def _rerank_on(self, params: SearchRequest) -> bool:
        return params.use_reranker and self.reranker is not None

    def _check_space(self, version: IndexView, qvec: np.ndarray) -> None:
        m = version.manifest
        if m.model_id != self.embedder.model_id or (m.dim and m.dim != qvec.shape[-1]):
            raise ModelMismatchError(
                f"published index is in the space of {m.model_id!r} (dim {m.dim}), the query "
                f"embedder is {self.embedder.model_id!r} (dim {qvec.shape[-1]}); configure the same "
                "model or rebuild the index with this one."
                + mismatch_hint(m.model_id, self.embedder.model_id)
            )


def memory_fields(record: ChunkRecord) -> MemoryFields:
    return MemoryFields(
        knowledge_type=record.knowledge_type,
        importance=record.importance,
        access_count=record.access_count,
        created_at=record.created_at,
        source_date=record.source_date,
        last_accessed_at=record.last_accessed_at,
    )


def _boost(run: Run, key: str, match: list[float], weight: float) -> None:
    """The pool's scores boosted by each chunk's ``match`` on [0, 1] (``scoring.boosted``),
    the match recorded in its stage scores under ``key``, the pool re-ordered by them."""
    scores = boosted([run.final[r.id] for r in run.pool], match, weight)
    for r, m, score in zip(run.pool, match, scores, strict=True):
        run.final[r.id] = score
        run.extra.setdefault(r.id, {})[key] = round(m, 6)
    run.pool = sorted(run.pool, key=lambda r: -run.final[r.id])  # stable: ties keep order
