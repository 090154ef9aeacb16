"""The cross-encoder stage, through the real sentence_transformers.CrossEncoder code path.

The model is a tiny BERT whose weights ``tests/tiny_models.py`` sets by construction (no
training): it scores ``HIT_SCORE`` when the passage holds a query word and ``MISS_SCORE``
when it does not, on any CPU, so exact scores and ordering are testable.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from memory_pipeline.errors import InvalidInputError, ModelUnavailableError
from memory_pipeline.search.cross_encoder import (
    RERANKER_ENV_VAR,
    CrossEncoderReranker,
    Reranker,
    load_reranker,
)

try:  # tests/ is imported as a package by some runners and as a plain folder by others
    from tests.tiny_models import HIT_SCORE, MISS_SCORE, build_tiny_cross_encoder, perturbed_copy
except ImportError:  # pragma: no cover - depends on how pytest was started
    from tiny_models import (  # type: ignore[no-redef]
        HIT_SCORE,
        MISS_SCORE,
        build_tiny_cross_encoder,
        perturbed_copy,
    )

# The construction puts every score within ~1e-6 of HIT_SCORE or MISS_SCORE (0.96 apart);
# weights moved by 1e-3 move it by ~1e-4 at most. 1e-2 leaves room for any float kernel.
TOLERANCE = 1e-2

# (query, passage with the query word, passage without it)
RELEVANCE_TRIPLES = [
    ("tea", "alice likes tea in the garden", "bob prefers jazz in the garden"),
    ("jazz", "bob prefers jazz and music", "the kitchen deadline moved to friday"),
    ("mountains", "carol went hiking in the mountains", "carol went hiking in the summer"),
    ("budget", "meetings about the travel budget", "meetings about the travel plans"),
    ("Coffee", "Notes about COFFEE and books.", "Notes about music and books."),
]

# (query, passage, whether some query word is in the passage): what the model computes.
OVERLAP_CASES = [
    ("tea", "tea", True),
    ("tea", "tea " * 5, True),
    ("Alice's TEA?", "the garden of alice", True),  # any query word, after lowercasing
    ("tea jazz", "bob prefers jazz", True),
    ("tea", "teas and teapots", False),  # unknown words are [UNK], which matches nothing
    ("apple", "apple pie", False),
    ("tea", "", False),
    ("", "alice likes tea", False),
    ("the kitchen", "alice likes tea", False),
]


@pytest.fixture(scope="module")
def tiny_ce(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("models") / "tiny-ce")


@pytest.fixture(scope="module")
def reranker(tiny_ce: Path) -> Reranker:
    loaded, status = load_reranker(str(tiny_ce))
    assert loaded is not None, status
    return loaded


def test_tiny_model_folder_loads_in_plain_sentence_transformers(tiny_ce: Path) -> None:
    from sentence_transformers import CrossEncoder

    model = CrossEncoder(str(tiny_ce), device="cpu", local_files_only=True)
    scores = model.predict([("tea", "alice likes tea"), ("tea", "bob likes jazz")])
    assert scores.shape == (2,)
    assert [float(s) for s in scores] == pytest.approx([HIT_SCORE, MISS_SCORE], abs=TOLERANCE)


def test_load_reranker_from_a_local_folder(tiny_ce: Path, reranker: Reranker) -> None:
    assert isinstance(reranker, Reranker)
    assert isinstance(reranker, CrossEncoderReranker)
    assert reranker.name == str(tiny_ce)
    _, status = load_reranker(str(tiny_ce))
    assert "loaded" in status and str(tiny_ce) in status


def test_scores_one_finite_value_per_passage_deterministically(reranker: Reranker) -> None:
    passages = ["alice likes tea", "bob prefers jazz", "", "tea " * 5, "unknownword zebra"]
    first = reranker.score("tea", passages)
    assert len(first) == len(passages)
    assert all(isinstance(s, float) and math.isfinite(s) for s in first)
    assert reranker.score("tea", passages) == first
    # batching must not change the numbers (padding is masked out)
    assert reranker.score("tea", passages[:1]) == pytest.approx(first[:1], abs=1e-6)
    assert reranker.score("tea", []) == []


@pytest.mark.parametrize(("query", "relevant", "irrelevant"), RELEVANCE_TRIPLES)
def test_passage_with_the_query_word_scores_higher(
    reranker: Reranker, query: str, relevant: str, irrelevant: str
) -> None:
    hit, miss = reranker.score(query, [relevant, irrelevant])
    assert (hit, miss) == pytest.approx((HIT_SCORE, MISS_SCORE), abs=TOLERANCE)


@pytest.mark.parametrize(("query", "passage", "overlap"), OVERLAP_CASES)
def test_score_is_whether_the_passage_holds_a_query_word(
    reranker: Reranker, query: str, passage: str, overlap: bool
) -> None:
    [score] = reranker.score(query, [passage])
    assert score == pytest.approx(HIT_SCORE if overlap else MISS_SCORE, abs=TOLERANCE)


@pytest.mark.parametrize(("seed", "threads"), [(1, 1), (2, 2)])
def test_verdicts_survive_perturbed_weights_and_thread_count(
    tiny_ce: Path, tmp_path: Path, seed: int, threads: int
) -> None:
    """Weights moved by +-1e-3 and another thread count stand in for another CPU."""
    import torch

    reranker = CrossEncoderReranker(str(perturbed_copy(tiny_ce, tmp_path / "ce", seed=seed)))
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        scored = [reranker.score(q, [hit, miss]) for q, hit, miss in RELEVANCE_TRIPLES]
    finally:
        torch.set_num_threads(before)
    expected = [[HIT_SCORE, MISS_SCORE]] * len(RELEVANCE_TRIPLES)
    assert scored == [pytest.approx(pair, abs=TOLERANCE) for pair in expected]


def test_long_passages_are_truncated_not_crashing(tiny_ce: Path) -> None:
    # max_length above the model's 512 positions is clamped; 3000 words are truncated.
    reranker = CrossEncoderReranker(str(tiny_ce), max_length=4096, batch_size=2)
    scores = reranker.score("tea", ["tea " * 3000, "bob " * 3000, "jazz"])
    assert scores == pytest.approx([HIT_SCORE, MISS_SCORE, MISS_SCORE], abs=TOLERANCE)


def test_build_is_deterministic_whatever_the_torch_seed(tmp_path: Path) -> None:
    import torch

    torch.manual_seed(0)
    a = build_tiny_cross_encoder(tmp_path / "a")
    torch.manual_seed(1)
    b = build_tiny_cross_encoder(tmp_path / "b")
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    ra, rb = CrossEncoderReranker(str(a)), CrossEncoderReranker(str(b))
    passages = ["alice likes tea", "the garden"]
    assert ra.score("tea", passages) == rb.score("tea", passages)


@pytest.mark.parametrize("configured", [None, "", "   "])
def test_not_configured_is_a_status_not_an_error(configured: str | None) -> None:
    reranker, status = load_reranker(configured)
    assert reranker is None
    assert status == f"no cross-encoder configured (set {RERANKER_ENV_VAR})"


def test_missing_path_is_a_status_not_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    reranker, status = load_reranker(str(missing))
    assert reranker is None
    assert "does not exist" in status and str(missing) in status
    assert RERANKER_ENV_VAR in status


def test_folder_without_a_model_is_a_status_not_an_error(tmp_path: Path) -> None:
    (tmp_path / "readme.txt").write_text("not a model")
    reranker, status = load_reranker(str(tmp_path))
    assert reranker is None
    assert status.startswith("cross-encoder unavailable: cannot load cross-encoder")


def test_uncached_hub_id_fails_fast_offline() -> None:
    reranker, status = load_reranker("example-org/definitely-not-cached-reranker")
    assert reranker is None
    assert "offline" in status


def test_direct_use_raises_model_unavailable_lazily_and_remembers(tmp_path: Path) -> None:
    ce = CrossEncoderReranker(str(tmp_path / "gone"))  # constructing does not load
    assert "not loaded" in repr(ce)
    for _ in range(2):  # the failure is cached, and raised again on the next call
        with pytest.raises(ModelUnavailableError, match="does not exist"):
            ce.score("q", ["p"])
    assert ce.score("q", []) == []  # nothing to score needs no model


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [(("",), {}), (("x",), {"batch_size": 0}), (("x",), {"max_length": 2})],
)
def test_bad_constructor_arguments(args: tuple[str], kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidInputError):
        CrossEncoderReranker(*args, **kwargs)


def test_passing_one_string_instead_of_a_list_is_rejected(reranker: Reranker) -> None:
    with pytest.raises(InvalidInputError, match="not one string"):
        reranker.score("tea", "alice likes tea")
