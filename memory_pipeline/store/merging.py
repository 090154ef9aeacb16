"""Moving one space's documents into another, one document per transaction.

A mixin of ``Store``. A document moves whole: its row under the id it has in the new
space, its chunks (every column, new chunk ids), their tags and every stored vector
(each model id: nothing is embedded again), the index changes a store and a delete
would queue, and the old document's removal, all in one transaction. Killed at any
instant, a document is therefore whole in exactly one of the two spaces; a second run
moves what is left, and a run with nothing left moves nothing.

A document whose content the new space already holds (the same bytes, hence the id it
would get there) is not doubled: the new space's copy stays as it is, takes only the
chunks it lacks (a position forgotten from it but live in the old copy), and the old
copy goes. A document stored under a name its corpus gave it (an id not derived from
its content) keeps that name.

A document's history (``chunk_changes``) moves with it, under its new id, and the
records of what was handed to agents (``handed``) name it by that id, in the same
transaction. Redaction counts (``redactions``) belong to the texts they were taken from,
so they follow them: ``move_redactions`` adds the old space's to the new one's and
removes them, in one transaction; ``move_records`` then moves what is left of the old
space's history (deleted documents') and its handed records. The caller runs both once
the documents have moved. Forgotten
chunks are carried in the archive (``memory/space_merge.py``); ``carry_archived`` is the
transaction that makes the carried lines count in place of the old space's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.spaces import check_space, doc_id_in_space
from memory_pipeline.store.base import StoreBase
from memory_pipeline.store.forgetting import RUN_ARCHIVED
from memory_pipeline.store.redactions import add_redactions
from memory_pipeline.store.rows import batched
from memory_pipeline.store.schema import (
    ArchiveRestore,
    Base,
    Chunk,
    ChunkChange,
    ChunkTag,
    Document,
    Embedding,
    ForgettingRun,
    Handed,
    Redaction,
)

_TABLES = Base.metadata.tables
_DOCUMENTS = _TABLES["documents"]
_CHUNKS = _TABLES["chunks"]
# What a chunk carries to its new space: every column but its id and its place.
_CHUNK_COLUMNS = [c for c in _CHUNKS.c if c.name not in {"id", "doc_id", "space"}]


def id_in_space(doc_id: str, content_hash: str, old: str, new: str) -> str:
    """The id a document of space ``old`` has in space ``new``: derived from its content
    as every stored document's is (``doc_id_in_space``), unless its corpus named it."""
    if doc_id == doc_id_in_space(content_hash, old):
        return doc_id_in_space(content_hash, new)
    return doc_id


@dataclass(frozen=True)
class DocumentMove:
    """One document of the old space: where it goes, and whether that copy exists already."""

    doc_id: str
    new_doc_id: str
    chunks: int
    already_there: bool


@dataclass(frozen=True)
class MovedDocument:
    """What one transaction did: chunks copied in (new ids), chunks of the old copy removed."""

    new_doc_id: str
    added: int
    removed: int


