"""Codex CLI session rollouts → one conversation per file.

Codex writes each session to ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``,
one record a line: ``{"timestamp", "type", "payload"}`` with ``type`` one of
``session_meta`` (``id``, ``timestamp``, ``cwd``, ``git``, …), ``response_item`` (what
the model saw and said: ``message``, ``function_call``, ``function_call_output``,
``custom_tool_call``, ``reasoning``, …), ``event_msg`` (the UI's copies of the same
talk, token counts), ``turn_context`` and ``compacted``. Older rollouts wrote the
session's ``id``/``timestamp`` as a bare first line and the response items bare, without
``type``/``payload``; both are read.

Kept: what the person and the assistant said, and tool calls and their results as short
quotes (as for Claude Code). Left out: the context Codex injects in the user role
(``<environment_context>``, ``<user_instructions>``, AGENTS.md instructions, …),
developer and system messages, reasoning, the UI's event copies and compaction records.
A line that is not JSON is skipped as in a Claude Code log (a live session's torn last
line); a file none of whose lines is JSON is refused.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from memory_pipeline.ingest.lines import DEFAULT_LIMITS, ReadLimits
from memory_pipeline.sources.conversations import (
    TOOL_TEXT_LIMIT,
    Calls,
    Conversation,
    Message,
    TimeSpan,
    clip,
    jsonl_records,
    parse_time,
    quote,
    remember_call,
    title_from,
    tool_result,
)

ORIGIN = "codex"
# User-role messages that are Codex's own context for the model, not the person speaking.
INJECTED_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "# agents.md instructions",
    "<turn_aborted>",
    "<context_update>",
    "<subagent_notification>",
    "<skill>",
    "<user_shell_command>",
)
TOOL_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
TOOL_OUTPUTS = ("function_call_output", "custom_tool_call_output")
ITEM_TYPES = ("message", "reasoning", *TOOL_CALLS, *TOOL_OUTPUTS)
UUID_TAIL = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\Z")


def _bare_meta(first: dict[str, Any]) -> dict[str, Any]:
    """An older rollout's metadata: its bare first line."""
    return first if "type" not in first and isinstance(first.get("id"), str) else {}


def _session_meta(record: dict[str, Any]) -> dict[str, Any] | None:
    if record.get("type") == "session_meta" and isinstance(record.get("payload"), dict):
        return record["payload"]
    return None


def _item(record: dict[str, Any]) -> dict[str, Any] | None:
    """The response item a line holds (wrapped, or bare in older rollouts)."""
    if record.get("type") == "response_item":
        payload = record.get("payload")
        return payload if isinstance(payload, dict) else None
    if "payload" not in record and record.get("type") in ITEM_TYPES:
        return record
    return None


def _content_text(content: Any) -> str:
    parts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") in ("input_text", "output_text", "text") and isinstance(
            block.get("text"), str
        ):
            parts.append(block["text"].strip())
        elif block.get("type") == "input_image":
            parts.append("[image]")
    return "\n\n".join(p for p in parts if p)


def _output_text(output: Any) -> str:
    """A tool's output: text, a JSON string of ``{"output": …}``, or content items."""
    if isinstance(output, str):
        try:
            decoded = json.loads(output)
        except (ValueError, RecursionError):
            return output
        return _output_text(decoded) if isinstance(decoded, dict) else output
    if isinstance(output, dict):
        for key in ("output", "content"):
            if isinstance(output.get(key), str | list):
                return _output_text(output[key])
        return ""
    return _content_text(output)


def _injected(text: str) -> bool:
    return text.lstrip().lower().startswith(INJECTED_PREFIXES)


def _message(item: dict[str, Any], record: dict[str, Any], calls: Calls) -> Message | None:
    at = parse_time(record.get("timestamp"))
    kind = item.get("type")
    if kind == "message":
        role = item.get("role")
        text = _content_text(item.get("content"))
        if role not in ("user", "assistant") or not text or (role == "user" and _injected(text)):
            return None
        return Message("human" if role == "user" else "assistant", at, text)
    if kind in TOOL_CALLS:
        name = item.get("name") or ("shell" if kind == "local_shell_call" else "?")
        args = next((item[k] for k in ("arguments", "input", "action") if k in item), "")
        remember_call(calls, item.get("call_id"), str(name), args)
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False, sort_keys=True)
        return Message("assistant", at, quote(f"tool {name}", clip(args, TOOL_TEXT_LIMIT)))
    if kind in TOOL_OUTPUTS:
        call = calls.get(str(item.get("call_id")))
        return Message("tool", at, tool_result(_output_text(item.get("output")), call))
    return None  # reasoning and item kinds this reader does not know


def _session_id(meta: dict[str, Any], path: Path) -> str:
    if isinstance(meta.get("id"), str) and meta["id"].strip():
        return str(meta["id"]).strip()
    tail = UUID_TAIL.search(path.stem)
    return tail.group(0) if tail else path.stem


def parse_codex_session(path: Path, limits: ReadLimits = DEFAULT_LIMITS) -> list[Conversation]:
    """One Codex CLI rollout → one conversation (none when it holds nobody's words). The
    rollout is streamed whatever its size (``limits.line_bytes`` bounds one line)."""
    calls: Calls = {}
    messages: list[Message] = []
    meta: dict[str, Any] | None = None
    bare: dict[str, Any] = {}
    span = TimeSpan()
    records = jsonl_records(path, limits.line_bytes, "a Codex CLI session rollout")
    for n, record in enumerate(records):
        if n == 0:
            bare = _bare_meta(record)
        if meta is None:
            meta = _session_meta(record)
        span.add(record.get("timestamp"))
        item = _item(record)
        if item is not None and (message := _message(item, record, calls)) is not None:
            messages.append(message)
    if not any(m.speaker == "human" for m in messages):
        return []  # only tool traffic or injected context: nothing anyone said
    meta = bare if meta is None else meta
    session_id = _session_id(meta, path)
    span.add(meta.get("timestamp"))
    git: dict[str, Any] = meta["git"] if isinstance(meta.get("git"), dict) else {}
    context = tuple(
        (key, value)
        for key, value in (("cwd", meta.get("cwd")), ("git branch", git.get("branch")))
        if isinstance(value, str) and value
    )
    title = title_from(messages) or f"Codex session {session_id[:8]}"
    return [
        Conversation(
            ORIGIN,
            session_id,
            title,
            span.first,
            span.last,  # the last timestamp is the last activity
            tuple(messages),
            context,
        )
    ]
