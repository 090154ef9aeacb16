"""Recall per prompt: which prompts are searched, which chunks are handed over, how they fit.

On a real memory (SQLite in tmp_path) with the fast deterministic embedder, whose
similarities are fixed by the texts' shared words."""

from __future__ import annotations

import pytest

from memory_pipeline.memory.prompt_recall import (
    already_given,
    recall_for_prompt,
    skip_reason,
)
from memory_pipeline.memory.recall import estimate_tokens, named_chunks
from memory_pipeline.metadata import TRANSCRIPT_OF
from memory_pipeline.store.handed import HandedHit
from memory_pipeline.system import MemorySystem

REDIS = "We dropped Redis for the session cache in March: it lost sessions on every restart."
ASKED = "why did we drop Redis for the session cache?"
FLOOR = 0.35
BM25_FLOOR = 1.0


@pytest.mark.parametrize(
    ("prompt", "why"),
    [
        (ASKED, ""),
        ("なぜ Redis をやめたのですか", ""),
        ("Redis を外した理由", ""),
        ("", "no prompt"),
        (None, "no prompt"),
        ("yes", "too short"),
        ("ok go", "too short"),
        ("続けて", "too short"),
        ("/compact keep the decisions", "a slash command"),
        ("<command-name>/review</command-name> look at the parser", "not typed by a person"),
        ("<task-notification>done: 3 files changed</task-notification>", "not typed by a person"),
        (
            '  <local-command-stdout x="1">ok</local-command-stdout> and more words',
            "not typed by a person",
        ),
        ("a < b holds for all three inputs", ""),
    ],
)
def test_which_prompts_are_searched(prompt: object, why: str) -> None:
    reason = skip_reason(prompt)
    assert reason.startswith(why) and bool(reason) == bool(why)


def _seed(system: MemorySystem) -> None:
    system.ingest_text(REDIS, "Session cache")
    system.ingest_text("The login page uses a two-column grid on wide screens.", "Login page")
    system.ingest_text(
        "Redis for the session cache again? We asked about that.",
        "Session s-own",
        {"tags": [f"{TRANSCRIPT_OF}s-own", "conversation"]},
    )
    system.update_index()


def test_the_chunks_that_clear_the_floor_come_named_within_the_budget(system: MemorySystem) -> None:
    _seed(system)
    got = recall_for_prompt(system, ASKED, floor=FLOOR, bm25_floor=BM25_FLOOR, session="s-own")
    assert [h.title for h in got.hits] == ["Session cache"]  # not the session's own words
    (hit,) = got.hits
    assert f"({hit.doc_id}#{hit.chunk_index})" in got.block and "Session cache" in got.block
    assert named_chunks(got.block) == {(hit.doc_id, hit.chunk_index)}
    assert estimate_tokens(got.block) <= 400
    # Given already in this session: nothing new clears the floor.
    given = {(hit.doc_id, hit.chunk_index)}
    again = recall_for_prompt(
        system, ASKED, floor=FLOOR, bm25_floor=BM25_FLOOR, handed=given, session="s-own"
    )
    assert again.block == "" and again.hits == () and "floor" in again.why
    # Without a session, its transcript is a chunk like any other.
    assert len(recall_for_prompt(system, ASKED, floor=FLOOR, bm25_floor=BM25_FLOOR).hits) == 2
    # Either floor alone keeps it out.
    assert recall_for_prompt(system, ASKED, floor=FLOOR, bm25_floor=100.0).block == ""
    assert recall_for_prompt(system, ASKED, floor=0.99, bm25_floor=BM25_FLOOR).block == ""
    # A budget too small for one item gives nothing.
    assert (
        recall_for_prompt(system, ASKED, floor=FLOOR, bm25_floor=BM25_FLOOR, budget=20).block == ""
    )


def test_what_a_session_was_given_is_read_back_from_the_handed_records(
    system: MemorySystem,
) -> None:
    _seed(system)
    block = "# Project memory\n- [principle] x — rules (abc#0)\n- first ask: y (def#3)\n- z (ghi)\n"
    system.note_handed("recall", session="s1", block=block)
    system.note_handed("search", session="s1", query="q", hits=[])
    system.store.record_handed("search", session="s1", hits=[HandedHit("jkl", 2, 0.5, "t")])
    system.store.record_handed("search", session="s2", hits=[HandedHit("mno", 1, 0.5, "t")])
    records = system.store.handed_in_session("s1")
    assert [r.kind for r in records] == ["recall", "search", "search"]
    assert already_given(records) == {("abc", 0), ("def", 3), ("jkl", 2)}
    assert system.store.handed_in_session("nobody") == []
