"""Maximal Marginal Relevance: re-order a candidate pool to trade relevance for diversity.

Agent memories are often near-duplicates (the same fact restated in several sessions);
MMR keeps the second copy from taking a top-k slot that a different fact could use.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.search.params import DEFAULT_MMR_LAMBDA


def mmr_select(
    candidate_ids: Sequence[int],
    relevance: Sequence[float],
    vectors: np.ndarray,
    *,
    k: int,
    lambda_: float = DEFAULT_MMR_LAMBDA,
) -> list[int]:
    """Pick up to ``k`` ids greedily by Maximal Marginal Relevance.

    Carbonell & Goldstein, "The Use of MMR, Diversity-Based Reranking for Reordering
    Documents and Producing Summaries", SIGIR 1998. At each step choose::

        argmax_{d ∉ S}  λ · rel(d) − (1 − λ) · max_{s ∈ S} cos(d, s)

    with the diversity term taken as 0 while ``S`` is empty (so the first pick is the
    most relevant candidate).

    Relevance is min-max normalised to [0, 1] before use. Without that, λ would mean
    something different for every scorer: cross-encoder probabilities in (0, 1), RRF
    scores around 0.03 and raw logits in the tens would all weigh differently against a
    cosine in [-1, 1]. After normalisation λ = 0.7 is the same trade-off for any input.
    If all relevances are equal they all become 1 and only diversity separates them.

    Rows of ``vectors`` are re-normalised to unit length (zero rows stay zero) so the dot
    product is the cosine even if a caller passes raw embeddings.

    Cost: one (n × d) matrix-vector product per pick, O(k · n · d) time, O(n) extra
    memory; no n × n similarity matrix is built.

    Args:
        candidate_ids: distinct ids, in the order used to break exact ties (earlier wins;
            pass them best-first).
        relevance: one finite score per id, higher is better, any scale.
        vectors: array of shape (n, d), row i belongs to ``candidate_ids[i]``.
        k: how many to pick; ``k >= n`` orders the whole pool, ``k == 0`` returns [].
        lambda_: in [0, 1]; 1 is pure relevance order, 0 pure diversity.

    Returns:
        The chosen ids, in selection order (this is the new ranking).

    Raises:
        InvalidInputError: mismatched lengths, duplicate ids, non-finite values, a
            negative ``k`` or ``lambda_`` outside [0, 1].
    """
    n = len(candidate_ids)
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 0:
        raise InvalidInputError(f"MMR k must be an integer >= 0, got {k!r}")
    if not 0.0 <= lambda_ <= 1.0:
        raise InvalidInputError(f"MMR lambda_ must be in [0, 1], got {lambda_!r}")
    if len(relevance) != n:
        raise InvalidInputError(f"MMR got {len(relevance)} relevance scores for {n} candidates")
    vecs = np.asarray(vectors, dtype=np.float64)
    if n == 0:
        return []
    if vecs.ndim != 2 or vecs.shape[0] != n:
        raise InvalidInputError(
            f"MMR vectors must have shape ({n}, d) to match the candidates, got {vecs.shape}"
        )
    ids = [int(i) for i in candidate_ids]
    if len(set(ids)) != n:
        raise InvalidInputError("MMR candidate_ids must be distinct")
    rel = np.asarray(relevance, dtype=np.float64)
    if not np.all(np.isfinite(rel)) or not np.all(np.isfinite(vecs)):
        raise InvalidInputError("MMR relevance scores and vectors must be finite")

    lo, hi = float(rel.min()), float(rel.max())
    rel = (rel - lo) / (hi - lo) if hi > lo else np.ones(n)

    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    vecs = np.divide(vecs, norms, out=np.zeros_like(vecs), where=norms > 0)

    weighted_rel = lambda_ * rel
    penalty_weight = 1.0 - lambda_
    # max similarity of each candidate to anything selected so far; None while S is empty
    # (not 0, and not -inf: a later max() must not be clamped by a fake "0" similarity).
    max_sim: np.ndarray | None = None
    available = np.ones(n, dtype=bool)
    chosen: list[int] = []
    for _ in range(min(k, n)):
        score = weighted_rel if max_sim is None else weighted_rel - penalty_weight * max_sim
        # -inf masks picked rows; np.argmax returns the first maximum, i.e. the earliest
        # candidate wins exact ties (with λ = 1 this reproduces a stable relevance sort).
        pick = int(np.argmax(np.where(available, score, -np.inf)))
        chosen.append(ids[pick])
        available[pick] = False
        sims = vecs @ vecs[pick]
        max_sim = sims if max_sim is None else np.maximum(max_sim, sims)
    return chosen
