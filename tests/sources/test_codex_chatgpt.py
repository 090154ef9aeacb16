"""Codex CLI rollouts and a ChatGPT export → conversations (synthetic samples in tests/fixtures)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.sources.chatgpt import parse_chatgpt_export
from memory_pipeline.sources.codex import parse_codex_session
from tests.test_pipeline_support import FIXTURES

CODEX = FIXTURES / "codex-sessions"
CODEX_NEW = next((CODEX / "2026").rglob("rollout-*.jsonl"))
CODEX_OLD = next((CODEX / "2025").rglob("rollout-*.jsonl"))
CHATGPT = FIXTURES / "chatgpt-export" / "conversations.json"


def test_a_codex_session_keeps_the_talk_and_short_tool_calls_in_order() -> None:
    [conv] = parse_codex_session(CODEX_NEW)
    assert conv.origin == "codex" and conv.session_id == "0199a1b2-3c4d-7e5f-8a9b-0c1d2e3f4a5b"
    assert conv.source_title == "codex:0199a1b2-3c4d-7e5f-8a9b-0c1d2e3f4a5b"
    assert conv.title.startswith("The ledger write races when two syncs start together.")
    assert ("cwd", "/home/dev/orbit") in conv.context
    assert ("git branch", "fix/ledger-lock") in conv.context
    speakers = [m.speaker for m in conv.messages]
    # user, call, result, patch, result, answer, then the second turn
    assert speakers == [
        "human", "assistant", "tool", "assistant", "tool", "assistant", "human", "assistant"
    ]  # fmt: skip
    first, call, result, patch, _, answer, question, reply = conv.messages
    assert first.text.startswith("The ledger write races")
    assert "tool shell" in call.text and "def record" in call.text
    assert "tool result" in result.text and "57:    def record" in result.text
    assert "tool apply_patch" in patch.text and "exclusive_lock" in patch.text
    assert answer.text.startswith("The ledger now takes an exclusive lock")
    assert question.text == "ロックのタイムアウトは何秒にしましたか？"
    assert reply.text == "タイムアウトは30秒です。超えた場合は同期を失敗として記録します。"
    assert first.at is not None and first.at.isoformat() == "2026-10-14T09:12:10.120000+00:00"
    assert [m.at for m in conv.messages] == sorted(m.at for m in conv.messages if m.at)
    assert conv.started_at is not None and conv.started_at.isoformat().startswith(
        "2026-10-14T09:12:03.377"
    )
    assert "transcript_last_activity:2026-10-14T09:20:09.500Z" in conv.tags()


@pytest.mark.parametrize(
    "dropped",
    [
        "<environment_context>",  # injected by Codex in the user role
        "AGENTS.md instructions",
        "Run the tests with pytest -q.",
        "<permissions instructions>",  # a developer message
        "You are Codex",  # base instructions
        "Considering fcntl",  # reasoning summary: private reasoning, as Claude Code's thinking
        "gpt-5-codex",  # turn context
    ],
)
def test_a_codex_session_drops_injected_context_and_reasoning(dropped: str) -> None:
    [conv] = parse_codex_session(CODEX_NEW)
    assert dropped not in conv.to_markdown()


def test_a_codex_session_does_not_repeat_event_copies_of_messages() -> None:
    [conv] = parse_codex_session(CODEX_NEW)
    md = conv.to_markdown()
    assert md.count("Add a file lock around it.") == 2  # the title and the turn, once each


def test_an_older_codex_rollout_is_read_from_its_bare_first_line() -> None:
    [conv] = parse_codex_session(CODEX_OLD)
    assert conv.session_id == "0196a8f2-51c7-7d30-b2e4-9e81c3d05a77"
    assert [m.speaker for m in conv.messages] == ["human", "assistant", "tool", "assistant"]
    assert conv.messages[0].text == "Which BM25 parameters does the index use?"
    assert "retrieval/bm25.py:12: K1 = 1.2" in conv.messages[2].text
    assert "Prefer small commits." not in conv.to_markdown()
    assert conv.started_at is not None and conv.started_at.isoformat().startswith(
        "2025-05-07T17:24"
    )
    assert ("git branch", "main") in conv.context


def test_a_codex_session_without_meta_is_named_by_its_file_and_a_torn_line_is_skipped(
    tmp_path: Path,
) -> None:
    sid = "0197b0c1-d2e3-7f40-8a51-b2c3d4e5f607"
    path = tmp_path / f"rollout-2026-01-02T03-04-05-{sid}.jsonl"
    line = {
        "timestamp": "2026-01-02T03:04:06Z",
        "type": "response_item",
        "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
    }  # fmt: skip
    path.write_text(json.dumps(line) + '\n{"timestamp": "2026-01-02T03:04:09Z", "ty')
    [conv] = parse_codex_session(path)
    assert conv.session_id == sid and [m.text for m in conv.messages] == ["hi"]


def test_a_codex_session_with_only_context_yields_nothing(tmp_path: Path) -> None:
    path = tmp_path / "rollout-x.jsonl"
    lines = [
        {"timestamp": "2026-01-02T03:04:05Z", "type": "session_meta", "payload": {"id": "s"}},
        {
            "timestamp": "2026-01-02T03:04:05Z",
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "<environment_context>x"}],
            },
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert parse_codex_session(path) == []


def test_a_chatgpt_export_follows_the_current_branch() -> None:
    convs = {c.session_id: c for c in parse_chatgpt_export(CHATGPT)}
    a = convs["6710c0de-0a1b-4c2d-8e3f-4a5b6c7d8e9f"]
    assert a.origin == "chatgpt" and a.title == "HNSW or IVF for a laptop"
    assert [m.speaker for m in a.messages] == [
        "human", "assistant", "human", "assistant", "tool", "assistant"
    ]  # fmt: skip
    md = a.to_markdown()
    assert "Is HNSW better than IVF?" not in md and "superseded" not in md  # the edited-away branch
    assert a.messages[0].text == "For 1M chunks on one laptop, is HNSW or IVF the better index?"
    assert a.messages[0].at is not None and a.messages[0].at.isoformat() == (
        "2026-09-30T14:03:40.500000+00:00"
    )
    assert a.started_at is not None and a.started_at.isoformat() == "2026-09-30T14:02:10+00:00"
    assert "transcript_last_activity:2026-09-30T14:06:21.000Z" in a.tags()
    image = a.messages[2].text
    assert "[image]" in image and "Here is my latency chart." in image
    assert "attachment latency.png" in image and "file-service://" not in image
    assert "tool python" in a.messages[3].text and "statistics.median" in a.messages[3].text
    assert "tool result" in a.messages[4].text and "2.5" in a.messages[4].text


def test_a_chatgpt_export_drops_hidden_system_and_reasoning_and_empty_conversations() -> None:
    convs = parse_chatgpt_export(CHATGPT)
    assert [c.title for c in convs] == ["HNSW or IVF for a laptop", "再インデックスの要否"]
    b = convs[1]
    assert b.session_id == "6711d1ef-1b2c-4d3e-9f40-5b6c7d8e9fa0"  # from "id": no conversation_id
    assert [m.speaker for m in b.messages] == ["human", "assistant"]
    assert (
        b.messages[1].text
        == "はい、必要です。ベクトルの空間が変わるため、全チャンクを再埋め込みします。"
    )
    md = b.to_markdown()
    assert "backend developer" not in md and "Answer briefly" not in md  # custom instructions
    assert "private reasoning" not in md
    assert "system" not in convs[0].speakers


def test_a_chatgpt_conversation_without_current_node_ends_at_its_latest_message(
    tmp_path: Path,
) -> None:
    data = json.loads(CHATGPT.read_text())
    del data[0]["current_node"]
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(data))
    conv = parse_chatgpt_export(path)[0]
    assert conv.messages == parse_chatgpt_export(CHATGPT)[0].messages


@pytest.mark.parametrize(
    ("reader", "name", "content", "fragment"),
    [
        (parse_chatgpt_export, "conversations.json", "{not json", "not valid JSON"),
        (parse_chatgpt_export, "conversations.json", '{"title": "x"}', "JSON array"),
        (parse_codex_session, "rollout-a.jsonl", "garbage\nmore\n", "none of its 2 lines"),
    ],
)
def test_unreadable_files_are_refused_with_the_file_named(
    tmp_path: Path, reader, name: str, content: str, fragment: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(InvalidInputError, match=fragment) as err:
        reader(path)
    assert str(path) in str(err.value)


def test_rendering_is_deterministic() -> None:
    for parse, path in ((parse_codex_session, CODEX_NEW), (parse_chatgpt_export, CHATGPT)):
        assert [c.to_markdown() for c in parse(path)] == [c.to_markdown() for c in parse(path)]


def test_a_chatgpt_title_is_one_line(tmp_path: Path) -> None:
    data = json.loads(CHATGPT.read_text())
    data[0]["title"] = "  HNSW or IVF\nfor a\tlaptop "
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(data))
    assert parse_chatgpt_export(path)[0].title == "HNSW or IVF for a laptop"
