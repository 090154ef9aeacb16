"""Staged memory scoring — the one formula the search rerank and forgetting share.

For a chunk with relevance ``r̂`` in [0, 1] (relevance divided by the best in its
candidate pool; 0 when scoring without a query, as the forgetting batch does):

1. **Importance cutoff.** ``importance < importance_threshold`` → cut (no score).
   Unset importance always passes.
2. **Staleness.** ``decay = 0.5 ** (age_days / half_life[knowledge_type])`` with the
   age measured from ``source_date`` (when the knowledge was written) or else
   ``created_at``. ``principle`` has no half-life (decay 1 forever); so do chunks
   without a knowledge_type — their age is not guessed from their text.
3. **Access frequency.** ``boost = 1 − exp(−access_count / freq_scale)``: grows
   with every access and saturates below 1.

``score = (1 − time_weight − freq_weight) · r̂ + time_weight · decay + freq_weight · boost``

Every term is non-negative and monotone: a fresher chunk or one accessed more
never scores lower. With ``r̂ = 0`` the score is the chunk's *memory value*
``time_weight · decay + freq_weight · boost``, which the forgetting batch
compares with ``score_threshold``.

**Forgetting candidates** (``forgetting_verdict``, the batch's only rule): a chunk cut
by importance, or one whose memory value is below ``score_threshold`` once its
*grace period* is over. The grace runs ``grace_days`` from ``created_at`` (ingest) or
``last_accessed_at``, whichever is later: decay runs from ``source_date``, so without
it a paper written two years ago would be a candidate minutes after it arrived,
before anyone had a chance to use it. The grace only exempts from forgetting; it
never changes a score, so search still ranks by the decay. It does not shield an
importance cut either: importance is a deliberate judgement, not an age.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from memory_pipeline.errors import InvalidInputError

DEFAULT_HALF_LIVES: Mapping[str, float | None] = {
    "principle": None,
    "paper": 180.0,
    "news": 30.0,
    "experiment": 90.0,
}


class CutReason(StrEnum):
    IMPORTANCE = "importance_below_threshold"
    SCORE = "score_below_threshold"


#: Days after ingest or the last access in which decay alone never makes a candidate.
DEFAULT_GRACE_DAYS = 30.0
#: Memory value below which a chunk is a forgetting candidate.
DEFAULT_SCORE_THRESHOLD = 0.05
#: A real forgetting run that would archive more than this share of live chunks is refused.
DEFAULT_MAX_FRACTION = 0.2


@dataclass(frozen=True)
class MemoryParams:
    # Relevance keeps 0.7 by default: the memory axis re-orders near-ties, it does
    # not let an old-but-evergreen chunk beat a clearly better answer.
    time_weight: float = 0.2
    freq_weight: float = 0.1
    importance_threshold: float = 0.0
    freq_scale: float = 10.0
    half_life_overrides: Mapping[str, float | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("time_weight", "freq_weight", "importance_threshold"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
                raise InvalidInputError(f"{name} must be a number in [0, 1], got {value!r}")
        if self.time_weight + self.freq_weight > 1.0:
            raise InvalidInputError(
                f"time_weight + freq_weight must be ≤ 1 (relevance keeps the rest), got "
                f"{self.time_weight} + {self.freq_weight}"
            )
        if self.freq_scale <= 0:
            raise InvalidInputError(f"freq_scale must be > 0, got {self.freq_scale}")
        for kind, days in self.half_life_overrides.items():
            if kind not in DEFAULT_HALF_LIVES:
                raise InvalidInputError(
                    f"half-life override for unknown knowledge_type {kind!r}; "
                    f"use one of {', '.join(DEFAULT_HALF_LIVES)}"
                )
            if days is not None and (not isinstance(days, int | float) or days <= 0):
                raise InvalidInputError(
                    f"half-life of {kind} must be > 0 days or None, got {days!r}"
                )

    def half_life(self, knowledge_type: str | None) -> float | None:
        if knowledge_type is None:
            return None
        if knowledge_type in self.half_life_overrides:
            return self.half_life_overrides[knowledge_type]
        return DEFAULT_HALF_LIVES.get(knowledge_type)


@dataclass(frozen=True)
class MemoryFields:
    """What the memory axis reads from a chunk."""

    knowledge_type: str | None
    importance: float | None
    access_count: int
    created_at: dt.datetime
    source_date: dt.date | None
    last_accessed_at: dt.datetime | None = None


@dataclass(frozen=True)
class MemoryScore:
    score: float | None  # None when cut by importance
    relevance: float
    decay: float
    boost: float
    age_days: float
    cut: CutReason | None = None


def age_days(fields: MemoryFields, now: dt.datetime) -> float:
    if fields.source_date is not None:
        born = dt.datetime.combine(fields.source_date, dt.time(), tzinfo=dt.UTC)
    else:
        born = fields.created_at
    return max(0.0, (now - born).total_seconds() / 86_400)


def decay_factor(half_life_days: float | None, age: float) -> float:
    if half_life_days is None:
        return 1.0
    return float(0.5 ** (age / half_life_days))


def access_boost(access_count: int, freq_scale: float) -> float:
    return 1.0 - math.exp(-max(0, access_count) / freq_scale)


def memory_score(
    fields: MemoryFields, params: MemoryParams, now: dt.datetime, relevance: float = 0.0
) -> MemoryScore:
    """Score one chunk on the memory axis (see the module docstring for the formula)."""
    age = age_days(fields, now)
    decay = decay_factor(params.half_life(fields.knowledge_type), age)
    boost = access_boost(fields.access_count, params.freq_scale)
    if fields.importance is not None and fields.importance < params.importance_threshold:
        return MemoryScore(None, relevance, decay, boost, age, CutReason.IMPORTANCE)
    rel_weight = 1.0 - params.time_weight - params.freq_weight
    score = rel_weight * relevance + params.time_weight * decay + params.freq_weight * boost
    return MemoryScore(score, relevance, decay, boost, age)


@dataclass(frozen=True)
class ForgettingVerdict:
    memory: MemoryScore  # as ``memory_score`` gives it with relevance 0
    reason: CutReason | None  # None: not a forgetting candidate
    in_grace: bool


def grace_start(fields: MemoryFields) -> dt.datetime:
    """When a chunk's grace period starts: ingest or its last access, whichever is later."""
    if fields.last_accessed_at is None:
        return fields.created_at
    return max(fields.created_at, fields.last_accessed_at)


