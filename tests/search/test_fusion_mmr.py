"""Fusion (RRF, convex combination) and Maximal Marginal Relevance against hand-computed answers."""

from __future__ import annotations

import numpy as np
import pytest

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.search.fusion import (
    convex_combination,
    min_max,
    on_scale,
    reciprocal_rank_fusion,
)
from memory_pipeline.search.mmr import mmr_select

# ---------------------------------------------------------------- RRF

RRF_CASES = [
    pytest.param(
        [[1, 2, 3], [3, 1, 4]],
        60,
        None,
        [(1, 1 / 61 + 1 / 62), (3, 1 / 61 + 1 / 63), (2, 1 / 62), (4, 1 / 63)],
        id="two-overlapping-lists",
    ),
    pytest.param(
        # Disjoint lists: same-rank items tie exactly; best rank ties too, so id decides.
        [[20, 10], [40, 30]],
        60,
        None,
        [(20, 1 / 61), (40, 1 / 61), (10, 1 / 62), (30, 1 / 62)],
        id="disjoint-lists-tie-by-id",
    ),
    pytest.param(
        # k=0: id 9 has ranks (2, 6) -> 1/2 + 1/6, id 8 has ranks (3, 3) -> 1/3 + 1/3.
        # Both are 2/3 exactly; 9 reached a better single rank, so it wins despite the id.
        [[1, 9, 8, 2, 3, 4], [5, 6, 8, 10, 11, 9]],
        0,
        None,
        [
            (1, 1.0),
            (5, 1.0),
            (9, 2 / 3),
            (8, 2 / 3),
            (6, 1 / 2),
            (2, 1 / 4),
            (10, 1 / 4),
            (3, 1 / 5),
            (11, 1 / 5),
            (4, 1 / 6),
        ],
        id="equal-scores-tie-by-best-rank",
    ),
    pytest.param(
        # Weighting the second list 4x more flips the unweighted order (1, 3, 2, 4).
        [[1, 2, 3], [3, 1, 4]],
        60,
        [0.5, 2.0],
        [
            (3, 0.5 / 63 + 2 / 61),
            (1, 0.5 / 61 + 2 / 62),
            (4, 2 / 63),
            (2, 0.5 / 62),
        ],
        id="weights",
    ),
    pytest.param([[7, 8, 9]], 0, None, [(7, 1.0), (8, 1 / 2), (9, 1 / 3)], id="single-list"),
    pytest.param(
        # A repeated id inside one list only counts at its first (best) position.
        [[1, 2, 1], [2]],
        60,
        None,
        [(2, 1 / 62 + 1 / 61), (1, 1 / 61)],
        id="duplicate-within-list",
    ),
    pytest.param([], 60, None, [], id="no-lists"),
    pytest.param([[], []], 60, None, [], id="empty-lists"),
    pytest.param([[1, 2], []], 60, [1.0, 3.0], [(1, 1 / 61), (2, 1 / 62)], id="one-empty"),
]


@pytest.mark.parametrize(("rankings", "k", "weights", "expected"), RRF_CASES)
def test_rrf_matches_hand_computed_values(
    rankings: list[list[int]],
    k: int,
    weights: list[float] | None,
    expected: list[tuple[int, float]],
) -> None:
    got = reciprocal_rank_fusion(rankings, k=k, weights=weights)
    assert [doc for doc, _ in got] == [doc for doc, _ in expected]
    assert [score for _, score in got] == pytest.approx([s for _, s in expected], rel=1e-12)


def test_rrf_default_k_is_60() -> None:
    assert reciprocal_rank_fusion([[5]]) == [(5, pytest.approx(1 / 61))]


def test_rrf_accepts_numpy_ids_and_returns_plain_ints() -> None:
    got = reciprocal_rank_fusion([list(np.array([3, 1], dtype=np.int64)), [1]])
    assert [doc for doc, _ in got] == [1, 3]
    assert all(type(doc) is int for doc, _ in got)


