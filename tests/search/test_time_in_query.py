"""A time named in the query ("yesterday", "in March 2023", 先月) prefers chunks dated near it.

The dated memory holds six notes with the same words in another order, on six dates:
the fast embedder is a bag of words, so their dense and BM25 scores tie and, without the
time, they rank in the order they were stored. Which note a time means follows from the
dates alone, and so does the rank it had without the feature: its place in that order.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.ingest.relative_dates import Period, Span, periods_named
from memory_pipeline.memory.when import TIME_BOOST, time_closeness
from memory_pipeline.search import pipeline
from memory_pipeline.system import MemorySystem
from memory_pipeline.types import SearchFilters
from tests.conftest import make_settings

NOW = dt.date(2023, 5, 10)  # a Wednesday: "last week" is 1-7 May, "yesterday" 9 May
NOTES = [  # stored in this order
    ("Sam, dinner at the harbour restaurant with.", dt.date(2021, 1, 15)),  # no question's
    ("Dinner with Sam at the harbour restaurant.", dt.date(2022, 8, 1)),
    ("At the harbour restaurant, dinner with Sam.", dt.date(2023, 3, 10)),
    ("With Sam: dinner at the harbour restaurant.", dt.date(2023, 4, 20)),
    ("The harbour restaurant: dinner with Sam at.", dt.date(2023, 5, 3)),
    ("Restaurant at the harbour: Sam, dinner with.", dt.date(2023, 5, 9)),
]
WORDS = "dinner with Sam at the harbour restaurant"

CASES = [  # the question, the note it means, that note's rank without the time
    (f"{WORDS} yesterday", dt.date(2023, 5, 9), 6),
    (f"{WORDS} last week", dt.date(2023, 5, 3), 5),
    (f"{WORDS} last month", dt.date(2023, 4, 20), 4),
    (f"{WORDS} two months ago", dt.date(2023, 3, 10), 3),
    (f"{WORDS} last year", dt.date(2022, 8, 1), 2),
    (f"{WORDS} in March 2023", dt.date(2023, 3, 10), 3),
    (f"{WORDS} on 3 May 2023", dt.date(2023, 5, 3), 5),
    (f"{WORDS} in August 2022", dt.date(2022, 8, 1), 2),
    (f"昨日 {WORDS}", dt.date(2023, 5, 9), 6),
    (f"先週 {WORDS}", dt.date(2023, 5, 3), 5),
    (f"先月 {WORDS}", dt.date(2023, 4, 20), 4),
    (f"去年 {WORDS}", dt.date(2022, 8, 1), 2),
    (f"2023年3月 {WORDS}", dt.date(2023, 3, 10), 3),
]


@pytest.fixture(scope="module")
def dated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemorySystem]:
    root = tmp_path_factory.mktemp("dated")
    memory = MemorySystem(make_settings(root), embedder=HashingEmbedder())
    for text, day in NOTES:
        memory.ingest_text(text, f"dinner on {day}", {"source_date": day.isoformat()})
    memory.update_index()
    yield memory
    memory.close()


def _dates(memory: MemorySystem, query: str, now: dt.date | None = NOW) -> list[dt.date | None]:
    at = None if now is None else dt.datetime.combine(now, dt.time(), tzinfo=dt.UTC)
    request = memory.settings.search_request(top_k=len(NOTES), record_access=False, now=at)
    return [h.source_date for h in memory.query(query, request).hits]


@pytest.mark.parametrize(("query", "means", "rank_without"), CASES)
def test_the_note_dated_at_the_time_named_ranks_first(
    dated: MemorySystem, query: str, means: dt.date, rank_without: int
) -> None:
    assert _dates(dated, query)[0] == means
    # Without the time the notes tie and keep the order they were stored in.
    assert _dates(dated, WORDS).index(means) + 1 == rank_without


def test_the_time_is_read_against_the_searchs_now(dated: MemorySystem) -> None:
    assert _dates(dated, f"{WORDS} yesterday", dt.date(2023, 3, 11))[0] == dt.date(2023, 3, 10)
    assert _dates(dated, f"{WORDS} last year", dt.date(2022, 6, 1))[0] == dt.date(2021, 1, 15)


def test_the_time_is_a_preference_not_a_filter(dated: MemorySystem) -> None:
    assert len(_dates(dated, f"{WORDS} yesterday")) == len(NOTES)
    # A filter is the caller's: the source-date filter still restricts.
    at = dt.datetime.combine(NOW, dt.time(), tzinfo=dt.UTC)
    request = dated.settings.search_request(top_k=len(NOTES), record_access=False, now=at)
    only = SearchFilters(source_date_from=dt.date(2023, 1, 1), source_date_to=dt.date(2023, 4, 30))
    hits = dated.query(f"{WORDS} yesterday", request, filters=only).hits
    assert [h.source_date for h in hits] == [dt.date(2023, 4, 20), dt.date(2023, 3, 10)]


TIME_FREE = [
    WORDS,
    "harbour",
    "what did Sam say on Friday",
    "recently at the restaurant",
    "May we have dinner",
    "the 2023 harbour report",
    "夕食 レストラン",
]


@pytest.mark.parametrize("query", TIME_FREE)
def test_a_query_naming_no_time_is_searched_exactly_as_before(
    dated: MemorySystem, query: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert periods_named(query, NOW) == []
    request = dated.settings.search_request(top_k=len(NOTES), record_access=False)
    with_reading = dated.query(query, request)
    monkeypatch.setattr(pipeline, "periods_named", lambda _text, _now: [])
    without = dated.query(query, request)
    assert [h.to_dict() for h in with_reading.hits] == [h.to_dict() for h in without.hits]
    assert with_reading.stats.notes == without.stats.notes


@pytest.mark.parametrize(
    ("query", "periods"),
    [
        ("in May 2023", [Period(Span.MONTH, dt.date(2023, 5, 1))]),
        ("on May 7th, 2023 and 2023-05-08", [Period(Span.DAY, dt.date(2023, 5, 7)),
                                             Period(Span.DAY, dt.date(2023, 5, 8))]),
        ("2023年5月7日 or 2023年", [Period(Span.DAY, dt.date(2023, 5, 7)),
                                   Period(Span.YEAR, dt.date(2023, 1, 1))]),
        ("last weekend", [Period(Span.WEEKEND, dt.date(2023, 5, 6))]),
        ("31 February 2023", [Period(Span.MONTH, dt.date(2023, 2, 1))]),  # no such day: the month
        ("May we meet in the 2023 report", []),
    ],
)  # fmt: skip
def test_absolute_times_are_read_in_questions(query: str, periods: list[Period]) -> None:
    assert periods_named(query, NOW) == periods


def test_closeness_is_one_within_the_period_and_halves_per_its_length_outside() -> None:
    may = Period(Span.MONTH, dt.date(2023, 5, 1))
    assert time_closeness(dt.date(2023, 5, 31), [may]) == 1.0
    assert time_closeness(dt.date(2023, 7, 1), [may]) == 0.5  # 31 days after its last day
    assert time_closeness(None, [may]) == 0.0
    assert 0 < TIME_BOOST <= 1


def test_now_must_be_a_date() -> None:
    from memory_pipeline.search.params import SearchRequest

    with pytest.raises(InvalidInputError, match="now"):
        SearchRequest(now="2023-05-10").validate()  # type: ignore[arg-type]


def test_turn_dates_are_what_a_conversation_chunk_is_dated_by(tmp_path: Path) -> None:
    from memory_pipeline.memory.when import chunk_day
    from memory_pipeline.types import Turn

    said = dt.datetime(2023, 5, 7, 13, 56, tzinfo=dt.UTC)
    assert chunk_day((Turn("D1:1", "Kim", said),), dt.date(2023, 5, 8)) == dt.date(2023, 5, 7)
    assert chunk_day((Turn("D1:1", "Kim"),), dt.date(2023, 5, 8)) == dt.date(2023, 5, 8)
    assert chunk_day((), None) is None
