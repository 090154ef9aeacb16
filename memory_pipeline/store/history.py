"""What was changed in the memory, by whom and when: the rows behind ``memory-pipeline
history`` and the history a chunk's page shows.

A change is recorded in the transaction that makes it (``ChunkQueries.set_chunk_tags``,
``DocumentQueries.delete_document``), one row per field that changed, in the space the
store writes; it is read in the spaces the store reads, as every other row.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from memory_pipeline.store.base import StoreBase
from memory_pipeline.store.rows import now_utc
from memory_pipeline.store.schema import ChunkChange

#: Who can make a change: an agent's MCP tool, a command, the viewer's page, a pipeline
#: run, or a program using ``MemorySystem`` itself.
ACTORS = ("mcp", "cli", "page", "pipeline", "api")
#: The ``field`` of a document's deletion.
DOCUMENT = "document"


@dataclass(frozen=True)
class Change:
    at: dt.datetime
    space: str
    actor: str
    doc_id: str
    chunk_index: int | None  # None: the whole document
    field: str  # importance, knowledge_type, tags, or document
    before: Any
    after: Any

    @property
    def what(self) -> str:
        """The change as a person reads it, without where: ``importance 0.5 → 0.9``."""
        if self.chunk_index is None:
            gone = self.before if isinstance(self.before, dict) else {}
            return f"deleted: {gone.get('title')!r} ({gone.get('chunks')} chunks)"
        return f"{self.field} {_shown(self.before)} → {_shown(self.after)}"


def _shown(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def record_changes(
    s: Session,
    *,
    space: str,
    actor: str,
    doc_id: str,
    chunk_index: int | None,
    changes: Iterable[tuple[str, Any, Any]],
) -> None:
    """Record ``changes`` (field, before, after) inside the caller's transaction ``s``;
    a field whose value did not change is not recorded."""
    if actor not in ACTORS:
        raise ValueError(f"actor must be one of {', '.join(ACTORS)}, got {actor!r}")
    when = now_utc()
    for field, before, after in changes:
        if before == after:
            continue
        s.add(
            ChunkChange(
                space=space,
                at=when,
                actor=actor,
                doc_id=doc_id,
                chunk_index=chunk_index,
                field=field,
                before=json.dumps(before, ensure_ascii=False),
                after=json.dumps(after, ensure_ascii=False),
            )
        )
    s.flush()


class HistoryQueries(StoreBase):
    def history(self, limit: int, offset: int = 0, *, doc_id: str | None = None) -> list[Change]:
        """The changes in the spaces this store reads, newest first; of one document's
        chunks (and its deletion) when ``doc_id`` is given."""
        stmt = sa.select(ChunkChange).where(self.readable(ChunkChange.space))
        if doc_id is not None:
            stmt = stmt.where(ChunkChange.doc_id == doc_id)
        stmt = stmt.order_by(ChunkChange.id.desc()).limit(limit).offset(offset)
        with self.read() as s:
            return [
                Change(
                    at=row.at,
                    space=row.space,
                    actor=row.actor,
                    doc_id=row.doc_id,
                    chunk_index=row.chunk_index,
                    field=row.field,
                    before=json.loads(row.before) if row.before is not None else None,
                    after=json.loads(row.after) if row.after is not None else None,
                )
                for row in s.scalars(stmt)
            ]
