"""The memory axis: one formula, staged, on pure values and on real stored chunks."""

from __future__ import annotations

import datetime as dt
import itertools
from pathlib import Path
from typing import Any

import pytest

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.memory.scoring import (
    CutReason,
    MemoryFields,
    MemoryParams,
    decay_factor,
    forgetting_verdict,
    memory_score,
)
from memory_pipeline.system import MemorySystem
from memory_pipeline.types import SearchFilters
from tests.conftest import make_settings

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


def fields(
    kind: str | None, days_old: float, *, importance: float | None = None, accesses: int = 0
) -> MemoryFields:
    born = NOW - dt.timedelta(days=days_old)
    return MemoryFields(kind, importance, accesses, born, None)


@pytest.mark.parametrize(("kind", "half_life"), [("paper", 180), ("news", 30), ("experiment", 90)])
def test_decay_halves_at_the_half_life(kind: str, half_life: float) -> None:
    params = MemoryParams()
    fresh = memory_score(fields(kind, 0), params, NOW)
    half = memory_score(fields(kind, half_life), params, NOW)
    quarter = memory_score(fields(kind, 2 * half_life), params, NOW)
    assert fresh.decay == pytest.approx(1.0)
    assert half.decay == pytest.approx(0.5)
    assert quarter.decay == pytest.approx(0.25)


@pytest.mark.parametrize("years", [0, 1, 5, 10])
def test_principle_is_flat_over_ten_years(years: int) -> None:
    s = memory_score(fields("principle", 365.25 * years), MemoryParams(), NOW)
    assert s.decay == 1.0 and s.score == pytest.approx(MemoryParams().time_weight)


def test_source_date_wins_over_created_at() -> None:
    f = MemoryFields("news", None, 0, NOW, (NOW - dt.timedelta(days=30)).date())
    assert memory_score(f, MemoryParams(), NOW).decay == pytest.approx(0.5, rel=0.05)


@pytest.mark.parametrize("threshold", [0.0, 0.5, 0.99, 1.0])
def test_unset_importance_passes_any_cutoff(threshold: float) -> None:
    s = memory_score(fields("news", 1), MemoryParams(importance_threshold=threshold), NOW)
    assert s.cut is None and s.score is not None


@pytest.mark.parametrize(
    ("importance", "cut"), [(0.1, True), (0.49, True), (0.5, False), (0.9, False)]
)
def test_low_importance_is_cut_even_for_principles(importance: float, cut: bool) -> None:
    s = memory_score(
        fields("principle", 0, importance=importance), MemoryParams(importance_threshold=0.5), NOW
    )
    assert (s.cut is CutReason.IMPORTANCE) is cut
    assert (s.score is None) is cut


@pytest.mark.parametrize("kind", ["principle", "paper", "news", "experiment", None])
@pytest.mark.parametrize("relevance", [0.0, 0.3, 1.0])
def test_more_accesses_never_lower_a_score(kind: str | None, relevance: float) -> None:
    params = MemoryParams()
    scores = [
        memory_score(fields(kind, 100, accesses=n), params, NOW, relevance).score
        for n in (0, 1, 2, 5, 10, 100, 10_000)
    ]
    assert all(a is not None and b is not None and b >= a for a, b in itertools.pairwise(scores))
    assert scores[-1] is not None and scores[-1] <= 1.0 + 1e-12


def test_half_life_overrides_and_bad_params() -> None:
    params = MemoryParams(half_life_overrides={"news": 7.0, "principle": 365.0})
    assert decay_factor(params.half_life("news"), 7) == pytest.approx(0.5)
    assert params.half_life("principle") == 365.0
    with pytest.raises(InvalidInputError, match="time_weight"):
        MemoryParams(time_weight=1.5)
    with pytest.raises(InvalidInputError, match="≤ 1"):
        MemoryParams(time_weight=0.7, freq_weight=0.5)
    with pytest.raises(InvalidInputError, match="unknown knowledge_type"):
        MemoryParams(half_life_overrides={"blog": 3.0})


# --------------------------------------------------------------- real chunks
BODY = "The quarterly widget calibration uses a torque of twelve newton metres."


def ingest_same_text(memory: MemorySystem, title: str, meta: dict[str, object]) -> str:
    # Same body, a title the query does not mention: equally relevant chunks.
    result = memory.ingest_text(f"{title}\n\n{BODY}", title=title, metadata=meta)
    return result.doc_id


@pytest.fixture
def aged(system: MemorySystem) -> dict[str, str]:
    two_years = (NOW - dt.timedelta(days=730)).date().isoformat()
    docs = {
        "news_old": ingest_same_text(
            system, "Bulletin A", {"knowledge_type": "news", "source_date": two_years}
        ),
        "news_fresh": ingest_same_text(
            system, "Bulletin B", {"knowledge_type": "news", "source_date": NOW.date().isoformat()}
        ),
        "principle_old": ingest_same_text(
            system, "Rule C", {"knowledge_type": "principle", "source_date": two_years}
        ),
    }
    system.update_index()
    return docs


def order(system: MemorySystem, **chosen: Any) -> list[str]:
    request = system.settings.search_request(top_k=3, record_access=False, now=NOW, **chosen)
    hits = system.query("widget calibration torque", request).hits
    return [h.doc_id for h in hits]


