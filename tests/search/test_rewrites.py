"""Rewrites: other phrasings of the same question, each searched, fused into one ranking.

On a real memory (SQLite file, index folder) with the deterministic hashing embedder,
which knows no synonyms: a word the query lacks can only come in through a rewrite.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.search.fusion import fuse_phrasings, phrasing_weights
from memory_pipeline.search.phrasings import MAX_REWRITES, phrasings
from memory_pipeline.search.run import Run
from memory_pipeline.spaces import DEFAULT_SPACE, Spaces
from memory_pipeline.system import MemorySystem
from memory_pipeline.types import SearchFilters, SearchResult
from tests.conftest import make_settings

NOTES = {
    "car": ("Car maintenance: change the engine oil every ten thousand kilometres.", "garage"),
    "automobile": ("The automobile was invented in 1886 and changed how cities grew.", "history"),
    "garden": ("Water the tomatoes in the garden every morning during summer.", "home"),
    "jazz": ("Bob prefers jazz records to the radio on long evenings.", "music"),
    "coffee": ("Grind the coffee beans just before brewing, never the night before.", "home"),
    "budget": ("The travel budget for the spring trip is two thousand euros.", "travel"),
    "principle": ("Principle: write down every oil change in the car's logbook.", "garage"),
}
QUERY = "automobile upkeep on spring evenings"
NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
KNOBS: dict[str, dict[str, Any]] = {
    "plain": {},
    "memory+mmr": {"enable_memory_rerank": True, "enable_mmr": True},
}

# Recorded from the search before rewrites existed (same corpus, same settings): a search
# without rewrites must still return exactly these chunks with exactly these scores.
BEFORE: dict[tuple[str, str], list[tuple[str | None, float]]] = {
    ("convex", "plain"): [
        ("jazz", 1.0),
        ("budget", 0.5532510614097408),
        ("automobile", 0.4070747185636524),
        ("garden", 0.16666666666666666),
        ("coffee", 0.16666666666666666),
    ],
    ("convex", "memory+mmr"): [
        ("jazz", 0.9000000000000001),
        ("automobile", 0.4849523029945567),
        ("budget", 0.5872757429868186),
        ("coffee", 0.31666666666666665),
        ("garden", 0.31666666666666665),
    ],
    ("rrf", "plain"): [
        ("jazz", 0.03278688524590164),
        ("automobile", 0.03200204813108039),
        ("budget", 0.03200204813108039),
        ("garden", 0.015625),
        ("coffee", 0.015384615384615385),
    ],
    ("rrf", "memory+mmr"): [
        ("jazz", 0.9000000000000001),
        ("automobile", 0.8832437275985663),
        ("budget", 0.8832437275985663),
        ("garden", 0.5335937500000001),
        ("coffee", 0.5284615384615385),
    ],
}


class RecordingReranker:
    """A cross-encoder stand-in that scores by shared words and notes what it was asked."""

    name = "recording"

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.calls.append((query, len(passages)))
        words = set(query.lower().split())
        return [float(len(words & set(p.lower().split()))) for p in passages]


def build(
    tmp_path: Path,
    fusion: str = "convex",
    space: str = DEFAULT_SPACE,
    reranker: RecordingReranker | None = None,
) -> MemorySystem:
    settings = make_settings(tmp_path, fusion=fusion)
    system = MemorySystem(settings, embedder=HashingEmbedder(), reranker=reranker)
    system = system.bound(Spaces.bound(space))
    for title, (text, tag) in NOTES.items():
        meta: dict[str, Any] = {"tags": [tag], "source_date": "2026-01-01"}
        if title == "principle":
            meta |= {"knowledge_type": "principle", "importance": 0.9}
        system.ingest_text(text, title, meta)
    system.update_index()
    return system


@pytest.fixture(params=["convex", "rrf"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemorySystem]:
    system = build(tmp_path, request.param)
    yield system
    system.close()


def search(
    system: MemorySystem,
    query: str = QUERY,
    *,
    filters: SearchFilters | None = None,
    rewrites: Sequence[str] = (),
    **chosen: Any,
) -> SearchResult:
    request = system.settings.search_request(
        **{"top_k": 3, "record_access": False, "now": NOW, **chosen}
    )
    return system.query(query, request, filters=filters, rewrites=rewrites)


def titles(result: SearchResult) -> list[str | None]:
    return [h.title for h in result.hits]


def ranking(result: SearchResult) -> list[tuple[str | None, int, float, dict[str, Any]]]:
    return [(h.title, h.chunk_id, h.score, h.stage_scores) for h in result.hits]


# ------------------------------------------------------------ without rewrites: unchanged
@pytest.mark.parametrize("knobs", list(KNOBS))
def test_no_rewrites_is_the_search_as_before(memory: MemorySystem, knobs: str) -> None:
    fusion = memory.settings.search.fusion
    alone = search(memory, top_k=5, **KNOBS[knobs])
    for same in (
        search(memory, top_k=5, rewrites=(), **KNOBS[knobs]),
        # Repeats of the query (case and spacing aside) are dropped, not searched twice.
        search(
            memory,
            top_k=5,
            rewrites=[" Automobile  UPKEEP on spring EVENINGS", QUERY],
            **KNOBS[knobs],
        ),
    ):
        assert ranking(same) == ranking(alone)
        assert same.stats.phrasings == 1
        assert (same.stats.candidates, same.stats.guaranteed_added) == (
            alone.stats.candidates,
            alone.stats.guaranteed_added,
        )
    assert [(h.title, h.score) for h in alone.hits] == BEFORE[fusion, knobs]
    assert all("phrasings" not in h.stage_scores for h in alone.hits)


# ------------------------------------------------------------------- what rewrites add
def test_a_rewrite_in_the_memory_s_words_finds_what_the_query_misses(
    memory: MemorySystem,
) -> None:
    alone = search(memory)
    assert "car" not in titles(alone)
    found = search(memory, rewrites=["car maintenance engine oil"])
    assert "car" in titles(found) and titles(alone)[0] in titles(found)
    car = next(h for h in found.hits if h.title == "car")
    assert car.stage_scores["phrasings"] == 2  # the query's candidates held it too (dense)
    assert found.stats.phrasings == 2
    assert found.stats.candidates >= alone.stats.candidates


def test_the_query_is_never_outweighed_by_many_weak_rewrites(memory: MemorySystem) -> None:
    weak = ["coffee beans", "tomatoes garden", "grind before brewing", "water every morning"]
    found = search(memory, rewrites=weak, top_k=1)
    assert titles(found) == titles(search(memory, top_k=1))
    assert found.stats.phrasings == 1 + len(weak)


def test_the_cross_encoder_runs_once_against_the_query(tmp_path: Path) -> None:
    reranker = RecordingReranker()
    system = build(tmp_path, reranker=reranker)
    try:
        found = search(system, rewrites=["car maintenance engine oil", "oil logbook"])
        assert [q for q, _ in reranker.calls] == [QUERY]
        assert reranker.calls[0][1] == found.stats.candidates  # the fused pool, each once
        assert all("cross_encoder" in h.stage_scores for h in found.hits)
    finally:
        system.close()


def test_guaranteed_candidates_are_placed_on_the_query_s_share_of_the_scale(
    memory: MemorySystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A principle both retrievers missed joins the pool once, at its place on the query's
    lists; with rewrites that place is weighed as the query is (half), like everything."""
    placed: list[dict[int, float]] = []
    memory_axis = memory.searcher._memory_axis

    def spy(run: Run) -> None:
        placed.append(
            {cid: run.relevance[cid] for cid, x in run.extra.items() if "guaranteed" in x}
        )
        memory_axis(run)

    monkeypatch.setattr(memory.searcher, "_memory_axis", spy)
    for rewrites in ((), ("radio records",)):
        found = search(
            memory, "jazz records evenings", top_k=1, enable_memory_rerank=True, rewrites=rewrites
        )
        assert found.stats.guaranteed_added == 1
    alone, fused = placed
    assert alone.keys() == fused.keys() and len(alone) == 1
    assert {cid: 0.5 * s for cid, s in alone.items()} == fused


