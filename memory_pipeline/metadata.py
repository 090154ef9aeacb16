"""Metadata and text accepted at the boundary: validated once, trusted inside.

One policy for every adapter (CLI, MCP, Dagster, Python): the limits below,
``check_text`` and ``strip_controls`` are the only place text coming in is judged.
Control characters (all but tab, newline and carriage return in multi-line text) are
refused in what a caller hands over (``ingest_text``, queries, tags, titles) and
removed from what the memory reads itself (files, conversation exports).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memory_pipeline.errors import InvalidInputError

# Tags a stored conversation carries (sources/conversations.py): stable, readers of the
# memory look them up (recall, the agents).
CONVERSATION_TAG = "conversation"
TRANSCRIPT_OF = "transcript_of:"
TRANSCRIPT_LAST_ACTIVITY = "transcript_last_activity:"
#: The tags sessions are looked up by (capture, recall, the session-to-memory agent):
#: a person's edit of a chunk's tags on the viewer's page keeps them (``is_kept_tag``).
KEPT_TAG_PREFIXES = (
    TRANSCRIPT_OF,
    TRANSCRIPT_LAST_ACTIVITY,
    "conversation_id:",
    "summary_of:",
    "summary_last_activity:",
)
MAX_TAG_CHARS = 200
MAX_TAGS = 50
MAX_TITLE_CHARS = 300
# Unicode's control characters (category Cc): U+0000–U+001F and U+007F–U+009F.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")
# Multi-line text (bodies, queries) keeps tab, newline and carriage return.
_TEXT_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def is_kept_tag(tag: str) -> bool:
    """Whether ``tag`` marks a session for the memory's own lookups (see KEPT_TAG_PREFIXES)."""
    return tag == CONVERSATION_TAG or tag.startswith(KEPT_TAG_PREFIXES)


def check_text(field: str, value: str, *, multiline: bool = False) -> str:
    """``value`` unchanged, or InvalidInputError naming ``field`` and the first bad character.

    NUL and the other control characters are refused: they are invisible,
    PostgreSQL cannot store NUL at all, and in a tag or title they are always a
    mistake. Multi-line text keeps tab, newline and carriage return.
    """
    bad = (_TEXT_CONTROLS if multiline else _CONTROLS).search(value)
    if bad is not None:
        allowed = " (tab, newline and carriage return are allowed)" if multiline else ""
        raise InvalidInputError(
            f"{field}: control character U+{ord(bad.group()):04X} at index {bad.start()} is "
            f"not allowed{allowed}; remove it and try again"
        )
    return value


def strip_controls(text: str) -> str:
    """Multi-line text with the control characters ``check_text`` refuses removed.

    For text the memory reads rather than is handed: files (``load_file``) and
    conversation exports (whose tool output may carry terminal escapes), where
    refusing a whole file or session would lose it. Arguments (``ingest_text``, a
    query) are refused by ``check_text`` instead: their caller can fix them.
    """
    return _TEXT_CONTROLS.sub("", text)


def check_texts(field: str, values: Iterable[str]) -> None:
    """``check_text`` on every single-line value of a list field (tags, doc ids)."""
    for value in values:
        check_text(field, value)


def check_tag(tag: object) -> str:
    """A tag as stored: a non-empty single-line string of at most MAX_TAG_CHARS, stripped."""
    if not isinstance(tag, str) or not tag.strip():
        raise InvalidInputError(f"every tag must be a non-empty string; got {tag!r}")
    tag = check_text("tag", tag.strip())
    if len(tag) > MAX_TAG_CHARS:
        raise InvalidInputError(
            f"tag {tag[:40]!r}… is {len(tag)} characters; at most {MAX_TAG_CHARS} are allowed"
        )
    return tag


class KnowledgeType(StrEnum):
    """Where knowledge came from decides how it ages (see memory scoring)."""

    PRINCIPLE = "principle"
    PAPER = "paper"
    NEWS = "news"
    EXPERIMENT = "experiment"


