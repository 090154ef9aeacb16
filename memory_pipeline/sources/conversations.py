"""Conversation exports → one Markdown document per conversation.

Two formats (see the sample exports' FORMATS notes): a Claude.ai data export
(``conversations.json``, a JSON array of conversations) and Claude Code session
logs (``<session-id>.jsonl``, one record per line). Neither has an official
schema and both change between versions, so parsing is defensive: unknown record
types, blocks and fields are skipped; only a file that is not JSON at all (or not
the expected top-level shape) is an error.

The rendered document is deterministic (same conversation, same bytes), so a
re-import of an unchanged conversation is recognised by the store as well.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.hygiene.echo import echo_line, own_tool
from memory_pipeline.ingest.loaders import DEFAULT_MAX_BYTES, LoadedDocument, load_text, read_capped
from memory_pipeline.ingest.turns import TurnText
from memory_pipeline.metadata import (
    CONVERSATION_TAG,
    TRANSCRIPT_LAST_ACTIVITY,
    TRANSCRIPT_OF,
    strip_controls,
)

TOOL_TEXT_LIMIT = 600  # tool inputs and results are context, not knowledge: keep them short
ATTACHMENT_LIMIT = 2000
TITLE_LIMIT = 80


@dataclass(frozen=True)
class Message:
    speaker: str  # "human" / "assistant", or a person's name in a transcript
    at: dt.datetime | None
    text: str
    turn_id: str | None = None  # the id its source gives the turn; None: its position


@dataclass(frozen=True)
class Conversation:
    origin: str  # "claude-ai" | "claude-code" | "codex" | "chatgpt" | "transcript"
    session_id: str
    title: str
    started_at: dt.datetime | None
    last_activity: dt.datetime | None
    messages: tuple[Message, ...]
    context: tuple[tuple[str, str], ...] = ()  # extra header lines, e.g. ("cwd", "/home/x")
    # The conversation a session belongs to, when one has several (a transcript's).
    conversation_id: str | None = None

    @property
    def source_title(self) -> str:
        """The stable name the document is stored under (``text:<this>``): one per session."""
        return f"{self.origin}:{self.session_id}"

    @property
    def speakers(self) -> list[str]:
        return list(dict.fromkeys(m.speaker for m in self.messages))

    def tags(self) -> list[str]:
        """What the stored transcript is tagged with (docs/conversations.md, "Tags").

        The tags say *transcript*: a summary of the same session (the session-to-memory
        agent's) is tagged ``summary_of:`` instead, so neither's lookup finds the other.
        """
        tags = [CONVERSATION_TAG, self.origin, f"{TRANSCRIPT_OF}{self.session_id}"]
        if self.conversation_id is not None:
            tags.append(f"conversation_id:{self.conversation_id}")
        if self.last_activity is not None:
            tags.append(f"{TRANSCRIPT_LAST_ACTIVITY}{iso(self.last_activity)}")
        return tags

    def to_markdown(self) -> str:
        lines = [f"# {self.title}", ""]
        lines.append(f"- session: {self.session_id} ({self.origin})")
        for key, value in self.context:
            lines.append(f"- {key}: {value}")
        lines.append(f"- started: {human_time(self.started_at)}")
        lines.append(f"- last activity: {human_time(self.last_activity)}")
        lines.append(f"- speakers: {', '.join(self.speakers)}")
        for m in self.messages:
            turn = f" · {m.turn_id}" if m.turn_id else ""
            lines += ["", f"## {m.speaker} — {human_time(m.at)}{turn}", "", m.text.strip()]
        # Tool output in a session may carry terminal escapes; they would refuse it whole.
        return strip_controls("\n".join(lines)) + "\n"

    def turn_texts(self) -> tuple[TurnText, ...]:
        """The turns as the chunker takes them: ids from the source or by position, and a
        turn with no time of its own said when its session started."""
        return tuple(
            TurnText(
                m.turn_id or f"{self.session_id}:{n}",
                m.speaker,
                m.at or self.started_at,
                strip_controls(m.text).strip(),
            )
            for n, m in enumerate(self.messages, 1)
        )

    def to_loaded(self) -> LoadedDocument:
        """The session as one document, chunked by turn: what every import stores."""
        return replace(load_text(self.to_markdown(), self.source_title), turns=self.turn_texts())

    def metadata(self) -> dict[str, Any]:
        """Its title, tags and date; a source root adds its own (``sync``)."""
        meta: dict[str, Any] = {"title": self.title, "tags": self.tags()}
        when = self.started_at or self.last_activity
        if when is not None:
            meta["source_date"] = when.date()
        return meta


# A conversation is dated within these years: a day either side (a turn's "yesterday") is
# still on the calendar, and 0001-01-01 / 9999-12-31 are placeholders, not when anyone spoke.
MIN_YEAR = 2
MAX_YEAR = 9998
MAX_UTC_OFFSET = dt.timedelta(hours=14)  # real time zones run from -12:00 to +14:00


def read_time(value: Any) -> dt.datetime | None:
    """An ISO date-time as written (UTC unless it says), or None; not checked for range."""
    if not isinstance(value, str) or not value:
        return None
    try:
        stamp = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)


def time_problem(stamp: dt.datetime) -> str | None:
    """Why ``stamp`` cannot date a conversation, or None when it can."""
    offset = stamp.utcoffset()
    if offset is not None and abs(offset) > MAX_UTC_OFFSET:
        return "its UTC offset is beyond the -12:00 to +14:00 of real time zones"
    try:
        year = stamp.astimezone(dt.UTC).year
    except OverflowError:
        return f"in UTC it is out of range (years {MIN_YEAR} to {MAX_YEAR})"
    if not MIN_YEAR <= year <= MAX_YEAR:
        return f"its year {year} is out of range (years {MIN_YEAR} to {MAX_YEAR})"
    return None


def parse_time(value: Any) -> dt.datetime | None:
    """An export's ISO date-time, or None when it is none or cannot date a conversation."""
    stamp = read_time(value)
    return stamp if stamp is not None and time_problem(stamp) is None else None


def iso(stamp: dt.datetime) -> str:
    return stamp.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def human_time(stamp: dt.datetime | None) -> str:
    return stamp.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC") if stamp else "unknown"


# Where a clip may end: between words, never inside one. A token cut in two would keep a
# prefix of it that no secret rule knows any more (docs/hygiene.md).
_CUT_AT = frozenset(" \t\r\n\"',;:{}[]()<>|\\")


def clip(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = limit
    while cut > 0 and text[cut] not in _CUT_AT:
        cut -= 1
    return text[:cut].rstrip() + " …"


# A session's tool calls by id (tool_use id, Codex call_id): name and arguments, so that a
# result of the memory's own tool is stored as one line (hygiene.echo).
Calls = dict[str, tuple[str, Any]]


def tool_result(text: str, call: tuple[str, Any] | None) -> str:
    """A tool's result as stored: clipped, or one line when it came from this memory."""
    if call is not None and (tool := own_tool(call[0])) is not None:
        return quote("tool result", echo_line(tool, call[1]))
    return quote("tool result", clip(text, TOOL_TEXT_LIMIT))


def quote(label: str, text: str) -> str:
    body = "\n".join(f"> {line}" if line else ">" for line in text.splitlines())
    return f"> **{label}**\n{body}" if body else f"> **{label}**"


def title_from(messages: Iterable[Message]) -> str | None:
    for m in messages:
        if m.speaker == "human" and m.text.strip():
            first = " ".join(m.text.split())
            return clip(first, TITLE_LIMIT)
    return None


def _tool_result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def _render_blocks(blocks: Iterable[Any], calls: Calls | None = None) -> str:
    """Text blocks verbatim, tool calls and results as short quotes; thinking is left out.
    ``calls`` carries the calls seen so far across a session's messages."""
    calls = {} if calls is None else calls
    parts: list[str] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"].strip())
        elif kind == "tool_use":
            name = str(block.get("name", "?"))
            if isinstance(block.get("id"), str):
                calls[block["id"]] = (name, block.get("input"))
            args = json.dumps(block.get("input", {}), ensure_ascii=False, sort_keys=True)
            parts.append(quote(f"tool {name}", clip(args, TOOL_TEXT_LIMIT)))
        elif kind == "tool_result":
            call = calls.get(str(block.get("tool_use_id")))
            parts.append(tool_result(_tool_result_text(block.get("content")), call))
    return "\n\n".join(p for p in parts if p)


# ----------------------------------------------------------------- Claude.ai export
def _claude_ai_message(raw: dict[str, Any], calls: Calls) -> Message | None:
    speaker = raw.get("sender")
    if speaker not in ("human", "assistant"):
        return None
    blocks = raw.get("content")
    text = _render_blocks(blocks, calls) if isinstance(blocks, list) and blocks else ""
    if not text and isinstance(raw.get("text"), str):
        text = raw["text"].strip()
    for att in raw.get("attachments") or []:
        if not isinstance(att, dict):
            continue
        name = str(att.get("file_name") or "attachment")
        extracted = att.get("extracted_content")
        body = clip(extracted, ATTACHMENT_LIMIT) if isinstance(extracted, str) else ""
        text = (text + "\n\n" + quote(f"attachment {name}", body)).strip()
    if not text:
        return None
    return Message(speaker, parse_time(raw.get("created_at")), text)


def parse_claude_ai_export(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> list[Conversation]:
    """Every conversation of a Claude.ai ``conversations.json`` that has a message."""
    data = read_export_array(path, max_bytes, "Claude.ai")
    out = []
    for raw in data:
        if not isinstance(raw, dict) or not isinstance(raw.get("uuid"), str):
            continue
        calls: Calls = {}
        messages = tuple(
            m
            for m in (
                _claude_ai_message(r, calls)
                for r in raw.get("chat_messages") or []
                if isinstance(r, dict)
            )
            if m is not None
        )
        if not messages:
            continue  # an empty conversation holds nothing to remember
        stamps = [m.at for m in messages if m.at]
        started = parse_time(raw.get("created_at")) or (min(stamps) if stamps else None)
        last = parse_time(raw.get("updated_at")) or (max(stamps) if stamps else None)
        name = raw.get("name")
        title = (
            (name.strip() if isinstance(name, str) else "")
            or title_from(messages)
            or f"Claude.ai conversation {raw['uuid'][:8]}"
        )
        out.append(Conversation("claude-ai", raw["uuid"], title, started, last, messages))
    return out


# ---------------------------------------------------------------- Claude Code logs
def read_export(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """A conversation file's text, under the same size cap as any file (``load_file``)."""
    raw = read_capped(path, max_bytes)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path}: cannot be read as UTF-8 text: {exc}") from exc


def load_json(text: str, where: str) -> Any:
    """Parsed JSON, or InvalidInputError naming ``where`` (also for nesting too deep to parse)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise InvalidInputError(
            f"{where}: JSON nested too deeply to read; a conversation needs only a few levels"
        ) from None
    except ValueError as exc:
        raise InvalidInputError(f"{where}: not valid JSON ({exc})") from exc


def jsonl_records(
    path: Path, max_bytes: int, what: str = "a Claude Code session log"
) -> Iterator[dict[str, Any]]:
    """The JSON objects of a session log, one a line. A line that is not JSON (a live
    session's torn last line, a foreign line) is skipped; a file none of whose lines is
    JSON is refused, naming ``what`` it was expected to be."""
    text = read_export(path, max_bytes)
    parsed = 0
    bad = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            bad += 1  # a torn last line of a live session, or a foreign line: skip it
            continue
        if isinstance(record, dict):
            parsed += 1
            yield record
    if not parsed and bad:
        raise InvalidInputError(f"{path}: none of its {bad} lines is a JSON object; is it {what}?")


def _main_thread(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The branch that ends at the latest message: edits branch the tree, the last one counts."""
    by_uuid = {r["uuid"]: r for r in records if isinstance(r.get("uuid"), str)}
    talk = [
        r
        for r in records
        if r.get("type") in ("user", "assistant")
        and not r.get("isSidechain")
        and isinstance(r.get("uuid"), str)
    ]
    if not talk:
        return []
    _, leaf = max(enumerate(talk), key=lambda ir: (str(ir[1].get("timestamp") or ""), ir[0]))
    chain: list[dict[str, Any]] = []
    seen: set[str] = set()
    node: dict[str, Any] | None = leaf
    while node is not None and node["uuid"] not in seen:
        seen.add(node["uuid"])
        chain.append(node)
        parent = node.get("parentUuid")
        node = by_uuid.get(parent) if isinstance(parent, str) else None
    return [r for r in reversed(chain) if r.get("type") in ("user", "assistant")]


def _claude_code_message(record: dict[str, Any], calls: Calls) -> Message | None:
    message = record.get("message")
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if isinstance(content, str):
        text = content.strip()
    elif isinstance(content, list):
        text = _render_blocks(content, calls)
    else:
        return None
    if not text:
        return None
    speaker = "assistant"
    if record.get("type") == "user":
        # A user record holding only tool results is the tools talking, not the person.
        only_tools = isinstance(content, list) and all(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content
        )
        speaker = "tool" if only_tools else "human"
    return Message(speaker, parse_time(record.get("timestamp")), text)


def parse_claude_code_session(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> list[Conversation]:
    """One session log → one conversation (none when it holds no message)."""
    records = list(jsonl_records(path, max_bytes))
    thread = _main_thread(records)
    calls: Calls = {}
    messages = tuple(m for m in (_claude_code_message(r, calls) for r in thread) if m is not None)
    if not messages:
        return []
    session_id = next(
        (r["sessionId"] for r in records if isinstance(r.get("sessionId"), str)), path.stem
    )
    on_thread = {r["uuid"] for r in thread}
    summaries = [r for r in records if r.get("type") == "summary" and r.get("summary")]
    summary = next(
        (r for r in reversed(summaries) if r.get("leafUuid") in on_thread),
        summaries[-1] if summaries else None,
    )
    stamps = [t for t in (parse_time(r.get("timestamp")) for r in records) if t]
    title = (
        (str(summary["summary"]).strip() if summary else "")
        or title_from(messages)
        or f"Claude Code session {session_id[:8]}"
    )
    first = thread[0]
    context = tuple(
        (key, str(first[field]))
        for key, field in (("cwd", "cwd"), ("git branch", "gitBranch"))
        if isinstance(first.get(field), str) and first[field]
    )
    return [
        Conversation(
            "claude-code",
            session_id,
            title,
            min(stamps) if stamps else None,
            max(stamps) if stamps else None,  # the last timestamp is the last activity
            messages,
            context,
        )
    ]


def read_export_json(path: Path, max_bytes: int) -> Any:
    """A JSON export file parsed, or InvalidInputError naming it and saying to re-export it."""
    try:
        return load_json(read_export(path, max_bytes), str(path))
    except InvalidInputError as exc:
        raise InvalidInputError(f"{exc}; re-export it") from exc


def read_export_array(path: Path, max_bytes: int, product: str) -> list[Any]:
    """A ``conversations.json`` export (``product``'s: Claude.ai, ChatGPT), which is a JSON
    array of conversations, or InvalidInputError naming the file and what it found."""
    data = read_export_json(path, max_bytes)
    if not isinstance(data, list):
        raise InvalidInputError(
            f"{path}: a {product} export's conversations.json is a JSON array of conversations, "
            f"found a {type(data).__name__}"
        )
    return data


class Reader(Protocol):
    """Reads one conversation file into its conversations, refusing it past ``max_bytes``."""

    def __call__(self, path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> list[Conversation]: ...
