"""Ablation variants: which retrieval stages run, picked by name from a table.

``bm25`` and ``dense`` call one index half directly (the published version's sparse
index, or its dense segments) so a single retriever can be measured without changing
the search pipeline; they see only what the published index holds. The ``hybrid*``
variants are the real :class:`HybridSearcher` with one ``SearchRequest`` switch each.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.index.tokenizer import tokenize
from memory_pipeline.system import MemorySystem
from memory_pipeline.types import SearchFilters


@dataclass(frozen=True)
class ChunkRef:
    """One returned chunk, as the metrics need it."""

    chunk_id: int
    doc_id: str
    chunk_index: int
    turns: tuple[str, ...] = ()  # the ids of the conversation turns it holds

    @property
    def key(self) -> str:
        return f"{self.doc_id}#{self.chunk_index}"


class ChunkDirectory:
    """chunk id → (doc id, chunk index) for live chunks, read once per evaluation."""

    def __init__(self, system: MemorySystem) -> None:
        self._map = system.store.chunk_positions()
        self._turns = system.store.chunk_turn_ids()

    def refs(self, ids: Sequence[int]) -> list[ChunkRef]:
        """Refs in the given order; ids no longer live are dropped, as search does."""
        return [ChunkRef(i, *self._map[i], self._turns.get(i, ())) for i in ids if i in self._map]


@dataclass(frozen=True)
class Request:
    """One query to answer: its text, vector, filters and how many chunks to return."""

    text: str
    vector: np.ndarray
    filters: SearchFilters | None
    depth: int
    now: dt.datetime | None = None  # the search's reference date; None: the clock's


Runner = Callable[[MemorySystem, ChunkDirectory, Request], list[ChunkRef]]


def _allowed(system: MemorySystem, filters: SearchFilters | None) -> np.ndarray | None:
    if filters is None or filters.is_empty():
        return None
    return system.store.filter_ids(filters)


def run_bm25(system: MemorySystem, chunks: ChunkDirectory, req: Request) -> list[ChunkRef]:
    version = system.published()
    if version is None:
        return []
    allowed = _allowed(system, req.filters)
    hits = version.sparse.search(
        tokenize(req.text),
        req.depth,
        allowed_ids=None if allowed is None else set(allowed.tolist()),
    )
    return chunks.refs([cid for cid, _ in hits])


def run_dense(system: MemorySystem, chunks: ChunkDirectory, req: Request) -> list[ChunkRef]:
    version = system.published()
    if version is None:
        return []
    hits = version.dense.search(req.vector, req.depth, allowed=_allowed(system, req.filters))
    return chunks.refs([cid for cid, _ in hits])


def _hybrid(
    *, reranker: bool = False, memory: bool = False, mmr: bool = False, fusion: str | None = None
) -> Runner:
    def run(system: MemorySystem, chunks: ChunkDirectory, req: Request) -> list[ChunkRef]:
        st = system.settings
        request = st.search_request(
            top_k=req.depth,
            # Each retriever must reach at least as deep as the list we score.
            top_n=max(st.search.top_n, req.depth),
            fusion=fusion or st.search.fusion,
            enable_mmr=mmr,
            use_reranker=reranker,
            record_access=False,  # evaluating must not change the memory it measures
            enable_memory_rerank=memory,
            now=req.now,
        )
        result = system.searcher.search(req.text, req.filters, request, query_vector=req.vector)
        return chunks.refs([h.chunk_id for h in result.hits])

    return run


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    run: Runner
    needs_reranker: bool = False


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("bm25", "BM25 only (published sparse index)", run_bm25),
        Variant("dense", "dense only (published FAISS segments)", run_dense),
        Variant("hybrid", "dense ∪ BM25, the configured fusion", _hybrid()),
        Variant("hybrid-rrf", "dense ∪ BM25, reciprocal rank fusion", _hybrid(fusion="rrf")),
        Variant(
            "hybrid+rerank",
            "hybrid, then the configured cross-encoder",
            _hybrid(reranker=True),
            needs_reranker=True,
        ),
        Variant("hybrid+memory", "hybrid, then the memory axis", _hybrid(memory=True)),
        Variant("hybrid+mmr", "hybrid, then MMR diversity", _hybrid(mmr=True)),
    )
}
DEFAULT_VARIANTS = tuple(VARIANTS)


def default_variant(system: MemorySystem) -> str:
    """What ``MemorySystem.query`` does with its defaults: the cross-encoder if configured."""
    return "hybrid+rerank" if system.reranker is not None else "hybrid"


def resolve_variants(names: Sequence[str]) -> list[Variant]:
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise InvalidInputError(
            f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}"
        )
    return [VARIANTS[n] for n in dict.fromkeys(names)]
