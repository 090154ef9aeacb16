"""Plain conversation transcripts (and LoCoMo's files) → one conversation per session.

The transcript format (docs/conversations.md) is for any conversation the other readers
do not know: chat logs, meeting notes, another tool's export. Two shapes:

* **JSON**: one conversation object, or a list of them::

    {"conversation_id": "trip", "title": "Trip planning", "sessions": [
      {"session_id": "1", "date": "2023-05-08T13:56:00Z",
       "turns": [{"turn_id": "1:1", "speaker": "Ana", "text": "…", "at": "…"}]}]}

* **JSONL**: one turn per line, sessions in order of first appearance::

    {"conversation_id": "trip", "session_id": "1", "session_date": "2023-05-08",
     "turn_id": "1:1", "speaker": "Ana", "text": "…"}

``turn_id`` and ``at`` are optional (a turn's id is then its position, its time its
session's). A session needs a date (``date``/``session_date``, or a time on its turns):
a conversation is remembered by when it happened.

A file in LoCoMo's layout (Maharana et al., ACL 2024: a list of samples with
``conversation`` holding ``session_<n>`` turn lists and ``session_<n>_date_time``) is read
as transcripts too; :func:`locomo_conversations` converts it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.ingest.lines import DEFAULT_LIMITS, ReadLimits
from memory_pipeline.ingest.relative_dates import MONTHS
from memory_pipeline.metadata import check_text
from memory_pipeline.sources.conversations import (
    Conversation,
    Message,
    load_json,
    read_export,
    read_time,
    time_problem,
)

ORIGIN = "transcript"
_LOCOMO_TIME = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.I
)
_MONTHS = {m.lower(): i for i, m in enumerate(MONTHS, 1)}
_SESSION_KEY = re.compile(r"^session_(\d+)$")
# What a session's document is named and tagged by must fit the store's limits for titles
# (300) and tags (200): ``transcript_of:<conversation>/<session>`` and the title
# ``<title> — session <session> (<date>)``.
MAX_ID_CHARS = 64  # conversation_id, session_id, turn_id
MAX_TITLE_CHARS = 200
MAX_SPEAKER_CHARS = 100


def parse_when(value: Any) -> dt.datetime | None:
    """An ISO date or date-time (UTC unless it says), or LoCoMo's "1:56 pm on 8 May, 2023";
    not checked for range (``_when`` is)."""
    if isinstance(value, str) and (m := _LOCOMO_TIME.match(value)):
        hour, minute, half, day, month, year = m.groups()
        month_no = _MONTHS.get(month.lower())
        if month_no is None:
            return None
        h = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
        try:
            return dt.datetime(int(year), month_no, int(day), h, int(minute), tzinfo=dt.UTC)
        except ValueError:
            return None
    stamp = read_time(value)
    if stamp is None and isinstance(value, str):
        try:
            day = dt.date.fromisoformat(value.strip())
        except ValueError:
            return None
        return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)
    return stamp


def _when(value: Any, where: str, what: str) -> dt.datetime:
    """``value`` as the time that dates a session or turn, or what to fix about it."""
    stamp = parse_when(value)
    if stamp is None:
        raise InvalidInputError(
            f"{where}: {what} {value!r} is not an ISO date or date-time "
            "(e.g. 2023-05-08 or 2023-05-08T13:56:00Z)"
        )
    problem = time_problem(stamp)
    if problem is not None:
        raise InvalidInputError(f"{where}: {what} {value!r}: {problem}; give the real time")
    return stamp


def _name(value: str, field: str, where: str, limit: int) -> str:
    """An id, speaker or title as stored: one line, no control characters, at most ``limit``."""
    value = value.strip()
    try:
        check_text(field, value)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{where}: {exc}") from None
    if len(value) > limit:
        raise InvalidInputError(
            f"{where}: {field} {value[:40]!r}… is {len(value)} characters; "
            f"at most {limit} are allowed, shorten it"
        )
    return value


@dataclass(frozen=True)
class _Turn:
    turn_id: str | None
    speaker: str
    text: str
    at: dt.datetime | None


def _text(raw: dict[str, Any], where: str) -> str:
    text = raw.get("text")
    if not isinstance(text, str):
        raise InvalidInputError(f"{where}: a turn needs its text as a string")
    caption = raw.get("blip_caption")  # LoCoMo: an image the speaker shared
    if isinstance(caption, str) and caption.strip():
        text = f"{text} [shared an image: {caption.strip()}]"
    return text


def _turn(raw: Any, where: str) -> _Turn:
    if not isinstance(raw, dict):
        raise InvalidInputError(f"{where}: a turn is an object with speaker and text")
    speaker = raw.get("speaker")
    if not isinstance(speaker, str) or not speaker.strip():
        raise InvalidInputError(f"{where}: a turn needs its speaker as a non-empty string")
    speaker = _name(speaker, "speaker", where, MAX_SPEAKER_CHARS)
    raw_id = raw.get("turn_id", raw.get("dia_id"))
    turn_id = None if raw_id is None else _name(str(raw_id), "turn_id", where, MAX_ID_CHARS)
    at = raw.get("at")
    when = _when(at, where, "'at'") if at is not None else None
    return _Turn(turn_id, speaker, _text(raw, where), when)


def _session(
    conversation_id: str,
    title: str,
    session_id: str,
    date: Any,
    turns: list[_Turn],
    where: str,
) -> Conversation | None:
    messages = tuple(Message(t.speaker, t.at, t.text, t.turn_id) for t in turns if t.text.strip())
    if not messages:
        return None
    start = _when(date, where, "session date") if date is not None else None
    stamps = [m.at for m in messages if m.at]
    start = start or (min(stamps) if stamps else None)
    if start is None:
        raise InvalidInputError(
            f"{where}: session {session_id!r} has no date; give the session a 'date' "
            "(or its turns an 'at')"
        )
    ids = [m.turn_id for m in messages if m.turn_id]
    if len(ids) != len(set(ids)):
        raise InvalidInputError(f"{where}: session {session_id!r} repeats a turn_id")
    last = max([start, *stamps])
    label = f"{title} — session {session_id} ({start:%Y-%m-%d})"
    return Conversation(
        ORIGIN,
        f"{conversation_id}/{session_id}",
        label,
        start,
        last,
        messages,
        conversation_id=conversation_id,
    )


def _string(raw: dict[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = raw.get(key, default)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"{where}: needs {key!r} as a non-empty string")
    return _name(value, key, where, MAX_ID_CHARS)


Placed = tuple[str, Conversation]  # where in the file a session is, and the session


def _conversation(raw: Any, where: str) -> list[Placed]:
    if not isinstance(raw, dict):
        raise InvalidInputError(f"{where}: a conversation is an object with 'sessions'")
    cid = _string(raw, "conversation_id", where)
    title = raw.get("title")
    title = _name(title, "title", where, MAX_TITLE_CHARS) if isinstance(title, str) else None
    sessions = raw.get("sessions")
    if not isinstance(sessions, list):
        raise InvalidInputError(f"{where}: conversation {cid!r} needs 'sessions' as a list")
    out = []
    for n, s in enumerate(sessions, 1):
        at = f"{where}, session {n}"
        if not isinstance(s, dict) or not isinstance(s.get("turns"), list):
            raise InvalidInputError(f"{at}: a session is an object with 'turns' as a list")
        sid = _string(s, "session_id", at, str(n))
        turns = [_turn(t, f"{at}, turn {i}") for i, t in enumerate(s["turns"], 1)]
        conv = _session(cid, title or cid, sid, s.get("date"), turns, at)
        if conv is not None:
            out.append((at, conv))
    return out


def _unique(placed: Iterable[Placed]) -> list[Conversation]:
    """The sessions, or which one the file holds twice (one of them would silently win)."""
    placed = list(placed)
    seen: dict[str, str] = {}
    for where, conv in placed:
        first = seen.setdefault(conv.session_id, where)
        if first != where:
            raise InvalidInputError(
                f"{where}: session {conv.session_id!r} (conversation/session) is already at "
                f"{first}; give each session of a conversation its own session_id"
            )
    return [conv for _, conv in placed]


def _from_lines(path: Path, lines: Iterable[str]) -> list[Conversation]:
    groups: dict[tuple[str, str], tuple[Any, list[_Turn]]] = {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        raw = load_json(line, where)
        if not isinstance(raw, dict):
            raise InvalidInputError(f"{where}: a line is one turn, as a JSON object")
        key = (_string(raw, "conversation_id", where), _string(raw, "session_id", where))
        date, turns = groups.setdefault(key, (raw.get("session_date"), []))
        turns.append(_turn(raw, where))
    out = []  # a session's lines are one session wherever they are: no duplicates here
    for (cid, sid), (date, turns) in groups.items():
        conv = _session(cid, cid, sid, date, turns, f"{path}, {cid} session {sid}")
        if conv is not None:
            out.append(conv)
    return out


def is_locomo(data: Any) -> bool:
    return (
        isinstance(data, list)
        and bool(data)
        and all(isinstance(s, dict) and isinstance(s.get("conversation"), dict) for s in data)
    )


def locomo_conversations(data: list[dict[str, Any]], where: str = "LoCoMo") -> list[Conversation]:
    """LoCoMo samples as transcripts: each ``session_<n>`` a session of the sample's
    conversation (its ``sample_id``), dated by ``session_<n>_date_time``, turn ids kept."""
    out: list[Placed] = []
    for i, sample in enumerate(data):
        cid = _name(str(sample.get("sample_id") or f"locomo-{i}"), "sample_id", where, MAX_ID_CHARS)
        conv = sample["conversation"]
        title = " and ".join(
            str(conv[k]) for k in ("speaker_a", "speaker_b") if isinstance(conv.get(k), str)
        )
        numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION_KEY.match(k)) and conv[k])
        for n in numbers:
            at = f"{where}, {cid} session {n}"
            turns = conv[f"session_{n}"]
            if not isinstance(turns, list):
                raise InvalidInputError(f"{at}: session_{n} is not a list of turns")
            parsed = [_turn(t, f"{at}, turn {j}") for j, t in enumerate(turns, 1)]
            session = _session(
                cid, title or cid, str(n), conv.get(f"session_{n}_date_time"), parsed, at
            )
            if session is not None:
                out.append((at, session))
    return _unique(out)


def parse_transcript(path: Path, limits: ReadLimits = DEFAULT_LIMITS) -> list[Conversation]:
    """Every session of a transcript file (.json or .jsonl), or of a LoCoMo file; the
    whole file checked, so a bad one is refused before anything of it is stored."""
    text = read_export(path, limits.file_bytes)
    if path.suffix.lower() == ".jsonl":
        return _from_lines(path, text.splitlines())
    data = load_json(text, str(path))
    if is_locomo(data):
        return locomo_conversations(data, str(path))
    items = data if isinstance(data, list) else [data]
    return _unique(p for n, raw in enumerate(items, 1) for p in _conversation(raw, f"{path}#{n}"))
