"""The ranking metrics against trec_eval itself (pytrec_eval) on a fixed run.

``memory_pipeline.evaluation.metrics`` promises ``trec_eval``'s conventions (BEIR
reports its numbers through ``pytrec_eval``): P_k, recall_k, ndcg_cut_k, success_k
and recip_rank, ties broken by descending document id. Each query of the run below
is an edge case; every metric of every query is compared with the reference.
"""

from __future__ import annotations

import pytest
import pytrec_eval

from memory_pipeline.evaluation.metrics import (
    hit_rate_at_k,
    mean_metrics,
    ndcg_at_k,
    precision_at_k,
    query_metrics,
    rank_by_score,
    recall_at_k,
    reciprocal_rank,
)

K_VALUES = (1, 3, 5, 10)

# query id -> (qrels, retrieval scores)
RUN: dict[str, tuple[dict[str, int], dict[str, float]]] = {
    # binary judgements, one relevant document never retrieved
    "binary": ({"a": 1, "c": 1, "x": 1}, {"a": 0.9, "b": 0.8, "c": 0.7, "d": 0.6}),
    # graded: the best document (grade 3) comes third, grade-0 judgements gain nothing
    "graded": (
        {"g3": 3, "g2": 2, "g1": 1, "z0": 0, "y0": 0},
        {"g1": 0.95, "z0": 0.9, "g3": 0.85, "n1": 0.8, "g2": 0.5, "y0": 0.4},
    ),
    # relevant documents exist, none of them retrieved
    "none_retrieved": ({"r1": 1, "r2": 2}, {"n1": 0.9, "n2": 0.8, "n3": 0.7}),
    # nothing retrieved at all
    "empty_run": ({"r1": 1}, {}),
    # ties: trec_eval orders equal scores by descending id, so "m" (not relevant)
    # comes before "k" (relevant), and "b" before "a": by ascending id P_1 would be 1
    "ties": ({"k": 1, "a": 2}, {"m": 0.5, "k": 0.5, "b": 0.3, "a": 0.3, "c": 0.1}),
    # every retrieved document relevant, fewer than k retrieved
    "all_relevant": ({"p": 1, "r": 2, "s": 1}, {"p": 0.3, "r": 0.2, "s": 0.1}),
    # a long list: the first relevant document at rank 7, the second at rank 12
    "deep": (
        {"d07": 1, "d12": 2},
        {f"d{i:02d}": 1.0 - i / 100 for i in range(1, 16)},
    ),
}
QIDS = list(RUN)

MEASURES = {
    "P": precision_at_k,
    "recall": recall_at_k,
    "ndcg_cut": ndcg_at_k,
    "success": hit_rate_at_k,
}


@pytest.fixture(scope="module")
def reference() -> dict[str, dict[str, float]]:
    cuts = ",".join(map(str, K_VALUES))
    evaluator = pytrec_eval.RelevanceEvaluator(
        {q: qrels for q, (qrels, _) in RUN.items()},
        {f"{m}.{cuts}" for m in MEASURES} | {"recip_rank"},
    )
    return evaluator.evaluate({q: scores for q, (_, scores) in RUN.items()})


def test_every_query_is_evaluated_by_the_reference(
    reference: dict[str, dict[str, float]],
) -> None:
    assert set(reference) == set(RUN)


@pytest.mark.parametrize("k", K_VALUES)
@pytest.mark.parametrize("measure", list(MEASURES))
@pytest.mark.parametrize("qid", QIDS)
def test_metric_at_k_matches_trec_eval(
    reference: dict[str, dict[str, float]], qid: str, measure: str, k: int
) -> None:
    qrels, scores = RUN[qid]
    ours = MEASURES[measure](rank_by_score(scores), qrels, k)
    assert ours == pytest.approx(reference[qid][f"{measure}_{k}"], abs=1e-12)


@pytest.mark.parametrize("qid", QIDS)
def test_reciprocal_rank_matches_trec_eval(
    reference: dict[str, dict[str, float]], qid: str
) -> None:
    qrels, scores = RUN[qid]
    assert reciprocal_rank(rank_by_score(scores), qrels) == pytest.approx(
        reference[qid]["recip_rank"], abs=1e-12
    )


@pytest.mark.parametrize(("qid", "depth"), [(q, d) for q in QIDS for d in (1, 5, 10)])
def test_cut_reciprocal_rank_is_trec_eval_on_the_cut_run(qid: str, depth: int) -> None:
    """MRR cut at a depth equals recip_rank of the run cut to its first ``depth`` documents."""
    qrels, scores = RUN[qid]
    ranking = rank_by_score(scores)
    cut = {d: scores[d] for d in ranking[:depth]}
    evaluator = pytrec_eval.RelevanceEvaluator({qid: qrels}, {"recip_rank"})
    expected = evaluator.evaluate({qid: cut})[qid]["recip_rank"]
    assert reciprocal_rank(ranking, qrels, depth) == pytest.approx(expected, abs=1e-12)


def test_means_over_the_run_match_trec_eval(reference: dict[str, dict[str, float]]) -> None:
    per_query = [
        query_metrics(rank_by_score(scores), rank_by_score(scores), qrels, K_VALUES)
        for qrels, scores in RUN.values()
    ]
    means = mean_metrics(per_query, authority_window=10)
    # query_metrics cuts MRR at max(k) = 10: the "deep" query's first hit (rank 7) counts.
    names = {"precision": "P", "recall": "recall", "ndcg": "ndcg_cut", "hit_rate": "success"}
    for ours, theirs in names.items():
        for k in K_VALUES:
            expected = sum(reference[q][f"{theirs}_{k}"] for q in QIDS) / len(QIDS)
            assert means[f"{ours}@{k}"] == pytest.approx(expected, abs=1e-12), f"{ours}@{k}"
    expected_mrr = sum(reference[q]["recip_rank"] for q in QIDS) / len(QIDS)
    assert means["mrr"] == pytest.approx(expected_mrr, abs=1e-12)


def test_a_query_judged_only_not_relevant_is_left_out_where_trec_eval_scores_zero() -> None:
    """The one documented difference: no relevant document → None, not trec_eval's 0.

    So such a query does not pull the means down (as trec_eval leaves out a query
    absent from the qrels); everything else about it matches.
    """
    qrels, scores = {"a": 0, "b": 0}, {"a": 0.9, "b": 0.8}
    evaluator = pytrec_eval.RelevanceEvaluator({"q": qrels}, {"P.5", "ndcg_cut.5", "recip_rank"})
    assert evaluator.evaluate({"q": scores})["q"] == {
        "P_5": 0.0,
        "ndcg_cut_5": 0.0,
        "recip_rank": 0.0,
    }
    ranking = rank_by_score(scores)
    assert (precision_at_k(ranking, qrels, 5), ndcg_at_k(ranking, qrels, 5)) == (None, None)
    assert reciprocal_rank(ranking, qrels) is None
    judged = query_metrics(ranking, ranking, qrels, K_VALUES)
    other = query_metrics(["x"], ["x"], {"x": 1}, K_VALUES)
    assert mean_metrics([judged, other], 10)["ndcg@5"] == 1.0