class ChunkMetadata(BaseModel):
    """Metadata a caller may attach to a document; every chunk inherits it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    knowledge_type: KnowledgeType | None = None
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    tags: tuple[str, ...] = ()
    source_date: dt.date | None = None
    title: str | None = None

    @field_validator("tags", mode="before")
    @classmethod
    def _tags_are_strings(cls, value: Any) -> Any:
        if value is None:
            return ()
        if isinstance(value, str) or not isinstance(value, list | tuple):
            raise ValueError('tags must be a list of strings, e.g. ["project:x", "design"]')
        tags = tuple(dict.fromkeys(_plain(check_tag, t) for t in value))
        if len(tags) > MAX_TAGS:
            raise ValueError(f"{len(tags)} tags given; at most {MAX_TAGS} are allowed")
        return tags

    @field_validator("title", mode="before")
    @classmethod
    def _title_is_one_line(cls, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"title must be a non-empty string or unset; got {value!r}")
        title = _plain(lambda v: check_text("title", v), value.strip())
        if len(title) > MAX_TITLE_CHARS:
            raise ValueError(f"title is {len(title)} characters; at most {MAX_TITLE_CHARS}")
        return title

    @field_validator("importance", mode="before")
    @classmethod
    def _importance_is_number(cls, value: Any) -> Any:
        if isinstance(value, bool) or (value is not None and not isinstance(value, int | float)):
            raise ValueError("importance must be a number in [0, 1] or unset")
        if value is not None and not math.isfinite(value):
            raise ValueError(f"importance is {value!r}, not a number; give one in [0, 1]")
        return value


def _plain(check: Any, value: Any) -> Any:
    """Run a check inside a pydantic validator: its message, without the exception type."""
    try:
        return check(value)
    except InvalidInputError as exc:
        raise ValueError(str(exc)) from None


def validate_metadata(raw: dict[str, Any] | ChunkMetadata | None) -> ChunkMetadata:
    """Validate caller metadata, raising InvalidInputError that names each bad field."""
    if raw is None:
        return ChunkMetadata()
    if isinstance(raw, ChunkMetadata):
        return raw
    if not isinstance(raw, dict):
        raise InvalidInputError(
            f"metadata must be a mapping of field to value, got {type(raw).__name__}"
        )
    try:
        return ChunkMetadata.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"]) or "metadata"
            msg = err["msg"].removeprefix("Value error, ")
            if field == "knowledge_type":
                allowed = ", ".join(k.value for k in KnowledgeType)
                msg = f"unknown knowledge_type {err.get('input')!r}; use one of: {allowed}"
            problems.append(f"{field}: {msg}")
        raise InvalidInputError("invalid metadata — " + "; ".join(problems)) from exc


def check_doc_id(doc_id: object) -> str:
    if not isinstance(doc_id, str) or not doc_id:
        raise InvalidInputError(f"doc_id must be a non-empty string, got {doc_id!r}")
    return check_text("doc_id", doc_id)


def memory_field_changes(
    *, importance: Any = ..., knowledge_type: Any = ..., tags: Iterable[str] | None = None
) -> dict[str, Any]:
    """The changes to one chunk's memory fields, checked as ingest checks them: only the
    fields given (``...``: unchanged, ``None``: unset; ``tags=None``: unchanged), as
    ``Store.set_chunk_tags`` takes them."""
    raw: dict[str, Any] = {}
    if importance is not ...:
        raw["importance"] = importance
    if knowledge_type is not ...:
        raw["knowledge_type"] = knowledge_type
    if tags is not None:
        raw["tags"] = tags
    meta = validate_metadata(raw)
    changes: dict[str, Any] = {}
    if "importance" in raw:
        changes["importance"] = meta.importance
    if "knowledge_type" in raw:
        kt = meta.knowledge_type
        changes["knowledge_type"] = kt.value if isinstance(kt, KnowledgeType) else None
    if "tags" in raw:
        changes["tags"] = list(meta.tags)
    return changes
