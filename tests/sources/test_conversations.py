"""Conversation exports → Markdown documents (sample exports from tests/fixtures)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.sources.conversations import (
    parse_claude_ai_export,
    parse_claude_code_session,
)
from tests.test_pipeline_support import FIXTURES

EXPORT = FIXTURES / "claude-ai-export" / "conversations.json"
SESSION = next((FIXTURES / "claude-code-projects").rglob("*.jsonl"))
SESSION_ID = "4f35e220-c435-4cf7-b9b9-f40426042847"


def test_claude_ai_export_one_document_per_conversation_with_messages() -> None:
    [conv] = parse_claude_ai_export(EXPORT)  # the second conversation has no messages
    assert conv.session_id == "5f1c2a9e-0b7d-4e43-9a57-2d1f3c9b7a10"
    assert conv.title == "Choosing a vector index for 1M chunks"
    assert conv.speakers == ["human", "assistant"]
    assert conv.last_activity is not None and conv.last_activity.isoformat().startswith(
        "2026-09-02T09:01:44.120"
    )
    tags = conv.tags()
    assert f"transcript_of:{conv.session_id}" in tags
    assert "transcript_last_activity:2026-09-02T09:01:44.120Z" in tags
    md = conv.to_markdown()
    assert md.startswith("# Choosing a vector index for 1M chunks\n")
    assert "- started: 2026-09-02 08:14 UTC" in md and "- last activity: 2026-09-02 09:01 UTC" in md
    assert "設計書にIVFを採用したと記録してください。" in md
    assert "attachment bench.txt" in md and "flat 128ms ivf 2.5ms" in md


def test_claude_code_session_renders_the_thread_with_tools_and_without_thinking() -> None:
    [conv] = parse_claude_code_session(SESSION)
    assert conv.session_id == SESSION_ID
    assert conv.title == "Fix flaky index publication test"  # from the summary record
    assert conv.speakers == ["human", "assistant", "tool"]
    assert ("cwd", "/home/dev/orbit") in conv.context
    md = conv.to_markdown()
    assert "Probably a rename race" not in md  # thinking is private reasoning, not memory
    assert "tool Read" in md and "os.rename(tmp, final)" in md
    assert "Fsync the file and its directory before the rename." in md
    assert "transcript_last_activity:2026-11-20T10:03:02.442Z" in conv.tags()


def test_rendering_is_deterministic() -> None:
    first = parse_claude_code_session(SESSION)[0].to_markdown()
    assert parse_claude_code_session(SESSION)[0].to_markdown() == first


def _record(uuid: str, parent: str | None, kind: str, ts: str, text: str) -> dict[str, object]:
    return {
        "type": kind,
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "s-1",
        "timestamp": ts,
        "message": {"role": kind, "content": text},
    }


def test_an_edited_branch_keeps_the_latest_thread_and_skips_unknown_records(tmp_path: Path) -> None:
    lines = [
        _record("a", None, "user", "2026-01-01T10:00:00Z", "first question"),
        _record("b", "a", "assistant", "2026-01-01T10:00:05Z", "old answer"),
        _record("c", None, "user", "2026-01-01T10:01:00Z", "edited question"),
        _record("d", "c", "assistant", "2026-01-01T10:01:05Z", "new answer"),
        {"type": "file-history-snapshot", "snapshot": {}},
        {"type": "something-new", "uuid": "z", "timestamp": "2026-01-01T10:02:00Z"},
    ]
    path = tmp_path / "s-1.jsonl"
    text = "\n".join(json.dumps(r) for r in lines) + '\n{"type": "user", "tor'  # torn last line
    path.write_text(text)
    [conv] = parse_claude_code_session(path)
    md = conv.to_markdown()
    assert "edited question" in md and "new answer" in md
    assert "old answer" not in md
    assert conv.title == "edited question"  # no summary: the first human message
    assert conv.last_activity is not None and conv.last_activity.minute == 2  # the last timestamp


def test_a_session_without_messages_yields_nothing(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text('{"type": "summary", "summary": "x", "leafUuid": "q"}\n')
    assert parse_claude_code_session(path) == []


@pytest.mark.parametrize(
    ("name", "content", "fragment"),
    [
        ("conversations.json", "{not json", "not valid JSON"),
        ("conversations.json", '{"uuid": "x"}', "JSON array"),
        ("broken.jsonl", "garbage\nmore garbage\n", "none of its 2 lines"),
    ],
)
def test_unparseable_exports_raise_with_the_reason(
    tmp_path: Path, name: str, content: str, fragment: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    parse = parse_claude_code_session if name.endswith(".jsonl") else parse_claude_ai_export
    with pytest.raises(InvalidInputError, match=fragment):
        parse(path)


def test_terminal_escapes_in_tool_output_are_dropped_not_refused() -> None:
    from memory_pipeline.metadata import check_text
    from memory_pipeline.sources.conversations import Conversation, Message

    conv = Conversation(
        origin="claude-code",
        session_id="s1",
        title="colours",
        started_at=None,
        last_activity=None,
        messages=(Message("tool", None, "\x1b[32mPASSED\x1b[0m 3 tests\x00"),),
    )
    md = conv.to_markdown()
    assert "[32mPASSED[0m 3 tests" in md and "\x1b" not in md and "\x00" not in md
    assert check_text("text", md, multiline=True) == md