def test_fresh_news_outranks_old_news_and_old_principle_keeps_its_place(
    system: MemorySystem, aged: dict[str, str]
) -> None:
    ranked = order(system, enable_memory_rerank=True)
    assert ranked.index(aged["news_fresh"]) < ranked.index(aged["news_old"])
    assert ranked.index(aged["principle_old"]) < ranked.index(aged["news_old"])
    assert ranked[-1] == aged["news_old"]
    hit = system.query(
        "widget calibration torque",
        system.settings.search_request(top_k=3, enable_memory_rerank=True, now=NOW),
    ).hits
    old = next(h for h in hit if h.doc_id == aged["news_old"])
    assert old.stage_scores["decay"] == pytest.approx(0.5 ** (730 / 30), abs=1e-6)


def test_importance_threshold_in_query(system: MemorySystem, aged: dict[str, str]) -> None:
    chunk = system.get_document_chunks(aged["news_fresh"])[0]
    system.set_chunk_tags(aged["news_fresh"], chunk.chunk_index, importance=0.1)
    memory = system.settings.memory_params(importance_threshold=0.5)
    ranked = order(system, enable_memory_rerank=True, memory=memory)
    assert aged["news_fresh"] not in ranked
    assert aged["news_fresh"] in order(system)  # without the memory axis nothing is cut


def test_standalone_rerank_reorders_given_hits(system: MemorySystem, aged: dict[str, str]) -> None:
    hits = system.query(
        "widget calibration torque",
        system.settings.search_request(top_k=3, record_access=False, now=NOW),
    ).hits
    reranked = system.rerank(
        hits, system.settings.memory_params(time_weight=0.5, freq_weight=0.0), now=NOW
    )
    assert reranked[-1].doc_id == aged["news_old"]
    assert all("memory" in h.stage_scores for h in reranked)
    with pytest.raises(InvalidInputError):
        system.rerank(hits, system.settings.memory_params(time_weight=2.0))


def test_guaranteed_principle_joins_the_pool_within_filters(tmp_path: Path) -> None:
    from memory_pipeline.embedding.base import HashingEmbedder

    memory = MemorySystem(make_settings(tmp_path, top_n=3), embedder=HashingEmbedder())
    for i in range(12):
        memory.ingest_text(
            f"Note {i}\n\nbudget meeting agenda item number {i}",
            title=f"n{i}",
            metadata={"knowledge_type": "news", "tags": ["team"]},
        )
    rule = memory.ingest_text(
        "Rule\n\nKeep every decision written down.",
        title="rule",
        metadata={"knowledge_type": "principle", "tags": ["team"]},
    )
    other = memory.ingest_text(
        "Other\n\nNever store secrets in notes.",
        title="other",
        metadata={"knowledge_type": "principle", "tags": ["private"]},
    )
    memory.update_index()

    plain = memory.query(
        "budget meeting agenda", memory.settings.search_request(top_k=10, record_access=False)
    )
    assert rule.doc_id not in [h.doc_id for h in plain.hits]  # missed by both retrievers at top_n=3
    res = memory.query(
        "budget meeting agenda",
        memory.settings.search_request(top_k=10, record_access=False, enable_memory_rerank=True),
        filters=SearchFilters(tags=("team",)),
    )
    docs = [h.doc_id for h in res.hits]
    assert (
        rule.doc_id in docs and other.doc_id not in docs
    )  # guaranteed, but only within the filters
    assert docs[0] != rule.doc_id  # scored like everyone else, not forced to the top
    assert res.stats.guaranteed_added >= 1
    assert next(h for h in res.hits if h.doc_id == rule.doc_id).stage_scores["guaranteed"] == 1
    memory.close()


# ----------------------------------------------------------- forgetting verdict
GRACE_CASES: list[tuple[str, float, float | None, float, CutReason | None]] = [
    # (case, days since created, days since last access, grace days, reason)
    ("ingested minutes ago", 0.01, None, 30, None),
    ("ingested inside the grace", 29, None, 30, None),
    ("ingested before the grace", 31, None, 30, CutReason.SCORE),
    ("accessed inside the grace", 400, 10, 30, None),
    ("accessed before the grace", 400, 31, 30, CutReason.SCORE),
    ("no grace", 0.01, None, 0, CutReason.SCORE),
    ("no grace, created after now", -1, None, 0, CutReason.SCORE),
    ("created after now counts as fresh", -1, None, 30, None),
]


@pytest.mark.parametrize(
    ("case", "created", "accessed", "grace", "reason"), GRACE_CASES, ids=[c[0] for c in GRACE_CASES]
)
def test_forgetting_verdict_grace(
    case: str, created: float, accessed: float | None, grace: float, reason: CutReason | None
) -> None:
    """A paper written 667 days ago: its decay alone makes it a candidate, unless in grace."""
    f = MemoryFields(
        "paper",
        None,
        0,
        NOW - dt.timedelta(days=created),
        (NOW - dt.timedelta(days=667)).date(),
        None if accessed is None else NOW - dt.timedelta(days=accessed),
    )
    params = MemoryParams()
    verdict = forgetting_verdict(f, params, NOW, score_threshold=0.05, grace_days=grace)
    assert verdict.reason == reason
    assert verdict.memory == memory_score(f, params, NOW)  # the grace never changes a score


def test_forgetting_verdict_importance_cut_ignores_grace() -> None:
    f = MemoryFields("principle", 0.05, 0, NOW, None)
    verdict = forgetting_verdict(
        f, MemoryParams(importance_threshold=0.1), NOW, score_threshold=0.05, grace_days=30
    )
    assert verdict.reason == CutReason.IMPORTANCE
