"""Hostile transcript files through the real sync: each one is refused whole, with where
and what to fix, nothing of it is stored, and the good file after it is still ingested."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.sources.ledger import open_ledger
from memory_pipeline.sources.sources_file import load_sources
from memory_pipeline.sources.sync import SyncReport, apply_sync, plan_sync
from memory_pipeline.system import MemorySystem
from tests.conftest import make_settings

MAX_FILE_BYTES = 64 * 1024  # the cap for this test's memory; files and transcripts alike


def turn(text: str = "We booked the ferry.", speaker: str = "Ana", **extra: Any) -> dict[str, Any]:
    return {"speaker": speaker, "text": text, **extra}


def session(sid: str = "1", date: str = "2023-05-08", turns: list[Any] | None = None) -> dict:
    return {"session_id": sid, "date": date, "turns": turns or [turn()]}


def conv(cid: str, sessions: list[Any] | None = None, title: str | None = None) -> dict:
    out: dict[str, Any] = {"conversation_id": cid, "sessions": sessions or [session()]}
    if title is not None:
        out["title"] = title
    return out


def second_is(bad: dict[str, Any]) -> str:
    """A file whose first conversation is fine and whose second is ``bad``."""
    return json.dumps([conv("bad-first"), bad])


def nested(depth: int) -> str:
    return '{"conversation_id": "deep", "sessions": ' + "[" * depth + "]" * depth + "}"


def jsonl(*lines: dict[str, Any]) -> str:
    return "\n".join(json.dumps(line) for line in lines) + "\n"


def big() -> str:
    turns = [turn(f"Turn {i} about ferries and harbours and timetables.") for i in range(2000)]
    return json.dumps(conv("big", [session(turns=turns)]))


# name, file suffix, content, what the message must say (besides the file's name)
HOSTILE: list[tuple[str, str, Callable[[], str], list[str]]] = [
    (
        "year 1 saying yesterday",
        "json",
        lambda: second_is(conv("old", [session(date="0001-01-01", turns=[turn("Yesterday!")])])),
        ["#2, session 1", "0001-01-01", "year"],
    ),
    (
        "year 9999 saying tomorrow",
        "json",
        lambda: second_is(conv("late", [session(date="9999-12-31", turns=[turn("Tomorrow.")])])),
        ["#2, session 1", "9999-12-31", "year"],
    ),
    (
        "extreme time zone offset",
        "json",
        lambda: second_is(conv("tz", [session(date="2023-05-08T10:00:00+23:59")])),
        ["#2, session 1", "UTC offset"],
    ),
    (
        "offset past the calendar's start",
        "json",
        lambda: second_is(
            conv("edge", [session(turns=[turn("Hi", at="0001-01-01T00:00:00+05:00")])])
        ),
        ["#2, session 1, turn 1", "'at'", "range"],
    ),
    ("deeply nested JSON", "json", lambda: nested(20_000), ["nested too deeply"]),
    (
        "deeply nested JSON line",
        "jsonl",
        lambda: '{"conversation_id": "deep", "x": ' + "[" * 20_000 + "]" * 20_000 + "}\n",
        [":1", "nested too deeply"],
    ),
    (
        "ESC in the second conversation's id",
        "json",
        lambda: second_is(conv("bad\x1bid")),
        ["#2", "conversation_id", "U+001B"],
    ),
    (
        "newline in the second conversation's id",
        "json",
        lambda: second_is(conv("two\nlines")),
        ["#2", "conversation_id", "U+000A"],
    ),
    (
        "300-character conversation id",
        "json",
        lambda: second_is(conv("x" * 300)),
        ["#2", "conversation_id", "300 characters"],
    ),
    (
        "400-character title",
        "json",
        lambda: second_is(conv("long-title", title="t" * 400)),
        ["#2", "title", "400 characters"],
    ),
    (
        "control character in a session id",
        "json",
        lambda: second_is(conv("sid", [session(sid="s\x071")])),
        ["#2, session 1", "session_id", "U+0007"],
    ),
    (
        "NUL in a speaker",
        "json",
        lambda: second_is(conv("nul", [session(turns=[turn(speaker="A\x00na")])])),
        ["#2, session 1, turn 1", "speaker", "U+0000"],
    ),
    (
        "control character in a turn id",
        "json",
        lambda: second_is(conv("tid", [session(turns=[turn(turn_id="t\x1b1")])])),
        ["#2, session 1, turn 1", "turn_id", "U+001B"],
    ),
    (
        "NUL in a JSONL speaker",
        "jsonl",
        lambda: jsonl(
            {
                "conversation_id": "l",
                "session_id": "1",
                "session_date": "2023-05-08",
                "speaker": "Ana",
                "text": "fine",
            },
            {
                "conversation_id": "l",
                "session_id": "2",
                "session_date": "2023-05-09",
                "speaker": "S\x00am",
                "text": "bad",
            },
        ),
        [":2", "speaker", "U+0000"],
    ),
    (
        "the same session twice in one conversation",
        "json",
        lambda: second_is(conv("dup", [session("1"), session("1", date="2023-05-09")])),
        ["#2, session 2", "'dup/1'", "session 1"],
    ),
    (
        "the same session in two conversation objects",
        "json",
        lambda: json.dumps([conv("bad-first"), conv("again"), conv("again")]),
        ["#3, session 1", "'again/1'", "#2, session 1"],
    ),
    ("over the file size cap", "json", big, ["MB", "HYBRID_RAG_MAX_FILE_BYTES"]),
]


GOOD = conv("good", [session(turns=[turn("The good file: we sailed to Hydra yesterday.")])])


def _memory(tmp_path: Path, db_url: str | None = None) -> MemorySystem:
    settings = make_settings(tmp_path, max_file_bytes=MAX_FILE_BYTES)
    if db_url is not None:
        settings = settings.replace(database_url=db_url)
    return MemorySystem(settings, embedder=HashingEmbedder())


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    mem = _memory(tmp_path)
    yield mem
    mem.close()


def transcript_root(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "transcripts"
    root.mkdir()
    sources = tmp_path / "sources.yaml"
    sources.write_text(
        f"state: {tmp_path / 'state.json'}\nroots:\n  - name: talks\n    path: {root}\n"
        "    kind: transcript\n",
        encoding="utf-8",
    )
    return root, sources


def sync(memory: MemorySystem, sources: Path) -> SyncReport:
    cfg = load_sources(sources)
    with open_ledger(cfg.state_path) as ledger:
        return apply_sync(memory, cfg, plan_sync(memory.store, cfg, ledger), ledger)


def assert_refused_whole(memory: MemorySystem, report: SyncReport, bad: Path, says: list[str]):
    assert list(report.failed) == [str(bad)]
    reason = report.failed[str(bad)]
    assert bad.name in reason
    for words in says:
        assert words in reason
    # The good file after it (in sort order) is ingested; nothing of the bad one is stored.
    assert [Path(p).name for p in report.files_done] == ["b-good.json"]
    assert memory.counts()["documents"] == 1
    assert {c.content for c in memory.find_by_tag("conversation_id:good")} == {
        "The good file: we sailed to Hydra yesterday."
    }


@pytest.mark.parametrize(
    ("name", "suffix", "content", "says"), HOSTILE, ids=[case[0] for case in HOSTILE]
)
def test_a_hostile_transcript_is_refused_whole_and_the_sync_goes_on(
    tmp_path: Path,
    memory: MemorySystem,
    name: str,
    suffix: str,
    content: Callable[[], str],
    says: list[str],
) -> None:
    root, sources = transcript_root(tmp_path)
    bad = root / f"a-bad.{suffix}"
    bad.write_text(content(), encoding="utf-8")
    (root / "b-good.json").write_text(json.dumps(GOOD), encoding="utf-8")
    assert_refused_whole(memory, sync(memory, sources), bad, says)


def test_nul_in_a_speaker_is_refused_before_the_store_on_sqlite_and_postgresql(
    tmp_path: Path, db_url: str
) -> None:
    root, sources = transcript_root(tmp_path)
    bad = root / "a-bad.json"
    bad.write_text(second_is(conv("nul", [session(turns=[turn(speaker="A\x00na")])])))
    (root / "b-good.json").write_text(json.dumps(GOOD), encoding="utf-8")
    memory = _memory(tmp_path, db_url)
    try:
        assert_refused_whole(memory, sync(memory, sources), bad, ["speaker", "U+0000"])
    finally:
        memory.close()


def test_a_session_id_another_file_holds_is_refused_and_the_first_file_keeps_it(
    tmp_path: Path, memory: MemorySystem
) -> None:
    root, sources = transcript_root(tmp_path)
    first = root / "a-first.json"
    first.write_text(json.dumps(conv("trip", [session(turns=[turn("From the first file.")])])))
    copy = root / "b-copy.json"
    copy.write_text(json.dumps(conv("trip", [session(turns=[turn("From the copy.")])])))
    report = sync(memory, sources)
    assert [Path(p).name for p in report.files_done] == ["a-first.json"]
    reason = report.failed[str(copy)]
    assert "'trip/1'" in reason and str(first) in reason
    assert {c.content for c in memory.find_by_tag("conversation_id:trip")} == {
        "From the first file."
    }
    # Stable: the next sync neither flips the session to the copy nor retries the copy.
    again = sync(memory, sources)
    assert again.documents_added == again.documents_replaced == 0 and not again.failed
    assert {c.content for c in memory.find_by_tag("conversation_id:trip")} == {
        "From the first file."
    }
