"""A speaker named in the query ("What does Sam play?") prefers the turns that speaker said.

The conversation is built so that, without the stage, Ana's question to Sam (it holds
"Sam" and "play" twice) ranks above Sam's answer. The boost multiplies the relevance of
Sam's turns by ``1 + w``; so Sam's answer rises above Ana's question exactly when ``w``
covers the gap between their relevance without the stage, whatever the embedder makes of
the words. The tests measure that gap first and assert what follows from it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.index.tokenizer import tokenize
from memory_pipeline.memory.scoring import boosted, normalise_relevance
from memory_pipeline.memory.who import said_by, speakers_named
from memory_pipeline.search.params import DEFAULT_SPEAKER_BOOST, MAX_SPEAKER_BOOST, SearchRequest
from memory_pipeline.sources.transcripts import parse_transcript
from memory_pipeline.system import MemorySystem
from memory_pipeline.types import SearchHit, Turn
from tests.conftest import make_settings

TURNS = [  # turn id, speaker, text
    ("ask", "Ana", "Sam, do you play an instrument? I play the clarinet."),
    ("answer", "Sam", "I play the violin in a band."),
    ("weather", "Ana", "Lovely. The weather is nice today."),
    ("sunny", "Sam", "It is sunny and warm here."),
]
BAND = {
    "conversation_id": "band",
    "sessions": [
        {
            "session_id": "1",
            "date": "2023-05-08",
            "turns": [{"turn_id": i, "speaker": who, "text": text} for i, who, text in TURNS],
        }
    ],
}
QUESTION = "What does Sam play?"
LIFT = 0.1  # the weight measured on LoCoMo (docs/conversations.md)


@pytest.fixture(scope="module")
def band(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemorySystem]:
    root = tmp_path_factory.mktemp("band")
    path = root / "band.json"
    path.write_text(json.dumps(BAND), encoding="utf-8")
    # No neighbours in the index text: each turn is found by its own words.
    settings = make_settings(root, turn_context_before=0, turn_context_after=0)
    memory = MemorySystem(settings, embedder=HashingEmbedder())
    for session in parse_transcript(path):
        memory.ingest_loaded([session.to_loaded()], session.metadata(), update_index=False)
    memory.update_index()
    yield memory
    memory.close()


def _hits(memory: MemorySystem, query: str, weight: float) -> list[SearchHit]:
    request = memory.settings.search_request(top_k=4, record_access=False, speaker_boost=weight)
    return memory.query(query, request).hits


def _order(hits: list[SearchHit]) -> list[str]:
    return [h.turns[0].turn_id for h in hits]


def test_without_the_stage_the_question_to_sam_ranks_above_his_answer(band: MemorySystem) -> None:
    hits = _hits(band, QUESTION, 0.0)
    assert _order(hits)[:2] == ["ask", "answer"]
    assert all("speaker_match" not in h.stage_scores for h in hits)


def test_each_turn_sam_said_is_lifted_by_the_boost_and_no_other(band: MemorySystem) -> None:
    off = {h.chunk_id: h.score for h in _hits(band, QUESTION, 0.0)}
    on = _hits(band, QUESTION, LIFT)
    relevance = dict(zip(off, normalise_relevance(list(off.values())), strict=True))
    for hit in on:
        said = 1.0 if hit.turns[0].speaker == "Sam" else 0.0
        assert hit.stage_scores["speaker_match"] == said
        assert hit.score == pytest.approx(relevance[hit.chunk_id] * (1 + LIFT * said))
    assert [h.score for h in on] == sorted((h.score for h in on), reverse=True)


@pytest.mark.parametrize(("share", "first"), [(1.05, "answer"), (0.95, "ask")])
def test_the_answer_rises_exactly_when_the_boost_covers_the_gap(
    band: MemorySystem, share: float, first: str
) -> None:
    off = {h.turns[0].turn_id: h.score for h in _hits(band, QUESTION, 0.0)}
    gap = off["ask"] / off["answer"] - 1  # the boost at which the two would tie
    assert 0 < gap * share <= MAX_SPEAKER_BOOST  # the construction leaves room to test
    assert _order(_hits(band, QUESTION, gap * share))[0] == first


@pytest.mark.parametrize(
    "query",
    [
        "What does everyone play?",  # no speaker named
        "What do Sam and Ana play?",  # both: every turn is lifted alike
    ],
)
def test_a_query_that_singles_out_no_speaker_ranks_as_without_the_stage(
    band: MemorySystem, query: str
) -> None:
    assert _order(_hits(band, query, MAX_SPEAKER_BOOST)) == _order(_hits(band, query, 0.0))


def test_the_stage_says_whom_it_read(band: MemorySystem) -> None:
    request = band.settings.search_request(top_k=4, record_access=False, speaker_boost=LIFT)
    notes = band.query(QUESTION, request).stats.notes
    assert "the query names Sam: what they said is preferred" in notes


def test_off_by_default_so_a_search_ranks_as_without_the_stage(band: MemorySystem) -> None:
    assert SearchRequest().speaker_boost == DEFAULT_SPEAKER_BOOST == 0.0
    request = band.settings.search_request(top_k=4, record_access=False)
    result = band.query(QUESTION, request)
    assert _order(result.hits)[:2] == ["ask", "answer"]
    assert not any("the query names" in n for n in result.stats.notes)


@pytest.mark.parametrize(
    ("query", "speakers", "named"),
    [
        ("What does Sam play?", {"Sam", "Ana"}, {"Sam"}),
        ("what does sam play", {"Sam", "Ana"}, {"Sam"}),  # case does not matter
        ("Where is Sam's violin?", {"Sam", "Ana"}, {"Sam"}),  # a possessive names him
        ("What did Samuel say?", {"Sam", "Ana"}, set()),  # a whole word, not a prefix
        ("What did Mary say?", {"Mary Ann", "Ana"}, set()),  # every word of the name
        ("What did Mary Ann say?", {"Mary Ann", "Ana"}, {"Mary Ann"}),
        ("What did the assistant suggest?", {"human", "assistant"}, set()),  # a role
        ("Which tool did we run?", {"human", "tool"}, set()),
        ("What did Ana and Sam both do?", {"Sam", "Ana"}, {"Sam", "Ana"}),
    ],
)
def test_speakers_named(query: str, speakers: set[str], named: set[str]) -> None:
    assert speakers_named(tokenize(query), speakers) == named


def test_said_by_looks_at_every_turn_of_a_chunk() -> None:
    turns = (Turn("1", "Ana"), Turn("2", "Sam"))
    assert said_by(turns, {"Sam"}) == 1.0
    assert said_by(turns, {"Kim"}) == 0.0
    assert said_by((), {"Sam"}) == 0.0


def test_the_boost_is_bounded_and_multiplies_the_relevance() -> None:
    assert boosted([2.0, 1.0, 0.5], [0.0, 1.0, 1.0], 0.5) == [1.0, 0.75, 0.375]
    assert boosted([2.0, 1.0], [1.0, 1.0], 0.0) == [1.0, 0.5]
    with pytest.raises(ValueError, match="2 relevance scores for 1 chunks"):
        boosted([1.0, 0.5], [1.0], 0.1)


@pytest.mark.parametrize("weight", [-0.1, MAX_SPEAKER_BOOST + 0.5])
def test_a_boost_out_of_range_is_refused(tmp_path: Path, weight: float) -> None:
    memory = MemorySystem(make_settings(tmp_path), embedder=HashingEmbedder())
    try:
        request = memory.settings.search_request(speaker_boost=weight)
        with pytest.raises(InvalidInputError, match="speaker_boost must be in"):
            memory.query("anything", request)
    finally:
        memory.close()
