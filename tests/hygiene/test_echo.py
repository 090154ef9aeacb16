"""No echo: a captured session does not store again what the memory handed it.

A real session, end to end: a note is ingested; ``recall --hook`` (the real command) hands
the project's memory to the session as Claude Code takes it; the agent searches the memory
through a real stdio MCP client; the transcript records the recall (as Claude Code's own
attachment entry and, as other clients do, inside a message) and the search's result as
Claude Code records an MCP tool result; then the real capture hook stores the session. The
stored session holds the question, the call and its query, and none of what came from the
memory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from memory_pipeline.sources.conversations import parse_claude_code_session
from memory_pipeline.sources.status import conversation_source
from serving.harness import stdio_params, structured
from tests.capture.helpers import (
    cli,
    hook_env,
    memory,
    payload,
    space_of,
    spool_of,
    wait_idle,
)

NOTE = """---
knowledge_type: principle
importance: 0.9
---
# Ledger locking

The ledger write takes the quetzalcoatl flock before every sync; a second sync waits on
it for at most thirty seconds and is then recorded as failed.
"""
FROM_MEMORY = ("quetzalcoatl", "thirty seconds")
QUERY = "how long does a sync wait for the ledger lock"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def record(n: int, role: str, content: Any, **more: Any) -> dict[str, Any]:
    return {
        "parentUuid": f"e-{n - 1}" if n else None,
        "isSidechain": False,
        "cwd": "",
        "sessionId": "echo",
        "type": role,
        "message": {"role": role, "content": content},
        "uuid": f"e-{n}",
        "timestamp": f"2026-11-21T09:00:{n:02d}Z",
        **more,
    }


@pytest.mark.anyio
async def test_a_session_that_searched_the_memory_stores_no_content_it_returned(
    tmp_path: Path,
) -> None:
    env = hook_env(tmp_path)
    project = tmp_path / "orbit"
    project.mkdir()
    note = tmp_path / "ledger.md"
    note.write_text(NOTE)
    done = cli("ingest", str(note), "--space", space_of(project), env=env)
    assert done.returncode == 0, done.stderr

    hook = cli("recall", "--hook", env=env, stdin=json.dumps({"cwd": str(project)}))
    assert hook.returncode == 0, hook.stderr
    recalled = json.loads(hook.stdout)["hookSpecificOutput"]["additionalContext"]
    assert all(word in recalled for word in FROM_MEMORY)  # the recall holds the note

    server_env = {**env, "HYBRID_RAG_SPACE": space_of(project)}
    async with Client(stdio_params(server_env, project)) as client:
        result = await client.call_tool("hybrid_search", {"query": QUERY, "top_k": 3})
    hits = structured(result)["chunks"]
    assert hits and all(word in hits[0]["content"] for word in FROM_MEMORY)
    returned = [block.model_dump(mode="json", exclude_none=True) for block in result.content]

    records = [
        # Claude Code's record of what the SessionStart hook added, and the same text inside
        # a message, as a client without entries of its own would keep it
        {
            "type": "attachment",
            "uuid": "hook",
            "parentUuid": None,
            "attachment": {"type": "hook_additional_context", "content": [recalled]},
        },
        record(0, "user", f"{recalled}\nWhy do syncs fail after a while?"),
        record(1, "assistant", [{"type": "text", "text": "Let me check the memory."}]),
        record(
            2,
            "assistant",
            [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "mcp__memory-pipeline__hybrid_search",
                    "input": {"query": QUERY, "top_k": 3},
                }
            ],
        ),
        record(3, "user", [{"type": "tool_result", "tool_use_id": "toolu_1", "content": returned}]),
        record(4, "assistant", [{"type": "text", "text": "A second sync gives up on the lock."}]),
    ]
    transcript = tmp_path / "claude" / "echo.jsonl"
    transcript.parent.mkdir()
    transcript.write_text("".join(json.dumps(r) + "\n" for r in records))

    captured = cli("capture", env=env, stdin=payload(transcript, project))
    assert captured.returncode == 0, captured.stderr
    wait_idle(spool_of(tmp_path))

    with memory(tmp_path, space_of(project)) as system:
        [conv] = parse_claude_code_session(transcript)
        [doc] = system.store.documents_by_source(conversation_source(conv))
        stored = "\n".join(c.content for c in system.store.document_chunks(doc.doc_id))
        assert "Why do syncs fail after a while?" in stored
        assert "tool mcp__memory-pipeline__hybrid_search" in stored
        assert f'[memory hybrid_search for "{QUERY}"' in stored
        assert "A second sync gives up on the lock." in stored
        assert not [word for word in FROM_MEMORY if word in stored]
        assert "memory-recall" not in stored
        assert system.system_stats().redactions.get("memory-recall") == 1


RESULT = "The ledger write takes the quetzalcoatl flock before every sync."


def _claude_code(folder: Path) -> Path:
    call = {
        "type": "tool_use",
        "id": "t1",
        "name": "mcp__notes__hybrid_search",
        "input": {"query": "ledger lock"},
    }
    done = {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": [{"type": "text", "text": RESULT}],
    }
    rows = [
        record(0, "user", "How is the ledger locked?"),
        record(1, "assistant", [call]),
        record(2, "user", [done]),
    ]
    path = folder / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _codex(folder: Path) -> Path:
    def item(payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": "2026-11-21T09:00:00Z", "type": "response_item", "payload": payload}

    rows = [
        {"timestamp": "2026-11-21T09:00:00Z", "type": "session_meta", "payload": {"id": "cx"}},
        item(
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "How is the ledger locked?"}],
            }
        ),
        item(
            {
                "type": "function_call",
                "name": "notes__hybrid_search",
                "call_id": "c1",
                "arguments": json.dumps({"query": "ledger lock"}),
            }
        ),
        item({"type": "function_call_output", "call_id": "c1", "output": RESULT}),
    ]
    path = folder / "rollout-2026-11-21T09-00-00-cx.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _chatgpt(folder: Path) -> Path:
    def message(n: int, role: str, text: str, **more: Any) -> dict[str, Any]:
        return {
            "id": f"m{n}",
            "author": {"role": role, **more.pop("author", {})},
            "create_time": 1763715600.0 + n,
            "content": {"content_type": "text", "parts": [text]},
            "recipient": more.pop("recipient", "all"),
        }

    msgs = [
        message(0, "user", "How is the ledger locked?"),
        message(1, "assistant", '{"query": "ledger lock"}', recipient="memory.hybrid_search"),
        message(2, "tool", RESULT, author={"name": "memory.hybrid_search"}),
    ]
    mapping = {
        m["id"]: {"id": m["id"], "message": m, "parent": f"m{n - 1}" if n else None}
        for n, m in enumerate(msgs)
    }
    path = folder / "conversations.json"
    path.write_text(
        json.dumps([{"id": "g", "title": "t", "mapping": mapping, "current_node": "m2"}])
    )
    return path


def _claude_ai(folder: Path) -> Path:
    blocks = [
        {
            "type": "tool_use",
            "id": "u1",
            "name": "hybrid_search",
            "input": {"query": "ledger lock"},
        },
        {
            "type": "tool_result",
            "tool_use_id": "u1",
            "content": [{"type": "text", "text": RESULT}],
        },
    ]
    chat = [
        {
            "uuid": "a",
            "sender": "human",
            "created_at": "2026-11-21T09:00:00Z",
            "text": "How is the ledger locked?",
            "content": [{"type": "text", "text": "How is the ledger locked?"}],
        },
        {
            "uuid": "b",
            "sender": "assistant",
            "created_at": "2026-11-21T09:00:01Z",
            "text": "",
            "content": blocks,
        },
    ]
    export = [
        {
            "uuid": "ca",
            "name": "t",
            "created_at": "2026-11-21T09:00:00Z",
            "updated_at": "2026-11-21T09:00:01Z",
            "chat_messages": chat,
        }
    ]
    path = folder / "claude-ai.json"
    path.write_text(json.dumps(export))
    return path


@pytest.mark.parametrize("fmt", ["claude_code", "codex", "chatgpt", "claude_ai"])
def test_each_format_keeps_the_call_and_stores_its_result_as_one_line(
    fmt: str, tmp_path: Path
) -> None:
    from memory_pipeline.sources.status import READERS, SourceKind

    write = {
        "claude_code": _claude_code,
        "codex": _codex,
        "chatgpt": _chatgpt,
        "claude_ai": _claude_ai,
    }
    [conv] = READERS[SourceKind(fmt)](write[fmt](tmp_path))
    text = conv.to_markdown()
    assert "How is the ledger locked?" in text
    assert "hybrid_search" in text and "quetzalcoatl" not in text
    assert '[memory hybrid_search for "ledger lock": its result came from this memory' in text
