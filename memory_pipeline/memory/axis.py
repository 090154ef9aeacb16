"""Apply the memory axis to a ranked list: the search stage and the standalone ``rerank``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, replace

from memory_pipeline.memory.scoring import (
    MemoryFields,
    MemoryParams,
    MemoryScore,
    memory_score,
    normalise_relevance,
)
from memory_pipeline.types import SearchHit


@dataclass(frozen=True)
class Reranked:
    position: int  # index of the item in the caller's list
    memory: MemoryScore


def memory_rerank(
    relevance: Sequence[float],
    fields: Sequence[MemoryFields],
    params: MemoryParams,
    now: dt.datetime | None = None,
) -> tuple[list[Reranked], list[Reranked]]:
    """(kept, cut): kept sorted by memory-adjusted score, best first; cut by importance.

    Relevance is normalised to [0, 1] over the list first, so the weights mean the
    same for RRF scores (~0.03) and cross-encoder probabilities.
    """
    if len(relevance) != len(fields):
        raise ValueError(f"{len(relevance)} relevance scores for {len(fields)} chunks")
    now = now or dt.datetime.now(dt.UTC)
    kept: list[Reranked] = []
    cut: list[Reranked] = []
    for i, (rel, f) in enumerate(zip(normalise_relevance(list(relevance)), fields, strict=True)):
        scored = memory_score(f, params, now, relevance=rel)
        (cut if scored.score is None else kept).append(Reranked(i, scored))
    kept.sort(key=lambda r: (-(r.memory.score or 0.0), r.position))
    return kept, cut


def rerank_hits(
    hits: Sequence[SearchHit], params: MemoryParams, now: dt.datetime | None = None
) -> list[SearchHit]:
    """Hits a caller passes in (their ``score`` is the relevance) on the memory axis: the
    kept ones, best first, scored by it, their stages showing relevance, decay and boost."""
    fields = [
        MemoryFields(h.knowledge_type, h.importance, h.access_count, h.created_at, h.source_date)
        for h in hits
    ]
    kept, _cut = memory_rerank([h.score for h in hits], fields, params, now)
    out = []
    for item in kept:
        hit = hits[item.position]
        m = item.memory
        stages = {**hit.stage_scores, "relevance": hit.score, "decay": m.decay}
        stages.update(access_boost=m.boost, memory=m.score)
        out.append(replace(hit, score=float(m.score or 0.0), stage_scores=stages))
    return out
