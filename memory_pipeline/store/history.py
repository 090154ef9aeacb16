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
#: A person's verdict on an agent's change, as the form says it: as the record keeps it.
REVIEWS = {"accept": "accepted", "revert": "reverted"}
#: Whose changes a person reviews: the agent's, over MCP.
PROPOSER = "mcp"


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
    id: int = 0
    review: str | None = None  # an agent's change: accepted or reverted by a person

    @property
    def what(self) -> str:
        """The change as a person reads it, without where: ``importance 0.5 → 0.9``."""
        if self.chunk_index is None:
            gone = self.before if isinstance(self.before, dict) else {}
            return f"deleted: {gone.get('title')!r} ({gone.get('chunks')} chunks)"
        return f"{self.field} {shown_value(self.before)} → {shown_value(self.after)}"


def shown_value(value: Any) -> str:
    """A field's value as a person reads it in the history."""
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
            return [change_of(row) for row in s.scalars(stmt)]

    def proposals(self, limit: int, offset: int = 0) -> list[Change]:
        """The agent's changes to chunks of the space this store writes that no person has
        accepted or reverted yet, newest first."""
        stmt = (
            sa.select(ChunkChange)
            .where(ChunkChange.space == self.spaces.write, _PROPOSAL, ChunkChange.review.is_(None))
            .order_by(ChunkChange.id.desc())
            .limit(limit)
            .offset(offset)
        )
        with self.read() as s:
            return [change_of(row) for row in s.scalars(stmt)]

    def count_proposals(self) -> int:
        stmt = sa.select(sa.func.count()).where(
            ChunkChange.space == self.spaces.write, _PROPOSAL, ChunkChange.review.is_(None)
        )
        with self.read() as s:
            return int(s.scalar(stmt) or 0)


_PROPOSAL = sa.and_(ChunkChange.actor == PROPOSER, ChunkChange.field != DOCUMENT)


def is_proposal(row: ChunkChange) -> bool:
    """Whether a person reviews this change: an agent's, to a chunk's field."""
    return row.actor == PROPOSER and row.field != DOCUMENT


def loaded(value: str | None) -> Any:
    return json.loads(value) if value is not None else None


def change_of(row: ChunkChange) -> Change:
    return Change(
        at=row.at,
        space=row.space,
        actor=row.actor,
        doc_id=row.doc_id,
        chunk_index=row.chunk_index,
        field=row.field,
        before=loaded(row.before),
        after=loaded(row.after),
        id=row.id,
        review=row.review,
    )