# ----------------------------------------------------------- filters and spaces still hold
@pytest.mark.parametrize(
    ("filters", "allowed"),
    [
        (SearchFilters(tags=("home",)), {"garden", "coffee"}),
        (SearchFilters(knowledge_types=("principle",)), {"principle"}),
        (SearchFilters(source_date_from=dt.date(2027, 1, 1)), set()),
    ],
    ids=["tags", "knowledge_type", "nothing-matches"],
)
def test_rewrites_never_bring_in_filtered_out_chunks(
    memory: MemorySystem, filters: SearchFilters, allowed: set[str]
) -> None:
    # Each rewrite names chunks the filter leaves out, and nothing the filter keeps.
    rewrites = ["car maintenance engine oil", "automobile history", "jazz records"]
    for knobs in KNOBS.values():
        found = search(memory, top_k=10, filters=filters, rewrites=rewrites, **knobs)
        assert set(titles(found)) == allowed, knobs


def test_rewrites_stay_in_the_space_the_memory_reads(tmp_path: Path) -> None:
    mine = build(tmp_path, space="mine")
    other = MemorySystem(make_settings(tmp_path), embedder=HashingEmbedder()).bound(
        Spaces.bound("other")
    )
    try:
        other.ingest_text("Secret: the car maintenance budget of the other team.", "secret")
        other.update_index()
        found = search(mine, top_k=10, rewrites=["car maintenance budget", "secret team"])
        assert "secret" not in titles(found) and found.hits
    finally:
        other.close()
        mine.close()


