"""Ranking metrics for one query, and their mean over queries.

Conventions follow ``trec_eval`` (as used by BEIR through ``pytrec_eval``), so numbers
are comparable with published ones:

* A *ranking* is a list of document ids, best first, each id once (a later repeat of an
  id is ignored: a document's rank is that of its best chunk).
* ``qrels`` maps a document id to a graded relevance; a grade ``> 0`` is relevant.
* Ties in retrieval scores are broken as ``trec_eval`` does: by document id, in
  descending string order (:func:`rank_by_score`).
* A query without any relevant document has no Precision, Recall, MRR, nDCG or Hit
  Rate (``None``: it is left out of the means, as ``trec_eval`` skips queries absent
  from the qrels); its noise rate is still defined — everything it returns is noise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

Qrels = Mapping[str, int]


def rank_by_score(scores: Mapping[str, float]) -> list[str]:
    """Ids by descending score; equal scores by descending id (``trec_eval``'s order)."""
    by_id = sorted(scores, reverse=True)
    return sorted(by_id, key=lambda d: -scores[d])


def dedupe(ranking: Iterable[str]) -> list[str]:
    """First occurrence of each id, in order (documents collapsed to their best chunk)."""
    return list(dict.fromkeys(ranking))


def _relevant(qrels: Qrels) -> dict[str, int]:
    return {d: g for d, g in qrels.items() if g > 0}


def precision_at_k(ranking: Sequence[str], qrels: Qrels, k: int) -> float | None:
    """|relevant ∩ top k| / k — divided by k even when fewer than k were returned
    (``trec_eval`` ``P_k``; Manning, Raghavan & Schütze, *Introduction to IR*, §8.3)."""
    rel = _relevant(qrels)
    if not rel:
        return None
    return sum(1 for d in dedupe(ranking)[:k] if d in rel) / k


def recall_at_k(ranking: Sequence[str], qrels: Qrels, k: int) -> float | None:
    """|relevant ∩ top k| / |relevant| (``trec_eval`` ``recall_k``)."""
    rel = _relevant(qrels)
    if not rel:
        return None
    return sum(1 for d in dedupe(ranking)[:k] if d in rel) / len(rel)


def hit_rate_at_k(ranking: Sequence[str], qrels: Qrels, k: int) -> float | None:
    """1 if any relevant document is in the top k, else 0 ("success@k")."""
    rel = _relevant(qrels)
    if not rel:
        return None
    return 1.0 if any(d in rel for d in dedupe(ranking)[:k]) else 0.0


def reciprocal_rank(ranking: Sequence[str], qrels: Qrels, depth: int | None = None) -> float | None:
    """1 / rank of the first relevant document within ``depth`` (0 if none).

    Voorhees, "The TREC-8 Question Answering Track Report", 1999; MRR is its mean.
    """
    rel = _relevant(qrels)
    if not rel:
        return None
    for rank, d in enumerate(dedupe(ranking)[:depth], 1):
        if d in rel:
            return 1.0 / rank
    return 0.0


def ndcg_at_k(ranking: Sequence[str], qrels: Qrels, k: int) -> float | None:
    """Normalised discounted cumulative gain at k, with graded relevance.

    Järvelin & Kekäläinen, "Cumulated gain-based evaluation of IR techniques", ACM TOIS
    2002, in the ``trec_eval`` ``ndcg_cut`` form used by BEIR: linear gain (the grade),
    discount ``log2(rank + 1)``::

        DCG@k  = Σ_{i=1..k} grade(d_i) / log2(i + 1)
        nDCG@k = DCG@k / IDCG@k

    where IDCG@k is the DCG of the judged documents sorted by grade. Negative or zero
    grades gain nothing.
    """
    rel = _relevant(qrels)
    if not rel:
        return None
    dcg = sum(rel.get(d, 0) / math.log2(i + 1) for i, d in enumerate(dedupe(ranking)[:k], 1))
    ideal = sorted(rel.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 1) for i, g in enumerate(ideal, 1))
    return dcg / idcg


def noise_rate(chunk_docs: Sequence[str], qrels: Qrels, k: int) -> float | None:
    """Share of the first k returned *chunks* whose document is not relevant.

    What an agent pays in context for irrelevant material: computed on chunks, not
    on documents, so three chunks of one off-topic document count three times. A
    query that returned nothing has no noise rate (``None``).
    """
    top = list(chunk_docs)[:k]
    if not top:
        return None
    rel = _relevant(qrels)
    return sum(1 for d in top if d not in rel) / len(top)


def authority_rank(ranking: Sequence[str], authority: str, window: int) -> int | None:
    """1-based rank of the authority document if it is within the first ``window``."""
    for rank, d in enumerate(dedupe(ranking)[:window], 1):
        if d == authority:
            return rank
    return None


@dataclass(frozen=True)
class QueryMetrics:
    """Every metric of one query; keys like ``ndcg@10``, ``mrr``, ``noise@5``."""

    values: dict[str, float | None]
    authority_rank: int | None = None
    has_authority: bool = False


def query_metrics(
    ranking: Sequence[str],
    chunk_docs: Sequence[str],
    qrels: Qrels,
    k_values: Sequence[int],
    *,
    doc_qrels: Qrels | None = None,
    authority: str | None = None,
    authority_window: int = 10,
) -> QueryMetrics:
    """All metrics for one query.

    ``ranking`` holds the judged units (documents, or ``doc#chunk`` keys) best first;
    ``chunk_docs`` the document of each returned chunk in order, for the noise rate and
    the authority rank, judged against ``doc_qrels`` (default: ``qrels``). MRR is cut
    at max(k), the depth every other metric sees.
    """
    values: dict[str, float | None] = {}
    docs_judged = qrels if doc_qrels is None else doc_qrels
    for k in k_values:
        values[f"precision@{k}"] = precision_at_k(ranking, qrels, k)
        values[f"recall@{k}"] = recall_at_k(ranking, qrels, k)
        values[f"ndcg@{k}"] = ndcg_at_k(ranking, qrels, k)
        values[f"hit_rate@{k}"] = hit_rate_at_k(ranking, qrels, k)
        values[f"noise@{k}"] = noise_rate(chunk_docs, docs_judged, k)
    values["mrr"] = reciprocal_rank(ranking, qrels, max(k_values))
    rank = authority_rank(chunk_docs, authority, authority_window) if authority else None
    return QueryMetrics(values, rank, authority is not None)


def mean_values(per_query: Iterable[Mapping[str, float | None]]) -> dict[str, float]:
    """Mean of each metric over the queries where it is defined (``None`` skipped)."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for values in per_query:
        for key, v in values.items():
            if v is not None:
                sums[key] = sums.get(key, 0.0) + v
                counts[key] = counts.get(key, 0) + 1
    return {key: sums[key] / counts[key] for key in sums}


def mean_metrics(per_query: Sequence[QueryMetrics], authority_window: int) -> dict[str, float]:
    """Mean of each metric over the queries where it is defined (``None`` skipped).

    Adds ``authority_found`` (share of queries with an authority document that found
    it within the window) and ``authority_mean_rank`` (mean rank where found).
    """
    out = mean_values(q.values for q in per_query)
    with_auth = [q for q in per_query if q.has_authority]
    if with_auth:
        found = [q.authority_rank for q in with_auth if q.authority_rank is not None]
        out[f"authority_found@{authority_window}"] = len(found) / len(with_auth)
        if found:
            out["authority_mean_rank"] = sum(found) / len(found)
    return out
