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
import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.hygiene.echo import echo_line, own_tool
from memory_pipeline.ingest.lines import DEFAULT_LIMITS, ReadLimits, read_lines
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


# A session's calls of the memory's own tools by id (tool_use id, Codex call_id): name and
# arguments, so that such a result is stored as one line (hygiene.echo). Other tools' calls
# are not kept: their results are clipped alike, and their arguments may be whole files.
Calls = dict[str, tuple[str, Any]]


def remember_call(calls: Calls, call_id: Any, name: str, args: Any) -> None:
    if isinstance(call_id, str) and own_tool(name) is not None:
        calls[call_id] = (name, args)


@dataclass
class TimeSpan:
    """The first and last time a session's records give, kept as the log streams past."""

    first: dt.datetime | None = None
    last: dt.datetime | None = None

    def add(self, value: Any) -> None:
        stamp = parse_time(value)
        if stamp is None:
            return
        if self.first is None or stamp < self.first:
            self.first = stamp
        if self.last is None or stamp > self.last:
            self.last = stamp


def tool_result(text: str, call: tuple[str, Any] | None) -> str:
    """A tool's result as stored: clipped, or one line when it came from this memory."""
    if call is not None and (tool := own_tool(call[0])) is not None:
        return quote("tool result", echo_line(tool, call[1]))
    return quote("tool result", clip(text, TOOL_TEXT_LIMIT))


def quote(label: str, text: str) -> str:
    body = "\n".join(f"> {line}" if line else ">" for line in text.splitlines())
    return f"> **{label}**\n{body}" if body else f"> **{label}**"


def given_or_unnamed(given: Any, messages: Sequence[Message]) -> str:
    """A conversation's id as its export gives it (text, or a number), else one made from
    its first message (a ``uuid`` that is an object, none at all): the same conversation,
    grown or not, keeps it, so a second import skips it and a grown one replaces it."""
    if isinstance(given, str) and given.strip():
        return given.strip()
    if isinstance(given, int) and not isinstance(given, bool):
        return str(given)
    first = messages[0]
    key = f"{first.speaker}\0{first.at.isoformat() if first.at else ''}\0{first.text}"
    return "unnamed-" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


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
            remember_call(calls, block.get("id"), name, block.get("input"))
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


def parse_claude_ai_export(path: Path, limits: ReadLimits = DEFAULT_LIMITS) -> list[Conversation]:
    """Every conversation of a Claude.ai ``conversations.json`` that has a message."""
    data = read_export_array(path, limits.file_bytes, "Claude.ai")
    out = []
    for raw in data:
        if not isinstance(raw, dict):
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
        uuid = given_or_unnamed(raw.get("uuid"), messages)
        title = (
            (name.strip() if isinstance(name, str) else "")
            or title_from(messages)
            or f"Claude.ai conversation {uuid[:8]}"
        )
        out.append(Conversation("claude-ai", uuid, title, started, last, messages))
    return out


# ---------------------------------------------------------------- Claude Code logs
def read_export(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """An export's text, under the same size cap as any file (``load_file``); a session log
    is streamed instead (``jsonl_records``)."""
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
    path: Path, max_line_bytes: int, what: str = "a Claude Code session log"
) -> Iterator[dict[str, Any]]:
    """The JSON objects of a session log, one a line, read as the file streams past (a log
    may be any size; ``ingest.lines``). A line that is not JSON (a live session's torn last
    line, a foreign line) is skipped; a file none of whose lines is JSON is refused, naming
    ``what`` it was expected to be."""
    parsed = 0
    bad = 0
    for _, line in read_lines(path, max_line_bytes):
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


@dataclass(frozen=True)
class _Entry:
    """What a session keeps of one record as its log streams past: its place in the tree
    and, for a message, the message as stored (the raw record, however large, is let go)."""

    uuid: str
    parent: str | None
    is_message: bool  # a user or assistant record
    talk: bool  # a message not on a side chain: one that may end the main thread
    stamp: str  # as written: the latest one ends the main thread
    message: Message | None
    context: tuple[tuple[str, str], ...]  # its cwd and git branch


