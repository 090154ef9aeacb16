"""Reciprocal Rank Fusion of several ranked id lists (e.g. dense and BM25 results).

RRF is used instead of mixing raw scores because cosine similarities and BM25 scores
live on unrelated, query-dependent scales; ranks are comparable across retrievers
without any calibration.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from memory_pipeline.errors import InvalidInputError

DEFAULT_RRF_K = 60


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
    if weights is None:
        list_weights = [1.0] * len(rankings)
    else:
        if len(weights) != len(rankings):
            raise InvalidInputError(
                f"RRF got {len(weights)} weights for {len(rankings)} ranked lists; "
                "pass one weight per list or none"
            )
        list_weights = [float(w) for w in weights]
        for w in list_weights:
            if not math.isfinite(w) or w < 0:
                raise InvalidInputError(f"RRF weights must be finite and >= 0, got {w!r}")

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
