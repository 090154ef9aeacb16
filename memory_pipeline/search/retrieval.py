"""Candidate generation: dense and BM25 top-N, the not-yet-indexed delta, fusion, hydration.

Correct without waiting for the pipeline: chunks the published index does not
hold yet (queued in the store's index changes) are scored here directly, and ids
the index returns that are no longer live in the store are dropped and counted.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from memory_pipeline.embedding.base import Embedder
from memory_pipeline.index import bm25
from memory_pipeline.index.protocols import IndexView
from memory_pipeline.index.tokenizer import tokenize
from memory_pipeline.search.fusion import FUSION_METHODS, Fusion
from memory_pipeline.search.run import Ranked, Run
from memory_pipeline.store import Store
from memory_pipeline.types import ChunkRecord, SearchStats


class Retriever:
    """The first stages of a search, over the store and the published version."""

    def __init__(self, store: Store, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder

    def retrieve(self, run: Run) -> None:
        """Dense and sparse top-N (filters first), the unindexed delta, then fusion."""
        p, version = run.params, run.version
        if version is not None:
            held = version.manifest.n_dense
            with run.timer.stage("dense"):
                run.dense = _within(
                    lambda n, ids: version.dense.search(run.qvec, n, allowed=ids),
                    run.allowed,
                    p.top_n,
                    held,
                )
            with run.timer.stage("sparse"):
                run.sparse = _within(
                    lambda n, ids: version.sparse.search(run.tokens, n, allowed_ids=_as_set(ids)),
                    run.allowed,
                    p.top_n,
                    version.sparse.num_docs,
                )
        with run.timer.stage("unindexed"):
            extra_dense, extra_sparse, n_extra = self._unindexed(
                version, run.queued, run.qvec, run.tokens, run.allowed
            )
        run.stats.unindexed_searched = n_extra
        if n_extra:
            chunks, was = (
                ("1 chunk is", "was") if n_extra == 1 else (f"{n_extra} chunks are", "were")
            )
            run.stats.notes.append(
                f"{chunks} not in the published index yet and {was} scored directly; "
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

    def _complete(self, run: Run) -> tuple[Ranked, Ranked]:
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
                found, missing = run.version.dense.scores_for(run.qvec, missing)
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

    def _sparse_scores(self, run: Run, ids: list[int]) -> Ranked:
        """BM25 scores of the given chunks (0 for those sharing no term with the query)."""
        if not ids:
            return []
        scored: dict[int, float] = {}
        if run.version is not None:
            scored = dict(run.version.sparse.scores_for(run.tokens, ids))
        return [(cid, scored.get(cid, run.unindexed_sparse.get(cid, 0.0))) for cid in ids]

    def _unindexed(
        self,
        version: IndexView | None,
        queued: list[int],
        qvec: np.ndarray,
        tokens: list[str],
        allowed: np.ndarray | None,
    ) -> tuple[Ranked, Ranked, int]:
        """Score the queued chunks (live, maybe not in ``version``: read before it), so
        ingest is searchable at once."""
        ids = queued
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
        contents = self.store.sparse_texts(ids)
        docs = [(cid, tokenize(text)) for cid, text in contents.items()]
        if version is not None:
            sparse = version.sparse.score_external(tokens, docs)
        else:
            sparse = bm25.score_documents(list(dict.fromkeys(tokens)), docs)
        return dense, sparse, len(ids)

    def hydrate(self, fused: Ranked, pool_size: int, stats: SearchStats) -> dict[int, ChunkRecord]:
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


# Above this share of the index, a restricted search first tries the unrestricted one.
_OVERFETCH_SHARE = 0.2


def _within(
    search: Callable[[int, np.ndarray | None], Ranked],
    allowed: np.ndarray | None,
    top_n: int,
    held: int,
) -> Ranked:
    """``search`` restricted to ``allowed`` (sorted ids) before its top-n cut.

    When ``allowed`` is a large share of what the index holds (a space beside others,
    a broad filter), passing it to the index costs more than the search itself. Then
    the unrestricted top-m comes first: if at least ``top_n`` of those are allowed,
    they *are* the restricted top-n (anything allowed further down scores lower), and
    otherwise the restricted search runs as before. Same result, either way.
    """
    if allowed is None or not held or len(allowed) / held < _OVERFETCH_SHARE:
        return search(top_n, allowed)
    share = len(allowed) / held
    m = min(held, int(top_n / share * 2) + 16)
    hits = search(m, None)
    if hits:
        ids = np.fromiter((cid for cid, _ in hits), dtype=np.int64, count=len(hits))
        kept = [h for h, ok in zip(hits, np.isin(ids, allowed), strict=True) if ok]
    else:
        kept = []
    if len(kept) >= top_n or len(hits) < m:  # enough, or every match was seen
        return kept[:top_n]
    return search(top_n, allowed)


def _as_set(allowed: np.ndarray | None) -> set[int] | None:
    return None if allowed is None else set(allowed.tolist())


def _merge(a: Ranked, b: Ranked, top_n: int) -> Ranked:
    merged = {**dict(a), **dict(b)}
    return sorted(merged.items(), key=lambda p: (-p[1], p[0]))[:top_n]
