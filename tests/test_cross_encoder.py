"""The cross-encoder stage, through the real sentence_transformers.CrossEncoder code path.

The model is a tiny BERT built and trained offline by ``tests/tiny_models.py`` in a few
seconds; it has learned "the passage contains the query word", so ordering is testable.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from memory_pipeline.errors import InvalidInputError, ModelUnavailableError
from memory_pipeline.search.rerank import (
    RERANKER_ENV_VAR,
    CrossEncoderReranker,
    Reranker,
    load_reranker,
)

try:  # tests/ is imported as a package by some runners and as a plain folder by others
    from tests.tiny_models import build_tiny_cross_encoder
except ImportError:  # pragma: no cover - depends on how pytest was started
    from tiny_models import build_tiny_cross_encoder  # type: ignore[no-redef]

# (query, passage with the query word, passage without it)
RELEVANCE_TRIPLES = [
    ("tea", "alice likes tea in the garden", "bob prefers jazz in the garden"),
    ("jazz", "bob prefers jazz and music", "the kitchen deadline moved to friday"),
    ("mountains", "carol went hiking in the mountains", "carol went hiking in the summer"),
    ("budget", "meetings about the travel budget", "meetings about the travel plans"),
    ("Coffee", "Notes about COFFEE and books.", "Notes about music and books."),
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

    info = json.loads((tiny_ce / "tiny_model_info.json").read_text())
    assert info["heldout_accuracy"] >= 0.95, info
    model = CrossEncoder(str(tiny_ce), device="cpu", local_files_only=True)
    scores = model.predict([("tea", "alice likes tea"), ("tea", "bob likes jazz")])
    assert scores.shape == (2,)
    assert all(math.isfinite(float(s)) for s in scores)


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
    assert hit > miss + 0.5, (hit, miss)


def test_long_passages_are_truncated_not_crashing(tiny_ce: Path) -> None:
    # max_length above the model's 512 positions is clamped; 3000 words are truncated.
    reranker = CrossEncoderReranker(str(tiny_ce), max_length=4096, batch_size=2)
    scores = reranker.score("tea", ["tea " * 3000, "bob " * 3000, "jazz"])
    assert len(scores) == 3 and all(math.isfinite(s) for s in scores)


def test_untrained_build_is_deterministic(tmp_path: Path) -> None:
    a = build_tiny_cross_encoder(tmp_path / "a", train=False)
    b = build_tiny_cross_encoder(tmp_path / "b", train=False)
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
