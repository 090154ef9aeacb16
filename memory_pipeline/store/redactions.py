"""Redaction counts: what the redaction step took out of each space's texts, by kind."""

from __future__ import annotations

from collections.abc import Mapping

import sqlalchemy as sa
from sqlalchemy.orm import Session

from memory_pipeline.store.base import StoreBase
from memory_pipeline.store.schema import Redaction


def add_redactions(s: Session, counts: Mapping[str, int], space: str) -> None:
    """Add ``counts`` (kind → n) to ``space``'s, inside the caller's transaction ``s``."""
    for kind, n in sorted(counts.items()):
        if n <= 0:
            continue
        row = s.get(Redaction, (space, kind))
        if row is None:
            s.add(Redaction(space=space, kind=kind, count=n))
        else:
            row.count += n
    s.flush()


class RedactionQueries(StoreBase):
    def redaction_counts(self) -> dict[str, int]:
        """Redactions by kind over the spaces this store reads, most first."""
        stmt = (
            sa.select(Redaction.kind, sa.func.sum(Redaction.count))
            .where(self.readable(Redaction.space))
            .group_by(Redaction.kind)
        )
        with self.conn() as c:
            rows = [(str(k), int(n)) for k, n in c.execute(stmt)]
        return dict(sorted(rows, key=lambda kn: (-kn[1], kn[0])))
