"""What the memory gave an agent, kept per space: the rows behind the viewer's page of it."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa

from memory_pipeline.store.base import StoreBase
from memory_pipeline.store.rows import now_utc
from memory_pipeline.store.schema import Handed

#: The latest records a space keeps; an older one goes as a new one comes.
KEEP = 500


@dataclass(frozen=True)
class HandedHit:
    doc_id: str
    chunk_index: int
    score: float
    title: str | None


@dataclass(frozen=True)
class HandedRecord:
    at: dt.datetime
    space: str
    kind: str  # "recall" | "search" | "prompt"
    session: str | None
    query: str | None
    block: str | None
    hits: tuple[HandedHit, ...]


class HandedQueries(StoreBase):
    def record_handed(
        self,
        kind: str,
        *,
        session: str | None = None,
        query: str | None = None,
        block: str | None = None,
        hits: Sequence[HandedHit] = (),
        keep: int = KEEP,
    ) -> None:
        """Keep one record in the space this store writes, and only its latest ``keep``."""
        space = self.spaces.write
        rows = [[h.doc_id, h.chunk_index, h.score, h.title] for h in hits]
        with self.write() as s:
            s.add(
                Handed(
                    space=space, at=now_utc(), kind=kind, session=session, query=query,
                    block=block, hits=json.dumps(rows, ensure_ascii=False),
                )
            )  # fmt: skip
            s.flush()
            oldest_kept = s.scalar(
                sa.select(Handed.id)
                .where(Handed.space == space)
                .order_by(Handed.id.desc())
                .offset(keep - 1)
                .limit(1)
            )
            if oldest_kept is not None:
                s.execute(sa.delete(Handed).where(Handed.space == space, Handed.id < oldest_kept))

    def handed(self, limit: int, offset: int = 0) -> list[HandedRecord]:
        """The records of the spaces this store reads, newest first."""
        stmt = (
            sa.select(Handed)
            .where(self.readable(Handed.space))
            .order_by(Handed.id.desc())
            .limit(limit)
            .offset(offset)
        )
        return self._records(stmt)

    def handed_in_session(self, session: str) -> list[HandedRecord]:
        """The records of one agent session in the spaces this store reads, oldest first."""
        stmt = (
            sa.select(Handed)
            .where(self.readable(Handed.space), Handed.session == session)
            .order_by(Handed.id)
        )
        return self._records(stmt)

    def _records(self, stmt: sa.Select[Handed]) -> list[HandedRecord]:
        with self.read() as s:
            return [
                HandedRecord(
                    r.at,
                    r.space,
                    r.kind,
                    r.session,
                    r.query,
                    r.block,
                    tuple(
                        HandedHit(str(d), int(i), float(sc), t)
                        for d, i, sc, t in json.loads(r.hits)
                    ),
                )
                for r in s.scalars(stmt)
            ]
