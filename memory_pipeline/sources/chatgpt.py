"""A ChatGPT data export's ``conversations.json`` → one conversation per chat.

The file is a JSON array of conversations: ``title``, ``create_time``/``update_time``
(epoch seconds), ``conversation_id`` (or ``id``), ``current_node`` and ``mapping``, a
tree of nodes (``id``, ``message``, ``parent``, ``children``). Editing a message or
regenerating an answer branches the tree; the conversation as last seen is the branch
from ``current_node`` up through ``parent`` to the root (without ``current_node``: the
branch ending at the latest message). Other branches are left out.

A message has ``author.role`` (``user``/``assistant``/``system``/``tool``),
``create_time``, ``recipient`` and ``content`` by ``content_type``: ``text`` and
``multimodal_text`` (``parts``: strings, or objects such as an image pointer, kept as
``[image]``), ``code``, ``execution_output``, ``tether_quote``,
``tether_browsing_display``, … Kept: what the person and the assistant said; the
assistant's calls to a tool (``recipient`` other than ``all``) and tool messages as short
quotes, as for Claude Code; attachments by name. Left out: system messages, messages
hidden from the conversation (``metadata.is_visually_hidden_from_conversation``, custom
instructions), reasoning (``thoughts``, ``reasoning_recap``) and content types this
reader does not know.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.ingest.lines import DEFAULT_LIMITS, ReadLimits
from memory_pipeline.sources.conversations import (
    TOOL_TEXT_LIMIT,
    Calls,
    Conversation,
    Message,
    clip,
    given_or_unnamed,
    quote,
    read_export_array,
    time_problem,
    title_from,
    tool_result,
)

ORIGIN = "chatgpt"
SPEAKERS = {"user": "human", "assistant": "assistant", "tool": "tool"}
TEXT_FIELDS = {  # content types whose words are in one field
    "code": "text",
    "execution_output": "text",
    "system_error": "text",
    "tether_quote": "text",
    "tether_browsing_display": "result",
}


def epoch_time(value: Any) -> dt.datetime | None:
    """Epoch seconds as a UTC time, or None when none or it cannot date a conversation."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        stamp = dt.datetime.fromtimestamp(value, dt.UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return stamp if time_problem(stamp) is None else None


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part.strip()
    if not isinstance(part, dict):
        return ""
    if part.get("content_type") == "image_asset_pointer":
        return "[image]"
    return part["text"].strip() if isinstance(part.get("text"), str) else ""


def _content_text(content: Any) -> str:
    if not isinstance(content, dict):
        return ""
    kind = content.get("content_type")
    if kind in ("text", "multimodal_text") and isinstance(content.get("parts"), list):
        return "\n\n".join(t for t in (_part_text(p) for p in content["parts"]) if t)
    field = TEXT_FIELDS.get(str(kind))
    value = content.get(field) if field else None
    return value.strip() if isinstance(value, str) else ""


def _message(raw: dict[str, Any], calls: Calls) -> Message | None:
    """``calls``: the last call's arguments to each tool so far, by the tool's name (a tool
    message names its tool as its author, not the call it answers)."""
    author = raw.get("author")
    speaker = SPEAKERS.get(str(author.get("role"))) if isinstance(author, dict) else None
    meta: dict[str, Any] = raw["metadata"] if isinstance(raw.get("metadata"), dict) else {}
    hidden = meta.get("is_visually_hidden_from_conversation") or meta.get("is_user_system_message")
    if speaker is None or hidden:
        return None
    text = _content_text(raw.get("content"))
    recipient = raw.get("recipient")
    if speaker == "assistant" and isinstance(recipient, str) and recipient != "all" and text:
        calls[recipient] = (recipient, text)
        text = quote(f"tool {recipient}", clip(text, TOOL_TEXT_LIMIT))
    elif speaker == "tool" and text:
        name = author.get("name") if isinstance(author, dict) else None
        text = tool_result(text, calls.get(name, (name, None)) if isinstance(name, str) else None)
    for att in meta.get("attachments") or []:
        if isinstance(att, dict):
            text = (text + "\n\n" + quote(f"attachment {att.get('name') or 'file'}", "")).strip()
    if not text:
        return None
    return Message(speaker, epoch_time(raw.get("create_time")), text)


def _branch(mapping: dict[str, Any], current: Any) -> list[dict[str, Any]]:
    """The messages from the root to ``current`` (default: the latest message), in order."""
    nodes = {k: n for k, n in mapping.items() if isinstance(n, dict)}
    if not isinstance(current, str) or current not in nodes:
        timed = [
            (
                epoch_time(n["message"].get("create_time"))
                or dt.datetime.min.replace(tzinfo=dt.UTC),
                i,
                k,
            )
            for i, (k, n) in enumerate(nodes.items())
            if isinstance(n.get("message"), dict)
        ]
        if not timed:
            return []
        current = max(timed)[2]
    chain: list[dict[str, Any]] = []
    seen: set[str] = set()
    node_id: Any = current
    while isinstance(node_id, str) and node_id in nodes and node_id not in seen:
        seen.add(node_id)
        node = nodes[node_id]
        if isinstance(node.get("message"), dict):
            chain.append(node["message"])
        node_id = node.get("parent")
    return chain[::-1]


def _conversation(raw: dict[str, Any]) -> Conversation | None:
    if not isinstance(raw.get("mapping"), dict):
        return None
    branch = _branch(raw["mapping"], raw.get("current_node"))
    calls: Calls = {}
    messages = tuple(m for m in (_message(r, calls) for r in branch) if m is not None)
    if not any(m.speaker == "human" for m in messages):
        return None  # an empty chat holds nothing to remember
    cid = given_or_unnamed(raw.get("conversation_id") or raw.get("id"), messages)
    stamps = [m.at for m in messages if m.at]
    title = raw.get("title")
    return Conversation(
        ORIGIN,
        cid,
        (" ".join(title.split()) if isinstance(title, str) else "")  # a title is one line
        or title_from(messages)
        or f"ChatGPT conversation {cid[:8]}",
        epoch_time(raw.get("create_time")) or (min(stamps) if stamps else None),
        epoch_time(raw.get("update_time")) or (max(stamps) if stamps else None),
        messages,
    )


def parse_chatgpt_export(path: Path, limits: ReadLimits = DEFAULT_LIMITS) -> list[Conversation]:
    """Every conversation of a ChatGPT export's ``conversations.json`` that has a message."""
    data = read_export_array(path, limits.file_bytes, "ChatGPT")
    if data and not any(isinstance(c, dict) and isinstance(c.get("mapping"), dict) for c in data):
        raise InvalidInputError(
            f"{path}: none of its {len(data)} entries is a ChatGPT conversation (an object with "
            "a mapping of messages); is it another tool's export?"
        )
    return [c for c in (_conversation(r) for r in data if isinstance(r, dict)) if c is not None]