class MergeQueries(StoreBase):
    def holds_documents(self, space: str) -> bool:
        """Whether ``space`` holds a document, whatever this store is bound to."""
        stmt = sa.select(Document.doc_id).where(Document.space == space).limit(1)
        with self.conn() as c:
            return c.execute(stmt).first() is not None

    def merge_plan(self, old: str, new: str) -> list[DocumentMove]:
        """Every document of ``old`` (by id) and where it goes in ``new``; writes nothing."""
        old, new = self._merge_spaces(old, new)
        n_chunks = (
            sa.select(Chunk.doc_id, sa.func.count().label("n"))
            .where(Chunk.space == old)
            .group_by(Chunk.doc_id)
            .subquery()
        )
        stmt = (
            sa.select(Document.doc_id, Document.content_hash, n_chunks.c.n)
            .outerjoin(n_chunks, n_chunks.c.doc_id == Document.doc_id)
            .where(Document.space == old)
            .order_by(Document.doc_id)
        )
        with self.conn() as c:
            rows = [
                (str(d), id_in_space(d, h, old, new), int(n or 0)) for d, h, n in c.execute(stmt)
            ]
            there: set[str] = set()
            for batch in batched([target for _, target, _ in rows]):
                there.update(
                    c.execute(
                        sa.select(Document.doc_id).where(
                            Document.doc_id.in_(batch), Document.space == new
                        )
                    ).scalars()
                )
        return [DocumentMove(d, t, n, t in there) for d, t, n in rows]

    def move_document(self, doc_id: str, old: str, new: str) -> MovedDocument | None:
        """Move one document of ``old`` into ``new`` in one transaction (see the module's
        docstring); None when it is no longer in ``old`` (moved already, or deleted)."""
        old, new = self._merge_spaces(old, new)
        with self.write() as s:
            c = s.connection()
            self.lock_index(c)
            row = c.execute(
                sa.select(_DOCUMENTS).where(_DOCUMENTS.c.doc_id == doc_id).with_for_update()
            ).first()
            if row is None or row.space != old:
                return None
            target = id_in_space(doc_id, row.content_hash, old, new)
            chunks = c.execute(
                sa.select(_CHUNKS).where(_CHUNKS.c.doc_id == doc_id).order_by(_CHUNKS.c.id)
            ).all()
            present = c.execute(
                sa.select(Document.space).where(
                    Document.doc_id == target, Document.doc_id != doc_id
                )
            ).scalar()
            if present is not None and present != new:
                raise InvalidInputError(
                    f"document {doc_id!r} would be {target!r} in space {new!r}, but that id "
                    f"is stored in space {present!r}; delete one of them and merge again"
                )
            taken = set(
                c.execute(sa.select(Chunk.chunk_index).where(Chunk.doc_id == target)).scalars()
            )
            moving = [r for r in chunks if r.chunk_index not in taken]
            tags = _by_chunk(c, ChunkTag, (ChunkTag.tag,), [r.id for r in moving])
            vectors = _by_chunk(
                c,
                Embedding,
                (Embedding.model_id, Embedding.dim, Embedding.vector),
                [r.id for r in moving],
            )
            old_ids = [int(r.id) for r in chunks]
            self.queue_deletes(c, old_ids)
            c.execute(sa.delete(Document).where(Document.doc_id == doc_id))
            if present is None:
                values = row._asdict() | {"doc_id": target, "space": new}
                c.execute(sa.insert(_DOCUMENTS), [values])
            new_ids = _insert_chunks(c, moving, target, new)
            for old_id, new_id in zip([r.id for r in moving], new_ids, strict=True):
                if tags.get(old_id):
                    c.execute(
                        sa.insert(ChunkTag),
                        [{"chunk_id": new_id, "tag": t} for (t,) in tags[old_id]],
                    )
                if vectors.get(old_id):
                    c.execute(
                        sa.insert(Embedding),
                        [
                            {"chunk_id": new_id, "model_id": m, "dim": d, "vector": v}
                            for m, d, v in vectors[old_id]
                        ],
                    )
            self.queue_adds(c, new_ids)
            # its history follows it, and what was handed of it names it by its new id
            c.execute(
                sa.update(ChunkChange)
                .where(ChunkChange.doc_id == doc_id, ChunkChange.space == old)
                .values(space=new, doc_id=target)
            )
            if target != doc_id:
                c.execute(
                    sa.update(Handed)
                    .where(Handed.space == old)
                    .values(hits=sa.func.replace(Handed.hits, f'"{doc_id}"', f'"{target}"'))
                )
            return MovedDocument(target, len(new_ids), len(old_ids))

    def redactions_of(self, space: str) -> dict[str, int]:
        """The redaction counts (kind → n) recorded for one space."""
        with self.conn() as c:
            rows = c.execute(
                sa.select(Redaction.kind, Redaction.count).where(Redaction.space == space)
            )
            return {str(k): int(n) for k, n in rows}

    def move_redactions(self, old: str, new: str) -> dict[str, int]:
        """Add ``old``'s redaction counts to ``new``'s and remove them, in one transaction;
        returns what moved (nothing, when run again)."""
        old, new = self._merge_spaces(old, new)
        with self.write() as s:
            moved = {
                str(k): int(n)
                for k, n in s.execute(
                    sa.select(Redaction.kind, Redaction.count)
                    .where(Redaction.space == old)
                    .with_for_update()
                )
            }
            add_redactions(s, moved, new)
            s.execute(sa.delete(Redaction).where(Redaction.space == old))
            return moved

    def move_records(self, old: str, new: str) -> int:
        """What is left of ``old`` once its documents moved: the history of documents
        deleted before (their ids kept: nothing is left to name) and what was handed to
        agents, into ``new``, in one transaction; the rows moved."""
        old, new = self._merge_spaces(old, new)
        with self.write() as s:
            moved = 0
            for table in (ChunkChange, Handed):
                done = s.execute(sa.update(table).where(table.space == old).values(space=new))
                moved += int(done.rowcount)  # type: ignore[attr-defined]
            return moved

    def carry_archived(
        self, run_id: str, keys: Sequence[tuple[str, str]], when: dt.datetime
    ) -> int:
        """One transaction: the archive lines of ``run_id`` (copies, appended while it was
        pending, of archived chunks of a merged space) count from now on, and the lines
        they copy stop counting. ``keys``: (the copied line's key, its copy's key). A line
        restored since it was copied keeps its restore, and its copy never counts. Returns
        the copies that count."""
        with self.write() as s:
            restored = (
                set(
                    s.scalars(
                        sa.select(ArchiveRestore.archive_key).where(
                            ArchiveRestore.archive_key.in_([k for k, _ in keys])
                        )
                    )
                )
                if keys
                else set()
            )
            # No new chunk: a carried line is restored by its copy, later, or never.
            retired = [copy if original in restored else original for original, copy in keys]
            for batch in batched(retired):
                s.execute(
                    sa.insert(ArchiveRestore),
                    [{"archive_key": k, "restored_at": when, "new_chunk_id": 0} for k in batch],
                )
            carried = len(keys) - len(restored)
            s.execute(
                sa.update(ForgettingRun)
                .where(ForgettingRun.run_id == run_id)
                .values(status=RUN_ARCHIVED, n_archived=carried, finished_at=when)
            )
            return carried

    def _merge_spaces(self, old: str, new: str) -> tuple[str, str]:
        """``old`` and ``new`` checked: two valid, different spaces this store may change."""
        old, new = check_space(old), check_space(new)
        if old == new:
            raise InvalidInputError(
                f"cannot merge space {old!r} into itself: name the space to empty first, "
                "then the one that receives its documents"
            )
        for space in (old, new):
            if not self.spaces.may_write(space):
                raise InvalidInputError(
                    f"this memory is bound to {self.spaces.describe()} and may not change "
                    f"space {space!r}; a merge needs a memory bound to every space "
                    "(Spaces.everything())"
                )
        return old, new


def _by_chunk(
    c: sa.Connection, table: Any, columns: Sequence[Any], ids: Sequence[int]
) -> dict[int, list[tuple[Any, ...]]]:
    """chunk id -> rows of ``columns`` of ``table`` (tags, vectors) for the chunks ``ids``."""
    out: dict[int, list[tuple[Any, ...]]] = {}
    for batch in batched(list(ids)):
        rows = c.execute(sa.select(table.chunk_id, *columns).where(table.chunk_id.in_(batch)))
        for cid, *values in rows:
            out.setdefault(int(cid), []).append(tuple(values))
    return out


def _insert_chunks(c: sa.Connection, rows: Sequence[Any], doc_id: str, space: str) -> list[int]:
    """Copies of chunk ``rows`` under ``doc_id`` in ``space``, with new ids (returned in order)."""
    values = [
        {col.name: getattr(r, col.name) for col in _CHUNK_COLUMNS}
        | {"doc_id": doc_id, "space": space}
        for r in rows
    ]
    ids: list[int] = []
    for batch in batched(values):
        result = c.execute(
            sa.insert(Chunk).returning(Chunk.id, sort_by_parameter_order=True), list(batch)
        )
        ids.extend(int(i) for i in result.scalars())
    return ids