def test_rrf_is_independent_of_list_order_except_for_float_rounding() -> None:
    a, b = [4, 2, 9, 1], [9, 4, 7]
    ab = reciprocal_rank_fusion([a, b])
    ba = reciprocal_rank_fusion([b, a])
    assert [d for d, _ in ab] == [d for d, _ in ba]
    assert [s for _, s in ab] == pytest.approx([s for _, s in ba])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"weights": [1.0]}, "1 weights for 2 lists"),
        ({"weights": [1.0, -0.5]}, ">= 0"),
        ({"weights": [1.0, float("nan")]}, "finite"),
        ({"k": -1}, "k must be an integer >= 0"),
        ({"k": 1.5}, "k must be an integer >= 0"),
    ],
)
def test_rrf_rejects_bad_arguments(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        reciprocal_rank_fusion([[1], [2]], **kwargs)  # type: ignore[arg-type]


# ------------------------------------------------------- convex combination


def test_min_max_maps_best_to_one_and_worst_to_zero() -> None:
    assert min_max([(7, 12.0), (3, 9.0), (5, 6.0)]) == {7: 1.0, 3: 0.5, 5: 0.0}
    assert min_max([(1, 0.3), (2, 0.3)]) == {1: 1.0, 2: 1.0}  # no spread: all equal
    assert min_max([]) == {}
    # A repeated id keeps its first (best) position's score.
    assert min_max([(1, 4.0), (2, 2.0), (1, 0.0)]) == {1: 1.0, 2: 0.0}


def test_convex_combination_matches_hand_computed_values() -> None:
    dense = [(1, 0.90), (2, 0.85), (3, 0.80)]  # normalised 1, 0.5, 0
    sparse = [(3, 20.0), (4, 12.0), (1, 10.0)]  # normalised 1, 0.2, 0
    fused = convex_combination([dense, sparse])
    # 1 and 3 tie at 0.5 and both reached rank 1 somewhere: the lower id wins.
    expected = [(1, 0.5), (3, 0.5), (2, 0.25), (4, 0.1)]
    assert [i for i, _ in fused] == [i for i, _ in expected]
    assert [s for _, s in fused] == pytest.approx([s for _, s in expected])


def test_convex_combination_keeps_a_confident_first_hit_that_rrf_overrules() -> None:
    # BM25 is sure of 10 (far ahead); dense mildly prefers 20 and ranks 10 third.
    dense = [(20, 0.84), (30, 0.83), (10, 0.82), (40, 0.70)]
    sparse = [(10, 30.0), (20, 11.0), (40, 10.5), (30, 10.0)]
    assert convex_combination([dense, sparse])[0][0] == 10
    assert reciprocal_rank_fusion([[i for i, _ in dense], [i for i, _ in sparse]])[0][0] == 20


def test_convex_combination_weights_are_rescaled_to_sum_to_one() -> None:
    dense = [(1, 1.0), (2, 0.0)]
    sparse = [(2, 5.0), (1, 1.0)]
    fused = dict(convex_combination([dense, sparse], weights=[3, 1]))
    assert fused == pytest.approx({1: 0.75, 2: 0.25})
    assert convex_combination([dense, sparse], weights=[1, 0])[0][0] == 1
    assert convex_combination([]) == []
    assert convex_combination([[], []]) == []


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        ([1.0], "1 weights for 2 lists"),
        ([1.0, -1.0], ">= 0"),
        ([0.0, 0.0], "all be 0"),
        ([float("nan"), 1.0], "finite"),
    ],
)
def test_convex_combination_rejects_bad_weights(weights: list[float], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        convex_combination([[(1, 1.0)], [(1, 1.0)]], weights=weights)


def test_on_scale_places_an_outside_score_on_the_lists_scale() -> None:
    scored = [(1, 0.9), (2, 0.7)]
    assert on_scale([0.8], scored) == [pytest.approx(0.5)]
    assert on_scale([0.6], scored) == [pytest.approx(-0.5)]  # below the worst: negative, ordered
    assert on_scale([0.5], []) == [0.0]


# ---------------------------------------------------------------- MMR


def _unit(rows: list[list[float]]) -> np.ndarray:
    m = np.asarray(rows, dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _reference_mmr(
    ids: list[int], rel: list[float], vecs: np.ndarray, k: int, lam: float
) -> list[int]:
    """Textbook loop-over-pairs MMR, to check the vectorised version against."""
    r = np.asarray(rel, dtype=np.float64)
    r = (r - r.min()) / (r.max() - r.min()) if r.max() > r.min() else np.ones(len(r))
    v = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    chosen: list[int] = []
    left = list(range(len(ids)))
    while left and len(chosen) < k:

        def mmr(i: int) -> float:
            div = max((float(v[i] @ v[j]) for j in chosen), default=0.0)
            return lam * r[i] - (1 - lam) * div

        best = max(left, key=lambda i: (mmr(i), -i))
        chosen.append(best)
        left.remove(best)
    return [ids[i] for i in chosen]


def test_mmr_lambda_one_is_relevance_order() -> None:
    rng = np.random.default_rng(0)
    ids = [10, 11, 12, 13, 14, 15]
    rel = [0.2, 0.9, 0.5, 0.9, -3.0, 0.7]  # a tie (11, 13): earlier candidate first
    vecs = _unit(rng.normal(size=(6, 8)).tolist())
    assert mmr_select(ids, rel, vecs, k=6, lambda_=1.0) == [11, 13, 15, 12, 10, 14]
    assert mmr_select(ids, rel, vecs, k=2, lambda_=1.0) == [11, 13]


@pytest.mark.parametrize("near", [False, True], ids=["exact-duplicate", "near-duplicate"])
def test_mmr_pushes_the_duplicate_down(near: bool) -> None:
    # 2 repeats 1 (exactly, or almost); 3 is different but much less relevant.
    # Normalised relevance: 1 -> 1.0, 2 -> 0.9, 3 -> 0.0. At λ=0.5 after picking 1:
    #   2: 0.5*0.9 - 0.5*~1.0 ≈ -0.05     3: 0.5*0.0 - 0.5*0.0 = 0   -> 3 before 2.
    dup = [1.0, 0.0, 0.01] if near else [1.0, 0.0, 0.0]
    vecs = _unit([[1.0, 0.0, 0.0], dup, [0.0, 1.0, 0.0]])
    ids, rel = [1, 2, 3], [1.0, 0.95, 0.5]
    assert mmr_select(ids, rel, vecs, k=3, lambda_=1.0) == [1, 2, 3]
    assert mmr_select(ids, rel, vecs, k=3, lambda_=0.5) == [1, 3, 2]
    assert mmr_select(ids, rel, vecs, k=2, lambda_=0.5) == [1, 3]


def test_mmr_k_larger_than_pool_returns_everything_once() -> None:
    vecs = _unit([[1, 0], [0, 1], [1, 1]])
    got = mmr_select([5, 6, 7], [3.0, 2.0, 1.0], vecs, k=10, lambda_=0.7)
    assert sorted(got) == [5, 6, 7]
    assert got[0] == 5


def test_mmr_empty_inputs_and_zero_k() -> None:
    assert mmr_select([], [], np.zeros((0, 4), dtype=np.float32), k=5) == []
    assert mmr_select([1, 2], [1.0, 0.5], _unit([[1, 0], [0, 1]]), k=0) == []


def test_mmr_relevance_scale_does_not_change_the_choice() -> None:
    rng = np.random.default_rng(1)
    ids = list(range(20))
    rel = rng.random(20).tolist()
    vecs = _unit(rng.normal(size=(20, 16)).tolist())
    base = mmr_select(ids, rel, vecs, k=8, lambda_=0.6)
    rescaled = [1000.0 * r - 42.0 for r in rel]
    assert mmr_select(ids, rescaled, vecs, k=8, lambda_=0.6) == base


def test_mmr_constant_relevance_spreads_out() -> None:
    # Equal relevance: after the first pick only diversity matters, so the orthogonal
    # vector beats the two that point almost the same way as the first.
    vecs = _unit([[1, 0], [1, 0.05], [0, 1], [1, 0.1]])
    assert mmr_select([1, 2, 3, 4], [0.5] * 4, vecs, k=2, lambda_=0.7) == [1, 3]


def test_mmr_normalises_non_unit_vectors() -> None:
    rng = np.random.default_rng(2)
    vecs = rng.normal(size=(12, 6))
    rel = rng.random(12).tolist()
    ids = list(range(100, 112))
    scaled = vecs * rng.uniform(0.1, 50.0, size=(12, 1))
    assert mmr_select(ids, rel, scaled, k=6, lambda_=0.5) == mmr_select(
        ids, rel, _unit(vecs.tolist()), k=6, lambda_=0.5
    )


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("lam", [0.0, 0.3, 0.7, 1.0])
def test_mmr_matches_reference_loop(seed: int, lam: float) -> None:
    rng = np.random.default_rng(seed)
    n = 25
    vecs = rng.normal(size=(n, 12))
    vecs[5] = vecs[3]  # an exact duplicate in every pool
    ids = [int(i) for i in rng.permutation(1000)[:n]]
    rel = rng.normal(size=n).tolist()
    assert mmr_select(ids, rel, vecs, k=10, lambda_=lam) == _reference_mmr(ids, rel, vecs, 10, lam)


@pytest.mark.parametrize(
    ("ids", "rel", "vecs", "kwargs", "match"),
    [
        ([1, 2], [1.0], np.eye(2), {"k": 1}, "1 relevance scores for 2"),
        ([1, 2], [1.0, 0.0], np.eye(3), {"k": 1}, "shape"),
        ([1, 1], [1.0, 0.0], np.eye(2), {"k": 1}, "distinct"),
        ([1, 2], [1.0, float("nan")], np.eye(2), {"k": 1}, "finite"),
        ([1, 2], [1.0, 0.0], np.eye(2), {"k": -1}, "k must be"),
        ([1, 2], [1.0, 0.0], np.eye(2), {"k": 1, "lambda_": 1.5}, r"\[0, 1\]"),
    ],
)
def test_mmr_rejects_bad_arguments(
    ids: list[int], rel: list[float], vecs: np.ndarray, kwargs: dict[str, object], match: str
) -> None:
    with pytest.raises(InvalidInputError, match=match):
        mmr_select(ids, rel, vecs, **kwargs)  # type: ignore[arg-type]
