"""Conversations as conversations: turn chunks, turn context in the index, time from when
things were said, transcripts and LoCoMo's files, and turn-level evaluation."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.evaluation.locomo import evaluate_locomo, load_locomo
from memory_pipeline.evaluation.runner import EvalQuery, _score_query
from memory_pipeline.evaluation.variants import ChunkRef
from memory_pipeline.ingest.relative_dates import resolve_relative_dates
from memory_pipeline.ingest.turns import (
    NEIGHBOUR_BLEND,
    TurnIndexing,
    TurnText,
    chunk_turns,
    index_text,
    own_text,
)
from memory_pipeline.sources.conversations import Conversation
from memory_pipeline.sources.ledger import open_ledger
from memory_pipeline.sources.sources_file import load_sources
from memory_pipeline.sources.sync import SyncReport, apply_sync, plan_sync
from memory_pipeline.sources.transcripts import parse_transcript
from memory_pipeline.system import MemorySystem
from memory_pipeline.types import Blend, Turn
from tests.conftest import make_settings
from tests.test_pipeline_support import make_corpus

MAY_8 = dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.UTC)


def transcript(sessions: list[dict[str, object]], cid: str = "trip") -> dict[str, object]:
    return {"conversation_id": cid, "title": "Trip planning", "sessions": sessions}


TRIP = transcript(
    [
        {
            "session_id": "1",
            "date": "2023-05-08T13:56:00Z",
            "turns": [
                {"turn_id": "D1:1", "speaker": "Ana", "text": "Did you book the ferry to Hydra?"},
                {"turn_id": "D1:2", "speaker": "Sam", "text": "Yes, yesterday. Twice, oddly."},
                {"turn_id": "D1:3", "speaker": "Ana", "text": "Ha! Refund one of them."},
            ],
        },
        {
            "session_id": "2",
            "date": "2023-06-20",
            "turns": [
                {"speaker": "Sam", "text": "The refund came two weeks ago."},
                {
                    "speaker": "Ana",
                    "text": "Good.",
                    "at": "2023-06-21T08:00:00Z",
                },
            ],
        },
    ]
)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    mem = MemorySystem(make_settings(tmp_path), embedder=HashingEmbedder())
    yield mem
    mem.close()


def write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# ----------------------------------------------------------------- relative dates
@pytest.mark.parametrize(
    ("text", "means"),
    [
        ("I went there yesterday", "7 May 2023"),
        ("the day before yesterday was rainy", "6 May 2023"),
        ("We met last week", "the week of 1 May 2023"),
        ("it was last month", "April 2023"),
        ("she moved two months ago", "March 2023"),
        ("3 days ago I ran", "5 May 2023"),
        ("a couple of weeks ago", "the week of 24 April 2023"),
        ("since last year", "2022"),
        ("see you next month", "June 2023"),
        ("last Friday was fun", "5 May 2023"),  # 8 May 2023 is a Monday
        ("last weekend we hiked", "the weekend of 6 May 2023"),
        ("昨日、海に行きました", "2023年5月7日"),
        ("先週の会議", "2023年5月1日の週"),
        ("３か月前に始めた", "2023年2月"),
        ("去年の夏", "2022年"),
    ],
)
def test_a_relative_date_resolves_against_the_day_it_was_said(text: str, means: str) -> None:
    [resolved] = resolve_relative_dates(text, MAY_8.date())
    assert resolved.means == means
    assert resolved.phrase in text


def test_phrases_that_need_more_than_the_day_are_left_alone() -> None:
    assert resolve_relative_dates("on Friday, recently, some day", MAY_8.date()) == []
    assert resolve_relative_dates("yesterdays are gone; a yesterday-ish mood", MAY_8.date()) == []


def test_the_longest_phrase_wins_and_each_phrase_is_given_once() -> None:
    found = resolve_relative_dates(
        "The day before yesterday and yesterday, yesterday.", MAY_8.date()
    )
    assert [(r.phrase, r.means) for r in found] == [
        ("The day before yesterday", "6 May 2023"),
        ("yesterday", "7 May 2023"),
    ]


@pytest.mark.parametrize(
    ("text", "on"),
    [
        ("yesterday, 昨日, last Monday, 400 weeks ago", dt.date.min),
        ("tomorrow, 明日, next week, the day after tomorrow", dt.date.max),
    ],
)
def test_a_phrase_meaning_a_day_off_the_calendar_is_left_alone(text: str, on: dt.date) -> None:
    assert len(resolve_relative_dates(text, MAY_8.date())) == 4  # each means a day in 2023
    assert resolve_relative_dates(text, on) == []  # none means a day on the calendar


# ----------------------------------------------------------------- turn chunking
def _words(text: str) -> int:
    return len(text.split()) + 2


def test_turns_become_chunks_whose_index_text_carries_date_speaker_and_neighbours() -> None:
    turns = [
        TurnText("D1:1", "Ana", MAY_8, "Did you book the ferry to Hydra?"),
        TurnText("D1:2", "Sam", MAY_8, "Yes, yesterday. Twice, oddly."),
        TurnText("D1:3", "Ana", MAY_8, "Ha! Refund one of them."),
    ]
    chunks = chunk_turns(turns, token_counter=_words, max_chunk_size=64)
    assert [c.content for c in chunks] == [t.text for t in turns]  # what a search returns
    assert [c.turns for c in chunks] == [(Turn(t.turn_id, t.speaker, MAY_8),) for t in turns]
    middle = chunks[1].index_text
    assert middle is not None
    assert middle.splitlines() == [
        '8 May 2023: Sam said, "Yes, yesterday. Twice, oddly."',
        "(yesterday = 7 May 2023)",
        "before — Ana: Did you book the ferry to Hydra?",
        "after — Ana: Ha! Refund one of them.",
    ]
    alone = TurnIndexing(before=0, after=0, dates=False)
    bare = index_text(turns, 1, own_text(turns[1], turns[1].text, alone), alone)
    assert bare == '8 May 2023: Sam said, "Yes, yesterday. Twice, oddly."'


def test_a_turn_s_neighbours_are_the_turns_around_it_and_never_itself() -> None:
    turns = [TurnText(str(k), "Ana", MAY_8, f"turn {k}") for k in range(5)]
    indexing = TurnIndexing(before=2, after=1)
    assert [indexing.neighbours(turns, i) for i in range(5)] == [
        [1],
        [0, 2],
        [0, 1, 3],
        [1, 2, 4],
        [2, 3],
    ]
    assert TurnIndexing(before=0, after=0).neighbours(turns, 2) == []


def test_a_turn_is_split_only_when_it_alone_exceeds_the_budget() -> None:
    long = " ".join(f"word{i}." for i in range(200))
    turns = [TurnText("a", "Ana", MAY_8, "short one"), TurnText("b", "Sam", MAY_8, long)]
    chunks = chunk_turns(turns, token_counter=_words, max_chunk_size=32)
    assert chunks[0].content == "short one"
    parts = chunks[1:]
    assert len(parts) > 1 and all(c.turns[0].turn_id == "b" for c in parts)
    assert all(c.token_count <= 32 for c in chunks)
    assert " ".join(c.content for c in parts).split() == long.split()
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))


def test_a_turn_blends_its_own_lines_with_the_chunks_of_the_turns_around_it() -> None:
    long = " ".join(f"word{i}." for i in range(60))
    turns = [
        TurnText("a", "Ana", MAY_8, "Did you book the ferry yesterday?"),
        TurnText("b", "Sam", MAY_8, long),  # cut into parts: chunks 1, 2, …
        TurnText("c", "Ana", MAY_8, "   "),  # no text, no chunk
        TurnText("d", "Sam", MAY_8, "Refund one of them."),
        TurnText("e", "Ana", MAY_8, "Done."),
    ]
    indexing = TurnIndexing(before=2, after=1)
    chunks = chunk_turns(turns, token_counter=_words, max_chunk_size=32, indexing=indexing)
    parts = [c.chunk_index for c in chunks if c.turns[0].turn_id == "b"]
    d, e = (next(c.chunk_index for c in chunks if c.turns[0].turn_id == t) for t in "de")
    assert len(parts) > 1
    blends = {c.chunk_index: c.blend for c in chunks if c.blend is not None}
    assert len(blends) == len(chunks)
    own = {i: b.own for i, b in blends.items()}
    # Its own lines are the index text's first lines: when, who, what, the dates meant.
    parts_own = tuple(own[p] for p in parts)
    assert blends[0] == Blend(own_text(turns[0], turns[0].text, indexing), parts_own, 0.3)
    assert blends[0].own.splitlines() == [
        '8 May 2023: Ana said, "Did you book the ferry yesterday?"',
        "(yesterday = 7 May 2023)",
    ]
    assert chunks[0].indexed_text.startswith(blends[0].own + "\nafter — Sam: word0.")
    # Every part of a turn blends the same neighbours, not its own turn's other parts.
    assert all(blends[p].around == (own[0],) for p in parts)
    # The empty turn counts in the window but gives nothing to blend.
    assert blends[d].around == (*parts_own, own[e])
    assert blends[e].around == (own[d],)
    joined = TurnIndexing(before=2, after=1, blend=None)
    chunks = chunk_turns(turns, token_counter=_words, max_chunk_size=32, indexing=joined)
    assert all(c.blend is None for c in chunks)


class Recording(HashingEmbedder):
    """The hashing embedder, keeping every text it was asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed_documents(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        self.texts.extend(texts)
        return super().embed_documents(texts, progress=progress)


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


@pytest.mark.parametrize("turn_vectors", ["blended", "joined"])
def test_an_ingested_turn_vector_is_its_blend_or_its_whole_index_text(
    tmp_path: Path, turn_vectors: str
) -> None:
    embedder = Recording()
    memory = MemorySystem(make_settings(tmp_path, turn_vectors=turn_vectors), embedder=embedder)
    try:
        first, _ = parse_transcript(write(tmp_path / "trip.json", TRIP))
        [result] = memory.ingest_loaded([first.to_loaded()], first.metadata())
        chunks = memory.store.document_chunks(result.doc_id)
        ids, matrix = memory.store.vectors_for([c.id for c in chunks], embedder.model_id)
        vectors = dict(zip(ids.tolist(), matrix, strict=True))
        own = [c.index_text.split("\nbefore — ")[0].split("\nafter — ")[0] for c in chunks]  # type: ignore[union-attr]
        if turn_vectors == "joined":
            # One text per turn, read with its neighbours: each turn is read three times.
            assert embedder.texts == [c.index_text for c in chunks]
            want = [embedder._vector(c.index_text) for c in chunks]  # type: ignore[arg-type]
        else:
            # Each turn is read once, alone; a turn's vector adds its neighbours' readings.
            assert sorted(embedder.texts) == sorted(own)
            alone = [embedder._vector(t) for t in own]
            around = [[1], [0, 2], [0, 1]]  # two before, one after, in three turns
            want = [
                _unit(alone[i] + NEIGHBOUR_BLEND * np.mean([alone[j] for j in js], axis=0))
                for i, js in enumerate(around)
            ]
        for chunk, w in zip(chunks, want, strict=True):
            np.testing.assert_allclose(vectors[chunk.id], w, rtol=1e-5, atol=1e-6)
        # The same session again in another space: its vectors are reused, nothing embedded.
        embedder.texts.clear()
        other = MemorySystem(
            make_settings(tmp_path, turn_vectors=turn_vectors, space="other"), embedder=embedder
        )
        try:
            [again] = other.ingest_loaded([first.to_loaded()], first.metadata())
        finally:
            other.close()
        assert embedder.texts == [] and again.reused_vectors == 0 and again.embedded == 3
    finally:
        memory.close()


# ------------------------------------------------------------ transcript format
def test_a_transcript_is_one_conversation_per_session_with_turn_ids_and_times(
    tmp_path: Path,
) -> None:
    first, second = parse_transcript(write(tmp_path / "trip.json", TRIP))
    assert (first.session_id, first.conversation_id) == ("trip/1", "trip")
    assert first.started_at == MAY_8
    assert [t.turn_id for t in first.turn_texts()] == ["D1:1", "D1:2", "D1:3"]
    # No turn ids: their position; no time of their own: the session's.
    assert [t.turn_id for t in second.turn_texts()] == ["trip/2:1", "trip/2:2"]
    assert [t.said_at for t in second.turn_texts()] == [
        dt.datetime(2023, 6, 20, tzinfo=dt.UTC),
        dt.datetime(2023, 6, 21, 8, tzinfo=dt.UTC),
    ]
    assert "conversation_id:trip" in first.tags()


def test_jsonl_transcripts_group_turns_by_session(tmp_path: Path) -> None:
    lines = [
        {"conversation_id": "c", "session_id": "s1", "session_date": "2024-01-02",
         "speaker": "Ana", "text": "hello"},
        {"conversation_id": "c", "session_id": "s2", "session_date": "2024-02-03",
         "speaker": "Sam", "text": "later"},
        {"conversation_id": "c", "session_id": "s1", "speaker": "Sam", "text": "hi"},
    ]  # fmt: skip
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    s1, s2 = parse_transcript(path)
    assert [m.text for m in s1.messages] == ["hello", "hi"]
    assert s2.started_at == dt.datetime(2024, 2, 3, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("session", "says"),
    [
        ({"session_id": "1", "turns": [{"speaker": "A", "text": "x"}]}, "has no date"),
        ({"session_id": "1", "date": "May 8th", "turns": [{"speaker": "A", "text": "x"}]},
         "is not an ISO date"),
        ({"session_id": "1", "date": "2023-05-08", "turns": [{"text": "x"}]}, "needs its speaker"),
        ({"session_id": "1", "date": "2023-05-08",
          "turns": [{"turn_id": "t", "speaker": "A", "text": "x"},
                    {"turn_id": "t", "speaker": "B", "text": "y"}]}, "repeats a turn_id"),
    ],
)  # fmt: skip
def test_a_bad_transcript_is_refused_with_what_to_fix_and_nothing_is_stored(
    tmp_path: Path, memory: MemorySystem, session: dict[str, object], says: str
) -> None:
    path = write(tmp_path / "bad.json", transcript([session]))
    with pytest.raises(InvalidInputError, match=says):
        parse_transcript(path)
    assert memory.counts()["documents"] == 0


# --------------------------------------------------------- the one ingestion path
def test_an_ingested_session_keeps_turns_speakers_and_when_they_were_said(
    tmp_path: Path, memory: MemorySystem
) -> None:
    _, second = parse_transcript(write(tmp_path / "trip.json", TRIP))
    [result] = memory.ingest_loaded([second.to_loaded()], second.metadata())
    chunks = memory.store.document_chunks(result.doc_id)
    assert [c.content for c in chunks] == ["The refund came two weeks ago.", "Good."]
    assert [(c.turns[0].turn_id, c.turns[0].speaker) for c in chunks] == [
        ("trip/2:1", "Sam"),
        ("trip/2:2", "Ana"),
    ]
    # Each chunk dates from when it was said, not from the import.
    assert [c.source_date for c in chunks] == [dt.date(2023, 6, 20), dt.date(2023, 6, 21)]
    assert chunks[0].index_text is not None
    assert "two weeks ago = the week of 5 June 2023" in chunks[0].index_text
    # BM25 takes the index text and the turn again: the turn's words outweigh a neighbour's.
    sparse = memory.store.sparse_texts([chunks[0].id])[chunks[0].id]
    assert sparse == f"{chunks[0].index_text}\n{chunks[0].content}"
    doc = memory.store.get_document(result.doc_id)
    assert doc is not None and doc.source_date == dt.date(2023, 6, 20)
    # The index holds the context: a neighbour's words find the turn.
    [hit] = memory.query(
        "refund Good", memory.settings.search_request(top_k=1, record_access=False)
    ).hits
    assert hit.turns and hit.content in {"Good.", "The refund came two weeks ago."}
    words = memory.query(
        "oddly ferry", memory.settings.search_request(top_k=3, record_access=False)
    )
    assert all(h.turns for h in words.hits)


def test_a_window_of_document_chunks_is_the_turns_around_one(
    tmp_path: Path, memory: MemorySystem
) -> None:
    first, _ = parse_transcript(write(tmp_path / "trip.json", TRIP))
    [result] = memory.ingest_loaded([first.to_loaded()], first.metadata())
    window = memory.get_document_chunks(result.doc_id, chunk_index=2, window=1)
    assert [c.turns[0].turn_id for c in window] == ["D1:2", "D1:3"]
    around = memory.get_document_chunks(result.doc_id, chunk_index=1, window=1)
    assert [(t.turn_id, t.speaker) for c in around for t in c.turns] == [
        ("D1:1", "Ana"), ("D1:2", "Sam"), ("D1:3", "Ana"),
    ]  # fmt: skip


def sync(memory: MemorySystem, sources: Path) -> SyncReport:
    cfg = load_sources(sources)
    with open_ledger(cfg.state_path) as ledger:
        return apply_sync(memory, cfg, plan_sync(memory.store, cfg, ledger), ledger)


def test_claude_code_and_claude_ai_sessions_take_the_same_path_as_transcripts(
    tmp_path: Path, memory: MemorySystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = make_corpus(tmp_path)
    calls: list[str] = []
    to_loaded = Conversation.to_loaded

    def spy(self: Conversation):  # type: ignore[no-untyped-def]
        calls.append(self.origin)
        return to_loaded(self)

    monkeypatch.setattr(Conversation, "to_loaded", spy)
    sync(memory, corpus.sources_file)
    assert sorted(calls) == ["claude-ai", "claude-code"]
    for tag in ("claude-ai", "claude-code"):
        [doc] = {c.doc_id for c in memory.find_by_tag(tag)}
        chunks = memory.store.document_chunks(doc)
        assert chunks and all(len(c.turns) == 1 for c in chunks)
        assert {c.turns[0].speaker for c in chunks} >= {"human", "assistant"}
        assert all(c.source_date == c.turns[0].said_at.date() for c in chunks if c.turns[0].said_at)


def test_a_transcript_root_reimports_nothing_unchanged_and_replaces_a_changed_session(
    tmp_path: Path, memory: MemorySystem
) -> None:
    root = tmp_path / "transcripts"
    root.mkdir()
    path = write(root / "trip.json", TRIP)
    sources = tmp_path / "sources.yaml"
    sources.write_text(
        f"state: {tmp_path / 'state.json'}\nroots:\n  - name: talks\n    path: {root}\n"
        "    kind: transcript\n",
        encoding="utf-8",
    )
    first = sync(memory, sources)
    assert first.documents_added == 2 and not first.failed
    counts = memory.counts()
    path.touch()  # same bytes, new mtime: looked at, nothing to do
    again = sync(memory, sources)
    assert again.documents_added == again.documents_replaced == 0
    assert memory.counts() == counts
    edited = json.loads(json.dumps(TRIP))
    edited["sessions"][0]["turns"][1]["text"] = "Yes, yesterday. Only once."
    write(path, edited)
    changed = sync(memory, sources)
    assert changed.documents_replaced == 1 and changed.documents_added == 0
    texts = {c.content for c in memory.find_by_tag("conversation_id:trip")}
    assert "Yes, yesterday. Only once." in texts
    assert "Yes, yesterday. Twice, oddly." not in texts
    assert memory.counts() == counts


def test_archived_turns_come_back_with_their_context(tmp_path: Path, memory: MemorySystem) -> None:
    [first, _] = parse_transcript(write(tmp_path / "trip.json", TRIP))
    [result] = memory.ingest_loaded([first.to_loaded()], first.metadata())
    before = memory.store.document_chunks(result.doc_id)
    report = memory.run_forgetting_batch(
        dry_run=False, score_threshold=1.0, max_fraction=1.0, force=True, grace_days=0
    )
    assert report.archived == len(before)
    memory.restore_archived(run_id=report.run_id)
    after = memory.store.document_chunks(result.doc_id)
    assert [(c.content, c.index_text, c.turns) for c in after] == [
        (c.content, c.index_text, c.turns) for c in before
    ]


# -------------------------------------------------------------- turn-level eval
def test_a_chunk_holding_several_turns_takes_that_many_ranks() -> None:
    q = EvalQuery("q", "?", {"t3": 1}, turn_level=True)
    refs = [ChunkRef(1, "d", 0, ("t1", "t2")), ChunkRef(2, "d", 1, ("t3",))]
    result, _ = _score_query(q, refs, [1, 3], 10)
    assert result.ranking == ["t1", "t2", "t3"]
    assert result.metrics["recall@1"] == 0.0 and result.metrics["recall@3"] == 1.0


def _locomo_sample(sid: str, topic: str, other: str) -> dict[str, object]:
    talk = [
        {"speaker": "Kim", "dia_id": "D1:1", "text": f"I started {topic} classes yesterday."},
        {"speaker": "Lee", "dia_id": "D1:2", "text": "How did it go?"},
        {"speaker": "Kim", "dia_id": "D1:3", "text": f"My {other} is broken again."},
    ]
    later = [
        {"speaker": "Lee", "dia_id": "D2:1", "text": f"Still doing {topic}?"},
        {"speaker": "Kim", "dia_id": "D2:2", "text": f"Yes, and I fixed the {other}."},
    ]
    return {
        "sample_id": sid,
        "conversation": {
            "speaker_a": "Kim",
            "speaker_b": "Lee",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": talk,
            "session_2_date_time": "10:04 am on 3 June, 2023",
            "session_2": later,
        },
        "qa": [
            {"question": f"When did Kim start {topic} classes?", "answer": "7 May 2023",
             "evidence": ["D1:1"], "category": 2},
            {"question": "What did Kim fix?", "answer": other,
             "evidence": ["D1:3; D2:2"], "category": 1},
            {"question": "Unjudged", "answer": "-", "evidence": ["D9:9"], "category": 4},
        ],
    }  # fmt: skip


def test_locomo_eval_is_turn_level_per_category_and_pooled_gives_the_same(
    tmp_path: Path,
) -> None:
    path = write(
        tmp_path / "tiny.json",
        [_locomo_sample("a", "pottery", "bike"), _locomo_sample("b", "salsa", "laptop")],
    )
    ds = load_locomo(path)
    assert ds.n_queries == 4  # the question naming no turn is not judged
    assert ds.queries["a"][1].qrels == {"D1:3": 1, "D2:2": 1}  # "a; b" evidence split
    settings = make_settings(tmp_path)
    runs = [
        evaluate_locomo(
            ds, HashingEmbedder(), settings, variants=["bm25", "hybrid"], pooled=pooled,
            cache_root=tmp_path / "cache",
        )
        for pooled in (False, True)
    ]  # fmt: skip
    per, pooled = (r.variant("hybrid") for r in runs)
    assert set(per.groups) == {"temporal", "multi-hop"}
    assert per.summary["queries_judged"] == 4
    assert all(
        t in {"D1:1", "D1:2", "D1:3", "D2:1", "D2:2"} for q in per.queries for t in q.ranking
    )
    assert per.summary["recall@10"] == pytest.approx(pooled.summary["recall@10"])
    assert per.summary["recall@10"] == 1.0  # every turn of the conversation fits in 10
    # Pooled: a question never sees another conversation's turns (filters first).
    assert all(len(q.ranking) <= 5 for q in pooled.queries)
    data = runs[0].to_dict()
    assert data["primary"] == "hybrid" and "groups" in data["variants"][1]
    assert data["variants"][1]["queries"][0]["group"] == "temporal"


SHARED = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "locomo-dev"


@pytest.mark.skipif(not SHARED.exists(), reason="the LoCoMo development split is not beside")
def test_the_locomo_file_gives_the_questions_and_evidence_of_its_beir_version() -> None:
    ds = load_locomo(SHARED / "locomo-dev.json")
    assert ds.n_queries == 755
    beir = SHARED / "beir" / "locomo-dev-all"
    qrels: dict[str, set[str]] = {}
    for line in (beir / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        qid, doc, _ = line.split("\t")
        qrels.setdefault(qid, set()).add(doc.split("-", 1)[1])
    texts = {
        json.loads(x)["text"]: json.loads(x)["_id"]
        for x in (beir / "queries.jsonl").read_text().splitlines()
    }
    ours = sorted(sorted(q.qrels) for qs in ds.queries.values() for q in qs)
    theirs = sorted(sorted(v) for v in qrels.values())
    assert ours == theirs
    asked = {" ".join(q.text.split()) for qs in ds.queries.values() for q in qs}
    assert asked == {" ".join(t.split()) for t in texts}
