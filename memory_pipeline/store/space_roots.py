"""Where each space's captured sessions came from, and what each space holds: the rows
behind ``memory-pipeline spaces``."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import sqlalchemy as sa

from memory_pipeline.store.base import StoreBase
from memory_pipeline.store.schema import Document, SpaceRoot


@dataclass(frozen=True)
class SpaceSummary:
    """One space: what it holds, when something was last stored in it, and the project
    roots whose sessions were captured into it (root → last capture), latest first."""

    space: str
    documents: int
    chunks: int
    last_stored: dt.datetime | None
    roots: tuple[tuple[str, dt.datetime], ...]


class SpaceRootQueries(StoreBase):
    def note_capture(self, space: str, root: str, when: dt.datetime) -> None:
        """Record that a session of the project at ``root`` was captured into ``space``."""
        with self.write() as s:
            row = s.get(SpaceRoot, (space, root))
            if row is None:
                s.add(SpaceRoot(space=space, root=root, last_capture_at=when))
            elif row.last_capture_at < when:
                row.last_capture_at = when

    def space_summaries(self) -> list[SpaceSummary]:
        """Every space this store reads that holds a document or had a session captured
        into it, by name."""
        counts = (
            sa.select(
                Document.space,
                sa.func.count(),
                sa.func.coalesce(sa.func.sum(Document.n_chunks), 0),
                sa.func.max(Document.created_at),
            )
            .where(self.readable(Document.space))
            .group_by(Document.space)
        )
        roots = (
            sa.select(SpaceRoot.space, SpaceRoot.root, SpaceRoot.last_capture_at)
            .where(self.readable(SpaceRoot.space))
            .order_by(SpaceRoot.last_capture_at.desc(), SpaceRoot.root)
        )
        with self.read() as s:
            held = {str(sp): (int(d), int(c), last) for sp, d, c, last in s.execute(counts)}
            seen: dict[str, list[tuple[str, dt.datetime]]] = {}
            for sp, root, when in s.execute(roots):
                seen.setdefault(str(sp), []).append((str(root), when))
        summaries = []
        for space in sorted({*held, *seen}):
            documents, chunks, last = held.get(space, (0, 0, None))
            summaries.append(
                SpaceSummary(space, documents, chunks, last, tuple(seen.get(space, ())))
            )
        return summaries
