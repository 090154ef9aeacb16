"""Every metric against hand-computed values (ties, empty judgements, graded nDCG)."""

from __future__ import annotations

import math

import pytest

from memory_pipeline.evaluation.metrics import (
    QueryMetrics,
    authority_rank,
    dedupe,
    hit_rate_at_k,
    mean_metrics,
    ndcg_at_k,
    noise_rate,
    precision_at_k,
    query_metrics,
    rank_by_score,
    recall_at_k,
    reciprocal_rank,
)

RANKING = ["a", "b", "c", "d"]
QRELS = {"a": 1, "c": 1, "x": 1, "z": 0}  # x never retrieved, z judged not relevant


@pytest.mark.parametrize(
    ("k", "expected"),
    [(1, 1.0), (2, 0.5), (3, 2 / 3), (4, 0.5), (5, 2 / 5), (10, 2 / 10)],
)
def test_precision_divides_by_k_even_past_the_list(k: int, expected: float) -> None:
    assert precision_at_k(RANKING, QRELS, k) == pytest.approx(expected)


@pytest.mark.parametrize(("k", "expected"), [(1, 1 / 3), (2, 1 / 3), (3, 2 / 3), (10, 2 / 3)])
def test_recall_counts_unretrieved_relevant_documents(k: int, expected: float) -> None:
    assert recall_at_k(RANKING, QRELS, k) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("ranking", "k", "expected"),
    [(["b", "a"], 1, 0.0), (["b", "a"], 2, 1.0), ([], 5, 0.0), (["z", "d"], 5, 0.0)],
)
def test_hit_rate(ranking: list[str], k: int, expected: float) -> None:
    assert hit_rate_at_k(ranking, QRELS, k) == expected


@pytest.mark.parametrize(
    ("ranking", "depth", "expected"),
    [
        (["a"], None, 1.0),
        (["b", "d", "c"], None, 1 / 3),
        (["b", "d", "c"], 2, 0.0),  # the first relevant one is past the cut
        (["z", "b"], None, 0.0),  # a grade of 0 is not relevant
        ([], None, 0.0),
    ],
)
def test_reciprocal_rank(ranking: list[str], depth: int | None, expected: float) -> None:
    assert reciprocal_rank(ranking, QRELS, depth) == pytest.approx(expected)


def test_ndcg_graded_by_hand() -> None:
    qrels = {"a": 1, "b": 2, "c": 0, "d": 3}
    # DCG@3 = 1/log2(2) + 2/log2(3) + 0 ; IDCG@3 = 3/log2(2) + 2/log2(3) + 1/log2(4)
    dcg = 1 + 2 / math.log2(3)
    idcg = 3 + 2 / math.log2(3) + 0.5
    assert ndcg_at_k(["a", "b", "c"], qrels, 3) == pytest.approx(dcg / idcg)
    assert ndcg_at_k(["a", "b", "c"], qrels, 3) == pytest.approx(0.474995, abs=1e-6)
    # @1: gain 1 against the ideal 3
    assert ndcg_at_k(["a", "b", "c"], qrels, 1) == pytest.approx(1 / 3)
    # the ideal order scores exactly 1
    assert ndcg_at_k(["d", "b", "a"], qrels, 3) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("ranking", "k", "expected"),
    [
        (["x", "a"], 2, 1 / math.log2(3)),
        (["a"], 1, 1.0),
        (["x", "y"], 2, 0.0),
        # two relevant documents, one found at rank 2: IDCG@5 = 1 + 1/log2(3)
        (["x", "b"], 5, (1 / math.log2(3)) / (1 + 1 / math.log2(3))),
    ],
)
def test_ndcg_binary(ranking: list[str], k: int, expected: float) -> None:
    qrels = {"a": 1} if k < 5 else {"a": 1, "b": 1}
    assert ndcg_at_k(ranking, qrels, k) == pytest.approx(expected)


