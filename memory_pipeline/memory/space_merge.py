"""Merge one memory space into another: its documents (with their history), redaction
counts, archive, and the records of what was handed to agents.

Dry run by default: ``merge_spaces`` then only says what would move. Applied, it moves
each document in a transaction of its own (``Store.move_document``), then carries the
space's forgotten chunks over in the archive, then its redaction counts; each step
leaves nothing half done when killed, and a second run finishes what the first left.

Forgotten chunks are carried, not left behind: each archive line of the old space that
counts as archived gets a copy naming the document's id in the new space, under a run
of its own that is pending while the copies are appended (so they count for nothing
yet); one transaction then makes the copies count and the lines they copy stop
counting (``Store.carry_archived``). Restoring such a chunk after the merge brings it
back into the new space, beside the rest of its document; before that transaction it
is restored into the old space, and the next merge run moves it along.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.memory.archive import (
    append_to_archive,
    archive_key,
    archived_records,
    record_space,
)
from memory_pipeline.spaces import Spaces
from memory_pipeline.store import Store, now_utc
from memory_pipeline.store.merging import id_in_space

#: Called after each document with (documents done, documents in all).
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class MergeReport:
    """What a merge found in the old space and, applied, what it did."""

    old: str
    new: str
    applied: bool
    documents: int  # documents of the old space
    chunks: int  # their chunks
    already_there: int  # of those documents, how many the new space holds already
    archived: int  # forgotten chunks of the old space (restorable into the new one after)
    redactions: int  # redactions counted for the old space
    chunks_added: int = 0  # chunks written into the new space (0 in a dry run)
    chunks_removed: int = 0  # chunks removed from the old space (0 in a dry run)
    index_version: int | None = None  # the index version published after the merge
    index_error: str | None = None  # why that index update failed (run update-index)

    def describe(self) -> str:
        if not (self.documents or self.archived or self.redactions):
            return (
                f"space {self.old!r} holds nothing to move into {self.new!r}: merged "
                "already (memory-pipeline spaces lists the spaces and what they hold)"
            )
        verb = "moved" if self.applied else "would move"
        line = (
            f"{verb} {self.documents} documents ({self.chunks} chunks) from space "
            f"{self.old!r} into {self.new!r}"
        )
        if self.already_there:
            line += f"; {self.already_there} of them are there already and are not doubled"
        if self.archived:
            line += f"; {self.archived} forgotten chunks stay restorable, into {self.new!r}"
        if self.redactions:
            line += f"; {self.redactions} redactions counted go with them"
        if not self.applied:
            line += " (dry run: pass --apply to merge)"
        elif self.index_error:
            line += f"; index not updated ({self.index_error}): run update-index"
        elif self.index_version is not None:
            line += f"; index version {self.index_version}"
        return line


def merge_spaces(
    store: Store,
    old: str,
    new: str,
    *,
    apply: bool = False,
    archive_path: Path | None = None,
    progress: Progress | None = None,
) -> MergeReport:
    """Move every document of space ``old`` into space ``new`` (``apply``), or say what
    would move. ``archive_path``: the forgetting archive, whose chunks of ``old`` are
    carried over (None: a memory without one). Works across spaces whatever ``store``
    is bound to, and writes into ``new`` alone.

    Refuses (``InvalidInputError``) a name that is not a space's, a space merged into
    itself, and two spaces that both hold nothing. An ``old`` that holds nothing (nor
    anything archived or counted) beside a ``new`` that holds documents is what a
    finished merge leaves: a run after it changes nothing and says so.

    The index learns of the moves through the queue (or in the same transaction, for an
    index in the database): run the index update afterwards, as ``MemorySystem.merge_spaces``
    does; until then serving already finds the moved chunks in ``new`` and never in ``old``.
    """
    store = store.bound(Spaces.everything())
    plan = store.merge_plan(old, new)
    archived = _archived_in(store, archive_path, old) if archive_path is not None else []
    counted = store.redactions_of(old)
    if not plan and not archived and not counted and not store.holds_documents(new):
        raise InvalidInputError(
            f"neither space {old!r} nor {new!r} holds anything (no documents, nothing "
            "forgotten, no redactions counted): not the names meant? "
            "`memory-pipeline spaces` lists the spaces that hold documents"
        )
    report = MergeReport(
        old=old,
        new=new,
        applied=apply,
        documents=len(plan),
        chunks=sum(m.chunks for m in plan),
        already_there=sum(m.already_there for m in plan),
        archived=len(archived),
        redactions=sum(counted.values()),
    )
    if not apply:
        return report
    added = removed = 0
    for done, move in enumerate(plan, 1):
        moved = store.move_document(move.doc_id, old, new)
        if moved is not None:
            added, removed = added + moved.added, removed + moved.removed
        if progress is not None:
            progress(done, len(plan))
    if archived:
        assert archive_path is not None
        _carry(store, archive_path, old, new, archived)
    store.move_redactions(old, new)
    store.move_records(old, new)
    return replace(report, chunks_added=added, chunks_removed=removed)


def _archived_in(store: Store, archive_path: Path, space: str) -> list[dict[str, Any]]:
    return [r for r in archived_records(store, archive_path) if record_space(r) == space]


def _carry(
    store: Store, archive_path: Path, old: str, new: str, records: list[dict[str, Any]]
) -> None:
    """Copy ``records`` (archived chunks of ``old``) into the archive as ``new``'s, then
    make the copies count in place of the lines they copy (see the module docstring)."""
    run_id = f"merge-{uuid.uuid4().hex}"
    when = now_utc()
    params = {"space": new, "merged_from": old}
    store.start_forgetting_run(run_id, json.dumps(params), len(records), when)
    keys: list[tuple[str, str]] = []
    with append_to_archive(archive_path) as out:
        for r in records:
            doc_id = id_in_space(r["doc_id"], r["document"]["content_hash"], old, new)
            original = archive_key(r["run_id"], r["chunk_id"])
            out.write({**r, "run_id": run_id, "space": new, "doc_id": doc_id, "carried": original})
            keys.append((original, archive_key(run_id, r["chunk_id"])))
    store.carry_archived(run_id, keys, now_utc())
