"""Fusing the dense and the BM25 result lists into one ranking.

Two fusions, picked by the ``fusion`` setting:

* ``convex`` (the default): each list's scores min-max normalised over its own
  candidates, then averaged (Bruch, Gai & Ingber, "An Analysis of Fusion Functions
  for Hybrid Retrieval", ACM TOIS 42(1), 2023). It keeps *how much* better a hit is,
  so a retriever that is sure of its first hit (a BM25 score far above the rest)
  is not overruled by the other's weak preference. The search pipeline first has
  both retrievers score every candidate either one returned, so no score is guessed.
* ``rrf``: Reciprocal Rank Fusion, ranks only; robust to any score scale, but a
  rank-1 hit far ahead of the field counts the same as one a hair ahead.

Measured with ``memory-pipeline eval`` (equal weights, nothing tuned): convex
beats RRF on JaQuAD (Japanese) and matches it on SciFact (English); see
``eval/README.md``.

Other phrasings of the same question (rewrites a caller wrote) are each fused as
above, and their rankings then fused into one (``fuse_phrasings``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from memory_pipeline.errors import InvalidInputError

DEFAULT_RRF_K = 60
Ranked = list[tuple[int, float]]


class Fusion(StrEnum):
    CONVEX = "convex"
    RRF = "rrf"


FUSIONS = tuple(f.value for f in Fusion)
DEFAULT_FUSION: str = Fusion.CONVEX.value


def parse_fusion(value: object, where: str = "fusion") -> Fusion:
    """The fusion named by ``value`` (case and spaces ignored), or an error naming ``where``."""
    try:
        return Fusion(str(value).strip().lower())
    except ValueError:
        raise InvalidInputError(
            f"{where} must be {' or '.join(map(repr, FUSIONS))}, got {value!r}"
        ) from None


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[int]],
    *,
    k: int = DEFAULT_RRF_K,
    weights: Sequence[float] | None = None,
) -> list[tuple[int, float]]:
    """Fuse ranked lists of ids with Reciprocal Rank Fusion.

    Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion outperforms Condorcet and
    individual Rank Learning Methods", SIGIR 2009::

        RRF(d) = Σ_i  w_i / (k + rank_i(d))

    where ``rank_i(d)`` is the 1-based position of ``d`` in list ``i`` and lists that
    do not contain ``d`` contribute nothing. ``k`` (60 in the paper) damps the weight of
    the very top ranks so that one retriever's first hit cannot dominate; ``w_i``
    defaults to 1 for every list (the paper's unweighted form).

    Args:
        rankings: one sequence of ids per retriever, best first. If an id is repeated
            within one list only its first (best) position counts, so a retriever
            cannot vote twice for the same item.
        k: the rank constant, ``>= 0``.
        weights: optional non-negative weight per list, same length as ``rankings``.

    Returns:
        ``(id, score)`` pairs, highest score first. Equal scores are ordered by the
        best single rank the id reached in any list, then by ascending id, so the
        output never depends on dict or set iteration order.

    Raises:
        InvalidInputError: negative or non-integer ``k``; ``weights`` of the wrong length,
            negative or not finite.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise InvalidInputError(f"RRF k must be an integer >= 0, got {k!r}")
    list_weights = _check_weights(weights, len(rankings), "RRF")

    scores: dict[int, float] = {}
    best_rank: dict[int, int] = {}
    for ranking, weight in zip(rankings, list_weights, strict=True):
        seen: set[int] = set()
        for rank, raw_id in enumerate(ranking, start=1):
            # int() folds numpy integer ids into plain ints so they merge with the rest.
            doc_id = int(raw_id)
            if doc_id in seen:
                continue
            seen.add(doc_id)
            # Lists are summed in the given order, so scores are bit-for-bit repeatable.
            scores[doc_id] = scores.get(doc_id, 0.0) + weight / (k + rank)
            if rank < best_rank.get(doc_id, rank + 1):
                best_rank[doc_id] = rank

    return sorted(scores.items(), key=lambda item: (-item[1], best_rank[item[0]], item[0]))


def _check_weights(weights: Sequence[float] | None, n: int, what: str) -> list[float]:
    if weights is None:
        return [1.0] * n
    if len(weights) != n:
        raise InvalidInputError(
            f"{what} got {len(weights)} weights for {n} lists; pass one weight per list or none"
        )
    out = [float(w) for w in weights]
    for w in out:
        if not math.isfinite(w) or w < 0:
            raise InvalidInputError(f"{what} weights must be finite and >= 0, got {w!r}")
    return out


def min_max(scored: Sequence[tuple[int, float]]) -> dict[int, float]:
    """Scores mapped to [0, 1] over the list: best 1, worst 0; all equal -> all 1.

    A repeated id keeps its first (best) position only, so a retriever cannot vote
    twice for the same item.
    """
    first: dict[int, float] = {}
    for raw_id, value in scored:
        # int() folds numpy integer ids into plain ints so they merge with the rest.
        first.setdefault(int(raw_id), float(value))
    if not first:
        return {}
    lo, span = _scale(first.values())
    return {i: (v - lo) / span if span > 0 else 1.0 for i, v in first.items()}


def _scale(values: Iterable[float]) -> tuple[float, float]:
    """A list's lowest score and its spread (highest − lowest)."""
    listed = list(values)
    lo = min(listed)
    return lo, max(listed) - lo


def convex_combination(
    scored: Sequence[Sequence[tuple[int, float]]],
    *,
    weights: Sequence[float] | None = None,
) -> list[tuple[int, float]]:
    """Fuse scored lists by a convex combination of min-max normalised scores.

    Bruch, Gai & Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval",
    ACM TOIS 42(1), 2023::

        CC(d) = Σ_i  w_i · (s_i(d) − min_i) / (max_i − min_i),   Σ_i w_i = 1

    where ``min_i``/``max_i`` are the lowest and highest score in list ``i`` and a
    list that does not contain ``d`` contributes 0 (its lowest normalised score).
    Weights default to equal and are rescaled to sum to 1, so fused scores lie in
    [0, 1] whatever the retrievers' own scales.

    Returns ``(id, score)`` pairs, highest first; ties are ordered by the best rank
    the id reached in any list, then by ascending id.

    Raises:
        InvalidInputError: ``weights`` of the wrong length, negative, not finite or
            all zero.
    """
    list_weights = _check_weights(weights, len(scored), "convex combination")
    total = sum(list_weights)
    if scored and total <= 0:
        raise InvalidInputError("convex combination weights must not all be 0")
    scores: dict[int, float] = {}
    best_rank: dict[int, int] = {}
    for ranking, weight in zip(scored, list_weights, strict=True):
        normalised = min_max(ranking)
        for rank, (doc_id, value) in enumerate(normalised.items(), start=1):
            scores[doc_id] = scores.get(doc_id, 0.0) + weight / total * value
            if rank < best_rank.get(doc_id, rank + 1):
                best_rank[doc_id] = rank
    return sorted(scores.items(), key=lambda item: (-item[1], best_rank[item[0]], item[0]))


def on_scale(scores: Sequence[float], scored: Sequence[tuple[int, float]]) -> list[float]:
    """``scores`` of items a list does not hold, placed on that list's min-max scale.

    Not clipped: an item scoring below the list's worst gets a negative value, so
    items added from outside a list stay ordered by their own scores.
    """
    if not scored:
        return [0.0] * len(scores)
    lo, span = _scale(float(s) for _, s in scored)
    return [(float(x) - lo) / span if span > 0 else float(x) - lo for x in scores]


def phrasing_weights(n: int) -> list[float]:
    """Weights of ``n`` phrasings, the query first: it weighs as much as all rewrites together."""
    if n <= 1:
        return [1.0] * n
    return [0.5] + [0.5 / (n - 1)] * (n - 1)


def fuse_phrasings(rankings: Sequence[Sequence[tuple[int, float]]]) -> Ranked:
    """Fuse the fused rankings of several phrasings of one question (the query's first).

    A weighted sum of each phrasing's own fused score (CombSUM; Fox & Shaw,
    "Combination of Multiple Searches", TREC-2, 1994)::

        F(d) = Σ_p  w_p · f_p(d),   w_query = 1/2,   w_rewrite = 1 / (2m) for m rewrites

    where ``f_p(d)`` is ``d``'s score in phrasing ``p``'s dense + BM25 fusion, and a
    phrasing that did not return ``d`` adds 0 (its floor: no RRF vote, the lowest
    normalised score). Why this one:

    * It is the configured fusion carried over to every phrasing's lists: under
      ``convex`` the result is a convex combination of all 2(m + 1) min-max normalised
      lists, under ``rrf`` a weighted RRF over them. The weights sum to 1, so scores stay
      on one phrasing's scale and a guaranteed candidate's placement (scaled by
      ``w_query``) means what it means without rewrites.
    * A sum, not a max: agreement counts. Min-max normalisation puts every list's first
      hit at 1, so under a max one poor rewrite's top hit would stand level with the
      query's best.
    * The query weighs half: rewrites are the caller's guesses at what the question
      means. However many there are, together they equal the question and never outweigh
      it. A chunk only the rewrites find can still rise into the results (a synonym the
      query lacks), and the query and a rewrite agreeing on a chunk lift it above what
      either finds alone.

    Returns ``(id, score)`` pairs, highest first; ties are ordered by the best rank the id
    reached in any phrasing, then by ascending id.
    """
    scores: dict[int, float] = {}
    best_rank: dict[int, int] = {}
    for ranking, weight in zip(rankings, phrasing_weights(len(rankings)), strict=True):
        seen: set[int] = set()
        for rank, (raw_id, value) in enumerate(ranking, start=1):
            doc_id = int(raw_id)
            if doc_id in seen:  # a phrasing votes once for an item
                continue
            seen.add(doc_id)
            scores[doc_id] = scores.get(doc_id, 0.0) + weight * float(value)
            if rank < best_rank.get(doc_id, rank + 1):
                best_rank[doc_id] = rank
    return sorted(scores.items(), key=lambda item: (-item[1], best_rank[item[0]], item[0]))


@dataclass(frozen=True)
class FusionMethod:
    """How one fusion merges the lists, and where it places a guaranteed candidate."""

    #: score every candidate with both retrievers before fusing (see the search pipeline)
    complete: bool
    #: (dense, sparse, rrf_k) -> fused ranking, best first
    fuse: Callable[[Sequence[tuple[int, float]], Sequence[tuple[int, float]], int], Ranked]
    #: (rank among guaranteed candidates, its dense score on the dense list's scale,
    #: rrf_k, top_n) -> its relevance, below what the retrievers' own lists reach
    place_guaranteed: Callable[[int, float, int, int], float]


def _rrf(dense: Sequence[tuple[int, float]], sparse: Sequence[tuple[int, float]], k: int) -> Ranked:
    return reciprocal_rank_fusion([[i for i, _ in dense], [i for i, _ in sparse]], k=k)


def _convex(
    dense: Sequence[tuple[int, float]], sparse: Sequence[tuple[int, float]], _k: int
) -> Ranked:
    return convex_combination([dense, sparse])


FUSION_METHODS: dict[Fusion, FusionMethod] = {
    # The dense list is one of two equally weighted halves of the score.
    Fusion.CONVEX: FusionMethod(True, _convex, lambda _rank, dense, _k, _n: dense / 2),
    # The score of a rank just past the dense top-N cut.
    Fusion.RRF: FusionMethod(False, _rrf, lambda rank, _dense, k, n: 1.0 / (k + n + rank)),
}