def test_repeated_documents_count_once_at_their_best_rank() -> None:
    assert dedupe(["a", "a", "b", "a", "c"]) == ["a", "b", "c"]
    assert precision_at_k(["a", "a", "c"], QRELS, 2) == pytest.approx(1.0)
    assert reciprocal_rank(["b", "b", "a"], QRELS) == pytest.approx(0.5)
    assert ndcg_at_k(["a", "a", "x"], {"a": 1, "x": 1}, 2) == pytest.approx(1.0)


def test_ties_are_broken_by_descending_id_as_trec_eval_does() -> None:
    ranking = rank_by_score({"d1": 0.5, "d2": 0.5, "d3": 0.9, "d0": 0.1})
    assert ranking == ["d3", "d2", "d1", "d0"]
    assert reciprocal_rank(ranking, {"d1": 1}) == pytest.approx(1 / 3)
    assert precision_at_k(ranking, {"d1": 1}, 2) == 0.0


def test_query_without_relevant_documents_has_no_relevance_metrics() -> None:
    for qrels in ({}, {"a": 0}):
        assert precision_at_k(["a"], qrels, 1) is None
        assert recall_at_k(["a"], qrels, 1) is None
        assert ndcg_at_k(["a"], qrels, 1) is None
        assert hit_rate_at_k(["a"], qrels, 1) is None
        assert reciprocal_rank(["a"], qrels) is None
        # ... but everything it returned is noise
        assert noise_rate(["a", "b"], qrels, 5) == 1.0
    assert noise_rate([], {}, 5) is None


@pytest.mark.parametrize(("k", "expected"), [(1, 0.0), (2, 0.0), (3, 1 / 3), (4, 0.5), (10, 0.5)])
def test_noise_rate_counts_chunks(k: int, expected: float) -> None:
    # chunks of documents a, a, x, b with only a relevant
    assert noise_rate(["a", "a", "x", "b"], {"a": 1, "c": 1}, k) == pytest.approx(expected)


def test_authority_rank_within_window() -> None:
    assert authority_rank(["b", "b", "a"], "a", 10) == 2
    assert authority_rank(["b", "c", "a"], "a", 2) is None
    assert authority_rank([], "a", 10) is None


def test_query_metrics_and_means() -> None:
    q1 = query_metrics(["a", "b"], ["a", "a", "b"], {"a": 1}, [1, 2], authority="b")
    assert q1.values["precision@1"] == 1.0
    assert q1.values["recall@2"] == 1.0
    assert q1.values["mrr"] == 1.0
    assert q1.values["noise@2"] == 0.0  # two chunks of a
    assert q1.values["noise@1"] == 0.0
    assert q1.authority_rank == 2
    q2 = query_metrics(["b", "a"], ["b", "a"], {"a": 2}, [1, 2], authority="c")
    assert q2.values["mrr"] == 0.5
    assert q2.values["ndcg@2"] == pytest.approx(1 / math.log2(3))
    assert q2.authority_rank is None
    empty = query_metrics(["b"], ["b"], {}, [1, 2])
    means = mean_metrics([q1, q2, empty], authority_window=10)
    assert means["mrr"] == pytest.approx(0.75)  # the unjudged query is left out
    assert means["ndcg@2"] == pytest.approx((1 + 1 / math.log2(3)) / 2)
    assert means["noise@1"] == pytest.approx((0 + 1 + 1) / 3)  # noise counts it
    assert means["authority_found@10"] == 0.5
    assert means["authority_mean_rank"] == 2.0
    assert "authority_found@10" not in mean_metrics([empty], 10)


def test_chunk_level_judgement_uses_document_qrels_for_noise() -> None:
    m = query_metrics(["d1#2", "d1#0"], ["d1", "d1"], {"d1#2": 1}, [1, 2], doc_qrels={"d1": 1})
    assert m.values["precision@2"] == 0.5
    assert m.values["noise@2"] == 0.0
    assert isinstance(m, QueryMetrics)