def forgetting_verdict(
    fields: MemoryFields,
    params: MemoryParams,
    now: dt.datetime,
    *,
    score_threshold: float,
    grace_days: float,
) -> ForgettingVerdict:
    """Whether the forgetting batch takes a chunk, and why (see the module docstring)."""
    ms = memory_score(fields, params, now)
    # A start after ``now`` (clock skew, an injected past) counts as fresh; 0 days: no grace.
    in_grace = grace_days > 0 and now - grace_start(fields) < dt.timedelta(days=grace_days)
    if ms.cut is not None:
        return ForgettingVerdict(ms, ms.cut, in_grace)
    if not in_grace and ms.score is not None and ms.score < score_threshold:
        return ForgettingVerdict(ms, CutReason.SCORE, in_grace)
    return ForgettingVerdict(ms, None, in_grace)


def boosted(relevance: Sequence[float], match: Sequence[float], weight: float) -> list[float]:
    """Each chunk's relevance on [0, 1] times ``1 + weight * match``, in the order given:
    the bounded boost the search's time and speaker stages give what the query names."""
    if len(relevance) != len(match):
        raise ValueError(f"{len(relevance)} relevance scores for {len(match)} chunks")
    return [
        r * (1.0 + weight * m) for r, m in zip(normalise_relevance(relevance), match, strict=True)
    ]


def normalise_relevance(scores: Sequence[float]) -> list[float]:
    """Relevance on [0, 1]: divided by the best score (min-max when any is negative)."""
    if not scores:
        return []
    low, high = min(scores), max(scores)
    if low < 0:
        span = high - low
        return [(s - low) / span if span > 0 else 1.0 for s in scores]
    return [s / high if high > 0 else 0.0 for s in scores]
