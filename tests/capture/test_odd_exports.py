"""Every file ``import`` reads is stored or counted as refused with a reason (issue: capture
that never stalls, the smaller items): an export whose conversation has no usable id (a
Claude.ai ``uuid`` that is an object, a ChatGPT chat without an id), a date out of range,
a branch whose parents loop. Each held a readable message; none may vanish as "0 stored,
0 refused". Run as a user runs them: ``import`` as a process.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.capture.helpers import cli, found, hook_env, memory


def node(key: str, role: str, text: str, parent: str | None, stamp: float) -> dict[str, Any]:
    message = {
        "id": key,
        "author": {"role": role},
        "create_time": stamp,
        "content": {"content_type": "text", "parts": [text]},
    }
    return {"id": key, "message": message, "parent": parent, "children": []}


def chatgpt(**fields: Any) -> list[dict[str, Any]]:
    words = fields.pop("words")
    chat = {
        "title": "odd",
        "create_time": 1_700_000_000,
        "conversation_id": "c-odd",
        "current_node": "b",
        "mapping": {
            "a": node("a", "user", f"remember {words}", None, 1_700_000_000),
            "b": node("b", "assistant", f"noted {words}", "a", 1_700_000_001),
        },
    }
    chat.update(fields)
    return [{k: v for k, v in chat.items() if v is not None}]


def claude_ai(words: str, uuid: Any) -> list[dict[str, Any]]:
    messages = [
        {"sender": "human", "text": f"remember {words}", "created_at": "2026-01-05T10:00:00Z"},
        {"sender": "assistant", "text": f"noted {words}", "created_at": "2026-01-05T10:00:01Z"},
    ]
    return [{"uuid": uuid, "name": "odd", "chat_messages": messages}]


def looped(words: str, current: str | None) -> list[dict[str, Any]]:
    """A chat whose two messages name each other as parent."""
    [chat] = chatgpt(words=words, current_node=current)
    chat["mapping"]["a"]["parent"] = "b"
    return [chat]


CASES: dict[str, tuple[str, Any, str]] = {
    "claude_ai uuid an object": ("claude_ai", claude_ai("quokka1", {"x": 1}), "quokka1"),
    "claude_ai no uuid": ("claude_ai", claude_ai("quokka2", None), "quokka2"),
    "chatgpt no id": ("chatgpt", chatgpt(words="quokka3", conversation_id=None), "quokka3"),
    "chatgpt id a number": ("chatgpt", chatgpt(words="quokka4", conversation_id=7), "quokka4"),
    "chatgpt time 1e20": ("chatgpt", chatgpt(words="quokka5", create_time=1e20), "quokka5"),
    "chatgpt parents in a loop": ("chatgpt", looped("quokka6", "b"), "quokka6"),
    "chatgpt loop, no current node": ("chatgpt", looped("quokka7", None), "quokka7"),
}


@pytest.mark.parametrize(("kind", "export", "words"), CASES.values(), ids=list(CASES))
def test_an_export_with_a_readable_message_is_stored_and_stored_once(
    kind: str, export: Any, words: str, tmp_path: Path
) -> None:
    env = hook_env(tmp_path)
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(export))
    first = cli("import", kind, str(path), "--space", "odd", "--no-progress", env=env)
    assert first.returncode == 0, first.stderr
    assert "1 sessions stored (1 new, 0 grown), 2 turns" in first.stdout, first.stdout
    again = cli("import", kind, str(path), "--space", "odd", "--no-progress", env=env)
    assert "0 sessions stored (0 new, 0 grown), 0 turns, 1 sessions already" in again.stdout
    with memory(tmp_path, "odd") as system:
        assert len(system.store.document_ids()) == 1
        assert found(system, f"remember {words}")