# ------------------------------------------------------------------------- bad rewrites
@pytest.mark.parametrize(
    ("rewrites", "message"),
    [
        (["car", ""], "rewrites[1] must be a non-empty string"),
        (["   "], "rewrites[0] must be a non-empty string"),
        ([None], "rewrites[0] must be a non-empty string"),
        (["car\x00oil"], "rewrites[0]: control character U+0000 at index 3"),
        (["car\x1b[31m"], "rewrites[0]: control character U+001B"),
        (["x"] * (MAX_REWRITES + 1), f"at most {MAX_REWRITES} are allowed, got {MAX_REWRITES + 1}"),
        ("car maintenance", "rewrites must be a list of strings, got str"),
    ],
)
def test_bad_rewrites_are_refused_and_nothing_changes(
    memory: MemorySystem, rewrites: Any, message: str
) -> None:
    before = memory.store.counts()
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        memory.query(QUERY, rewrites=rewrites)  # counts as an access if it ran
    assert memory.store.counts() == before
    assert all(h.access_count == 0 for h in search(memory, top_k=10).hits)


def test_a_multi_line_rewrite_is_a_phrasing_like_a_multi_line_query() -> None:
    assert phrasings("q", ["car\nmaintenance\t"]) == ("q", "car\nmaintenance\t")


# ------------------------------------------------------------------------ the formula
def test_the_query_weighs_as_much_as_all_rewrites_together() -> None:
    assert phrasing_weights(1) == [1.0]
    assert phrasing_weights(2) == [0.5, 0.5]
    assert phrasing_weights(5) == [0.5, 0.125, 0.125, 0.125, 0.125]
    assert sum(phrasing_weights(9)) == pytest.approx(1.0)


def test_fuse_phrasings_is_a_weighted_sum_missing_adding_nothing() -> None:
    query = [(1, 1.0), (2, 0.5)]
    rewrite_a = [(3, 1.0), (2, 0.8), (3, 0.1)]  # a repeated id votes once, at its best
    rewrite_b = [(2, 1.0)]
    fused = dict(fuse_phrasings([query, rewrite_a, rewrite_b]))
    assert fused == {1: 0.5, 2: 0.5 * 0.5 + 0.25 * 0.8 + 0.25 * 1.0, 3: 0.25}
    # A lone query keeps its own scores and order; ties go to the best rank, then the id.
    assert fuse_phrasings([query]) == query
    assert fuse_phrasings([[(5, 1.0)], [(4, 1.0)]]) == [(4, 0.5), (5, 0.5)]


class BatchingEmbedder(HashingEmbedder):
    """The hashing embedder with a batched ``embed_queries``, counting its calls."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []
        self.singles: list[str] = []

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return np.stack([self._vector(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        self.singles.append(text)
        return super().embed_query(text)


def test_every_phrasing_is_embedded_in_one_batch(memory: MemorySystem) -> None:
    embedder = BatchingEmbedder()
    memory.searcher.embedder = embedder
    search(memory, rewrites=["car maintenance", "oil logbook"])
    assert (embedder.batches, embedder.singles) == ([[QUERY, "car maintenance", "oil logbook"]], [])
    search(memory)  # a lone query is embedded as it always was
    assert embedder.singles == [QUERY]
