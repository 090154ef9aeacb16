"""Apply the memory axis to a ranked list: the search stage and the standalone ``rerank``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from memory_pipeline.memory.scoring import (
    MemoryFields,
    MemoryParams,
    MemoryScore,
    memory_score,
    normalise_relevance,
)


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