def _entry(record: dict[str, Any], calls: Calls) -> _Entry | None:
    if not isinstance(record.get("uuid"), str):
        return None
    is_message = record.get("type") in ("user", "assistant")
    parent = record.get("parentUuid")
    return _Entry(
        record["uuid"],
        parent if isinstance(parent, str) else None,
        is_message,
        is_message and not record.get("isSidechain"),
        str(record.get("timestamp") or ""),
        _claude_code_message(record, calls) if is_message else None,
        tuple(
            (key, record[name])
            for key, name in (("cwd", "cwd"), ("git branch", "gitBranch"))
            if is_message and isinstance(record.get(name), str) and record[name]
        ),
    )


@dataclass
class _SessionLog:
    """A Claude Code log as it streams past: what its conversation is made from. Each
    message is rendered as its record passes, so a record is let go at once; a tool's
    result refers to the call just before it, so the calls seen so far are enough."""

    entries: list[_Entry] = field(default_factory=list)
    calls: Calls = field(default_factory=dict)
    session_id: str | None = None
    summaries: list[tuple[str, str | None]] = field(default_factory=list)  # (text, leafUuid)
    span: TimeSpan = field(default_factory=TimeSpan)

    def add(self, record: dict[str, Any]) -> None:
        if self.session_id is None and isinstance(record.get("sessionId"), str):
            self.session_id = record["sessionId"]
        if record.get("type") == "summary" and record.get("summary"):
            leaf = record.get("leafUuid")
            self.summaries.append((str(record["summary"]), leaf if isinstance(leaf, str) else None))
        self.span.add(record.get("timestamp"))
        if (entry := _entry(record, self.calls)) is not None:
            self.entries.append(entry)

    def main_thread(self) -> list[_Entry]:
        """The branch that ends at the latest message: edits branch the tree, the last one
        counts."""
        talk = [e for e in self.entries if e.talk]
        if not talk:
            return []
        by_uuid = {e.uuid: e for e in self.entries}
        _, leaf = max(enumerate(talk), key=lambda ie: (ie[1].stamp, ie[0]))
        chain: list[_Entry] = []
        seen: set[str] = set()
        node: _Entry | None = leaf
        while node is not None and node.uuid not in seen:
            seen.add(node.uuid)
            chain.append(node)
            node = by_uuid.get(node.parent) if node.parent is not None else None
        return [e for e in reversed(chain) if e.is_message]


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


def parse_claude_code_session(
    path: Path, limits: ReadLimits = DEFAULT_LIMITS
) -> list[Conversation]:
    """One session log → one conversation (none when it holds no message). The log is
    streamed whatever its size (``limits.line_bytes`` bounds one line, not the file)."""
    log = _SessionLog()
    for record in jsonl_records(path, limits.line_bytes):
        log.add(record)
    thread = log.main_thread()
    messages = tuple(e.message for e in thread if e.message is not None)
    if not messages:
        return []
    session_id = log.session_id or path.stem
    on_thread = {e.uuid for e in thread}
    summary = next(
        (text for text, leaf in reversed(log.summaries) if leaf in on_thread),
        log.summaries[-1][0] if log.summaries else None,
    )
    title = (
        (summary.strip() if summary else "")
        or title_from(messages)
        or f"Claude Code session {session_id[:8]}"
    )
    return [
        Conversation(
            "claude-code",
            session_id,
            title,
            log.span.first,
            log.span.last,  # the last timestamp is the last activity
            messages,
            thread[0].context,
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
    """Reads one conversation file into its conversations: an export refused past
    ``limits.file_bytes``, a session log streamed (``ReadLimits``)."""

    def __call__(self, path: Path, limits: ReadLimits = DEFAULT_LIMITS) -> list[Conversation]: ...
