"""Recall: the short block of what a project's memory holds that matters now.

Printed when an agent's session starts (``memory-pipeline recall --hook``), so the agent
begins knowing the project's rules and where the last sessions left off. It is read
from the store with a few SQL reads — no embedding model, no index, no LLM — so it
starts fast, and it is deterministic: the same memory and the same ``now`` give the
same bytes (every selection is ordered to the last tie).

Content, each section only when it holds something:

* principles and important notes of the bound spaces: chunks of knowledge type
  ``principle``, or of importance ≥ ``NOTE_IMPORTANCE`` (0.7, the default above which a
  memory search always considers a chunk); principles first, then by importance, newest
  source date, document and position;
* the latest sessions: conversation documents by last activity, each with its title,
  date and first human turn.

Every item names its document (title and ``doc_id#chunk``), so the agent can read or
search for more. The block never exceeds its budget in tokens, estimated without a
model as ⌈UTF-8 bytes / 3⌉ (``estimate_tokens``).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from memory_pipeline.metadata import CONVERSATION_TAG, TRANSCRIPT_LAST_ACTIVITY
from memory_pipeline.types import ChunkRecord, SearchFilters

if TYPE_CHECKING:
    import numpy as np

    from memory_pipeline.spaces import Spaces
    from memory_pipeline.store.documents import TaggedDocument

DEFAULT_BUDGET = 1500
NOTE_TYPES = ("principle",)
NOTE_IMPORTANCE = 0.7
MAX_NOTES = 15
MAX_SESSIONS = 5
TEXT_CHARS = 160  # an item's quoted text, clipped (and marked) beyond this
TITLE_CHARS = 80
HUMAN_SPEAKERS = ("human", "user")
CLIPPED = " …"
_NAMED = re.compile(r"\(([^\s()#]+)#(\d+)\)$", re.MULTILINE)


class RecallView(Protocol):
    """The store reads recall uses (``memory_pipeline.store.Store`` has them)."""

    @property
    def spaces(self) -> Spaces: ...

    def guaranteed_ids(
        self, knowledge_types: Sequence[str], min_importance: float, filters: SearchFilters
    ) -> np.ndarray: ...

    def get_chunks(self, ids: Iterable[int]) -> dict[int, ChunkRecord]: ...

    def document_labels(self, doc_ids: Iterable[str]) -> dict[str, tuple[str, str]]: ...

    def tagged_documents(self, tag: str, prefix: str) -> list[TaggedDocument]: ...

    def document_chunks(self, doc_id: str) -> list[ChunkRecord]: ...


def named_chunks(block: str) -> set[tuple[str, int]]:
    """The chunks a block names, as (doc_id, chunk index): each item ends with
    ``(doc_id#chunk)``."""
    return {(d, int(i)) for d, i in _NAMED.findall(block)}


def estimate_tokens(text: str) -> int:
    """⌈UTF-8 bytes / 3⌉: needs no tokenizer, and errs high (English runs about four bytes
    a token; a CJK character is three bytes and about one token)."""
    return math.ceil(len(text.encode("utf-8")) / 3)


@dataclass(frozen=True)
class Section:
    heading: str
    items: tuple[str, ...]


def recall_block(store: RecallView, *, budget: int, now: dt.datetime) -> str:
    """The block for the spaces ``store`` is bound to, at most ``budget`` tokens
    (``estimate_tokens``); "" when there is nothing to say or not even one item fits."""
    sections = [
        s
        for s in (
            Section("## Principles and important notes", tuple(_notes(store))),
            Section("## Recent sessions", tuple(_sessions(store, now))),
        )
        if s.items
    ]
    header = [
        f"# Project memory ({store.spaces.describe()})",
        "Recalled by memory-pipeline at session start; search the memory for more "
        "(each item names its document as title and doc_id#chunk).",
    ]
    return fit(header, sections, budget)


def fit(header: Sequence[str], sections: Sequence[Section], budget: int) -> str:
    """``header`` and the sections' items in order, as many as fit in ``budget`` tokens with
    a last line counting those left out; "" when no item fits."""
    lines = list(header)
    total = sum(len(s.items) for s in sections)
    shown = 0
    for section in sections:
        for i, item in enumerate(section.items):
            candidate = [*lines, "", section.heading, item] if i == 0 else [*lines, item]
            left = total - shown - 1
            if estimate_tokens(_text(candidate + _omitted(left))) > budget:
                return _text(lines + _omitted(total - shown)) if shown else ""
            lines, shown = candidate, shown + 1
    return _text(lines) if shown else ""


def _omitted(n: int) -> list[str]:
    if not n:
        return []
    return ["", f"({n} more not shown within the recall budget; search the memory for them)"]


def _text(lines: Sequence[str]) -> str:
    return "\n".join(lines) + "\n"


def clip(text: str, limit: int) -> str:
    """``text`` on one line, cut at ``limit`` characters with a visible mark."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit].rstrip() + CLIPPED


def _note_order(c: ChunkRecord) -> tuple[int, float, int, str, int]:
    return (
        0 if c.knowledge_type in NOTE_TYPES else 1,
        -(c.importance if c.importance is not None else -1.0),
        -(c.source_date.toordinal() if c.source_date else 0),
        c.doc_id,
        c.chunk_index,
    )


def _notes(store: RecallView) -> list[str]:
    ids = store.guaranteed_ids(NOTE_TYPES, NOTE_IMPORTANCE, SearchFilters())
    # One line per document, its first chunk in note order: a note split into chunks
    # would otherwise repeat itself (chunks overlap).
    first: dict[str, ChunkRecord] = {}
    for c in sorted(store.get_chunks(int(i) for i in ids).values(), key=_note_order):
        first.setdefault(c.doc_id, c)
    chunks = list(first.values())[:MAX_NOTES]
    labels = store.document_labels(c.doc_id for c in chunks)
    items = []
    for c in chunks:
        kind = c.knowledge_type or "note"
        if c.importance is not None:
            kind += f", importance {c.importance:g}"
        title = labels.get(c.doc_id, (c.doc_id, ""))[0]
        items.append(
            f"- [{kind}] {clip(c.content, TEXT_CHARS)} "
            f"— {clip(title, TITLE_CHARS)} ({c.doc_id}#{c.chunk_index})"
        )
    return items


def _last_activity(doc: TaggedDocument) -> dt.datetime:
    """The session's last activity as tagged, else its source date, else when it was stored
    (a transcript stored before the ``transcript_*`` tags has only the day)."""
    if doc.latest is not None:
        try:
            stamp = dt.datetime.fromisoformat(doc.latest.removeprefix(TRANSCRIPT_LAST_ACTIVITY))
        except ValueError:
            stamp = None
        if stamp is not None:
            return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)
    if doc.source_date is not None:
        return dt.datetime.combine(doc.source_date, dt.time(), dt.UTC)
    return doc.created_at


def _age(when: dt.datetime, now: dt.datetime) -> str:
    days = (now.date() - when.astimezone(dt.UTC).date()).days
    return {0: "today", 1: "yesterday"}.get(days, f"{days} days ago" if days > 1 else "later")


def _sessions(store: RecallView, now: dt.datetime) -> list[str]:
    docs = store.tagged_documents(CONVERSATION_TAG, TRANSCRIPT_LAST_ACTIVITY)
    dated = sorted(
        ((_last_activity(d), d) for d in docs), key=lambda p: (-p[0].timestamp(), p[1].doc_id)
    )
    items = []
    for when, doc in dated[:MAX_SESSIONS]:
        chunks = store.document_chunks(doc.doc_id)
        first = next((c for c in chunks if _said_by_human(c)), None)
        day = when.astimezone(dt.UTC).date().isoformat()
        line = f"- {day} ({_age(when, now)}) {clip(doc.title, TITLE_CHARS)}"
        if first is not None:
            line += f" — first ask: {clip(first.content, TEXT_CHARS)} ({doc.doc_id}#{first.chunk_index})"
        else:
            line += f" ({doc.doc_id})"
        items.append(line)
    return items


def _said_by_human(chunk: ChunkRecord) -> bool:
    return any(t.speaker.lower() in HUMAN_SPEAKERS for t in chunk.turns)
