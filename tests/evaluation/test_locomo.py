"""LoCoMo evaluation: session-level figures beside the turn-level ones.

The tiny file is built so every figure follows from construction: BM25 alone, turns
indexed without neighbours or dates, so a turn is returned only when it holds one of the
question's words, and a turn saying a word three times in three words outranks one
saying it once among five.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

import pytest

from memory_pipeline.cli.evaluation import register
from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.evaluation.locomo import (
    category_table,
    evaluate_locomo,
    last_session_day,
    load_locomo,
)
from memory_pipeline.evaluation.results import EvalRun
from memory_pipeline.evaluation.runner import EvalQuery, _score_query
from memory_pipeline.evaluation.variants import ChunkRef
from tests.conftest import make_settings


def _sample() -> dict[str, object]:
    return {
        "sample_id": "a",
        "conversation": {
            "speaker_a": "Kim",
            "speaker_b": "Lee",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Kim", "dia_id": "D1:1", "text": "painted zebra mural bright colours"},
                {"speaker": "Lee", "dia_id": "D1:2", "text": "zebra zebra zebra"},
            ],
            "session_2_date_time": "10:04 am on 3 June, 2023",
            "session_2": [
                {"speaker": "Kim", "dia_id": "D2:1", "text": "watched whales documentary"},
            ],
        },
        "qa": [
            # D1:2 ranks first: turn-level missed at 1, its session found at 1.
            {"question": "zebra?", "answer": "-", "evidence": ["D1:1"], "category": 2},
            # Only D2:1 is returned: found at 1 at both levels.
            {"question": "whales?", "answer": "-", "evidence": ["D2:1"], "category": 4},
            # Only D2:1 is returned, the evidence is in session 1: missed at both levels.
            {"question": "documentary?", "answer": "-", "evidence": ["D1:1"], "category": 1},
        ],
    }


@pytest.fixture
def run(tmp_path: Path) -> EvalRun:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([_sample()]), encoding="utf-8")
    settings = make_settings(
        tmp_path, turn_context_before=0, turn_context_after=0, turn_dates=False
    )
    return evaluate_locomo(
        load_locomo(path),
        HashingEmbedder(),
        settings,
        variants=["bm25"],
        k_values=[1, 2],
        cache_root=tmp_path / "cache",
    )


def test_session_level_recall_counts_a_question_found_when_an_evidence_session_is_in_the_first_k(
    run: EvalRun,
) -> None:
    v = run.variant("bm25")
    by_id = {q.query_id: q for q in v.queries}
    assert by_id["a:q0"].ranking == ["D1:2", "D1:1"]
    expected = {  # question: (recall@1, recall@2, session_recall@1, session_recall@2)
        "a:q0": (0.0, 1.0, 1.0, 1.0),
        "a:q1": (1.0, 1.0, 1.0, 1.0),
        "a:q2": (0.0, 0.0, 0.0, 0.0),
    }
    for qid, want in expected.items():
        m = by_id[qid].metrics
        got = (m["recall@1"], m["recall@2"], m["session_recall@1"], m["session_recall@2"])
        assert got == want, qid
    assert v.summary["recall@1"] == pytest.approx(1 / 3)
    assert v.summary["session_recall@1"] == pytest.approx(2 / 3)
    assert v.groups["temporal"]["recall@1"] == 0.0
    assert v.groups["temporal"]["session_recall@1"] == 1.0
    assert v.groups["multi-hop"]["session_recall@2"] == 0.0
    # The JSON report carries them, overall and per category.
    data = EvalRun.from_dict(json.loads(json.dumps(run.to_dict()))).variant("bm25")
    assert data.summary["session_recall@2"] == pytest.approx(2 / 3)
    assert data.groups["single-hop"]["session_recall@1"] == 1.0


def test_the_category_table_shows_session_level_beside_turn_level(run: EvalRun) -> None:
    table = category_table(run, ks=(1,))
    head, _rule, *rows = table.splitlines()
    assert head.split("|")[3:5] == [" recall@1 ", " session_recall@1 "]
    cells = {r.split("|")[1].strip(): [c.strip() for c in r.split("|")[2:5]] for r in rows}
    assert cells["temporal"] == ["1", "0.000", "1.000"]
    assert cells["all"] == ["3", "0.333", "0.667"]


def test_a_session_is_ranked_where_its_first_turn_is() -> None:
    sessions = {"D1:1": "s1", "D1:2": "s1", "D2:1": "s2", "D3:1": "s3"}
    q = EvalQuery("q", "?", {"D3:1": 1}, turn_level=True, session_of_turn=sessions)
    refs = [
        ChunkRef(1, "d1", 0, ("D1:1", "D1:2")),
        ChunkRef(2, "d2", 0, ("D2:1",)),
        ChunkRef(3, "d1", 1, ("D1:2",)),
        ChunkRef(4, "d3", 0, ("D3:1",)),
    ]
    result, _ = _score_query(q, refs, [2, 3], 10)
    # Turns D1:1 D1:2 D2:1 D3:1: turn rank 4; sessions s1 s2 s3: session rank 3.
    assert result.metrics["recall@3"] == 0.0
    assert result.metrics["session_recall@2"] == 0.0
    assert result.metrics["session_recall@3"] == 1.0


def test_eval_locomo_prints_and_saves_both_levels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([_sample()]), encoding="utf-8")
    reports = tmp_path / "reports"
    argv = ["eval", "--locomo", str(path), "--model", "hashing", "--config", "bm25"]
    argv += ["--turn-context", "0,0", "--no-turn-dates", "--k-values", "1,2"]
    argv += ["--cache-dir", str(tmp_path / "cache"), "--output-dir", str(reports)]
    assert _run([*argv, "--no-progress", "--no-chart"]) == 0
    out = capsys.readouterr().out
    # Without 5 or 10 among the k values, the largest is shown.
    assert "| category | questions | recall@2 | session_recall@2 |" in out
    assert "| multi-hop | 1 | 0.000 | 0.000 |" in out
    assert "recall@2 0.6667\nsession_recall@2 0.6667" in out
    saved = EvalRun.load(next(reports.glob("*.json"))).variant("bm25")
    assert saved.groups["temporal"]["session_recall@1"] == 1.0


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"), [], lambda _args: None)  # type: ignore[arg-type,return-value]
    args = parser.parse_args(argv)
    return int(args.func(args))


def _dated_sample() -> dict[str, object]:
    """Three sessions saying the same words in another order; the question names the
    second one's week, two weeks before the last session."""
    said = ["zebra mural painted", "painted zebra mural", "mural painted zebra"]
    days = ["1:56 pm on 8 May, 2023", "1:56 pm on 20 May, 2023", "1:56 pm on 3 June, 2023"]
    conversation: dict[str, object] = {"speaker_a": "Kim", "speaker_b": "Lee"}
    for n, (text, day) in enumerate(zip(said, days, strict=True), 1):
        conversation[f"session_{n}_date_time"] = day
        conversation[f"session_{n}"] = [{"speaker": "Kim", "dia_id": f"D{n}:1", "text": text}]
    question = "zebra mural painted two weeks ago?"
    return {
        "sample_id": "d",
        "conversation": conversation,
        "qa": [{"question": question, "answer": "-", "evidence": ["D2:1"], "category": 2}],
    }


@pytest.mark.parametrize("question_now", [True, False])
def test_each_question_is_asked_as_of_its_conversations_last_session(
    tmp_path: Path, question_now: bool
) -> None:
    path = tmp_path / "dated.json"
    path.write_text(json.dumps([_dated_sample()]), encoding="utf-8")
    ds = load_locomo(path)
    assert last_session_day(ds.sessions["d"]) == dt.datetime(2023, 6, 3, tzinfo=dt.UTC)
    settings = make_settings(
        tmp_path, turn_context_before=0, turn_context_after=0, turn_dates=False
    )
    run = evaluate_locomo(
        ds, HashingEmbedder(), settings, variants=["hybrid"], k_values=[1, 3],
        cache_root=tmp_path / "cache", question_now=question_now,
    )  # fmt: skip
    [q] = run.variant("hybrid").queries
    assert run.settings["question_now"] == ("last session date" if question_now else "clock")
    # "two weeks ago" from 3 June 2023 is the week of 15 May: the second session.
    assert (q.ranking[0] == "D2:1") is question_now
