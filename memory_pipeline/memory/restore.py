"""Bring archived chunks back: new ids (ids are never reused), one transaction, then the index.

Each restored chunk gets its original fields and tags, the archived vector when it
was made by the current embedder (else a known vector for the same text, else a
fresh embedding), its document row again if that was deleted meanwhile, an
``IndexChange("add")`` and an ``ArchiveRestore`` row — the latter is what makes its
archive line stop counting as archived.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memory_pipeline.errors import InvalidInputError, MemoryPipelineError, NotFoundError
from memory_pipeline.memory.archive import (
    PENDING,
    archive_key,
    archived_records,
    chunk_row,
    decode_vector,
    document_row,
    indexed_text,
    iter_archive,
    record_space,
)
from memory_pipeline.metadata import check_text
from memory_pipeline.spaces import DEFAULT_SPACE
from memory_pipeline.store import Store, content_sha, now_utc
from memory_pipeline.store.forgetting import RestoredChunk, RunRecord

if TYPE_CHECKING:
    from memory_pipeline.embedding.base import Embedder
    from memory_pipeline.index.protocols import IndexUpdater

_BATCH = 500  # rows per statement: well below SQLite's bound-parameter cap
_UNRECORDED = object()  # a run's params without "space": written before runs named it


@dataclass(frozen=True)
class SkippedChunk:
    old_chunk_id: int
    doc_id: str
    chunk_index: int
    reason: str


@dataclass
class RestoreReport:
    selector: str
    selected: int
    restored: int
    reused_vectors: int
    reembedded: int
    documents_recreated: int
    new_ids: dict[int, int] = field(default_factory=dict)  # old chunk id -> new chunk id
    skipped: list[SkippedChunk] = field(default_factory=list)
    not_archived: list[int] = field(default_factory=list)  # asked-for ids with no archived line
    index_version: int | None = None
    index_error: str | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["new_ids"] = {str(k): v for k, v in self.new_ids.items()}
        return data

    def render(self) -> str:
        lines = [
            f"restore {self.selector}: {self.restored} of {self.selected} archived chunks "
            f"back ({self.reused_vectors} archived vectors reused, {self.reembedded} re-embedded, "
            f"{self.documents_recreated} documents recreated) in {self.seconds:.2f}s",
        ]
        for skip in self.skipped:
            lines.append(
                f"  skipped {skip.doc_id}#{skip.chunk_index} (old id {skip.old_chunk_id}): "
                f"{skip.reason}"
            )
        if self.not_archived:
            lines.append(f"  not archived (ignored): chunk ids {self.not_archived}")
        if self.index_error:
            lines.append(f"  index not updated ({self.index_error}); run update-index")
        elif self.index_version is not None:
            lines.append(f"  index version {self.index_version}")
        return "\n".join(lines)


def _selector(
    run_id: str | None, doc_id: str | None, chunk_ids: Iterable[int] | None
) -> tuple[str, Callable[[dict[str, Any]], bool], list[int]]:
    given = [
        n
        for n, v in (("run_id", run_id), ("doc_id", doc_id), ("chunk_ids", chunk_ids))
        if v is not None
    ]
    if len(given) != 1:
        raise InvalidInputError(
            "pass exactly one of run_id, doc_id or chunk_ids to choose what to restore"
            + (f" (got {', '.join(given)})" if given else "")
        )
    if run_id is not None:
        if not isinstance(run_id, str) or not run_id.strip():
            raise InvalidInputError("run_id must be a non-empty string")
        return f"run {run_id}", lambda r: r["run_id"] == run_id, []
    if doc_id is not None:
        if not isinstance(doc_id, str) or not doc_id.strip():
            raise InvalidInputError("doc_id must be a non-empty string")
        return f"document {doc_id}", lambda r: r["doc_id"] == doc_id, []
    assert chunk_ids is not None
    ids = list(chunk_ids)
    if not ids or any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
        raise InvalidInputError(f"chunk_ids must be a non-empty list of integers, got {ids!r}")
    wanted = set(ids)
    return f"chunk ids {sorted(wanted)}", lambda r: int(r["chunk_id"]) in wanted, sorted(wanted)


def _run_spaces(run: RunRecord, archive_path: Path) -> set[str]:
    """The spaces a run acted in: the one it recorded, else those of the chunks it archived
    (a run of every space, or one recorded before runs named their space)."""
    try:
        params = json.loads(run.params)
    except json.JSONDecodeError:
        params = {}
    recorded = params.get("space", _UNRECORDED) if isinstance(params, dict) else _UNRECORDED
    if isinstance(recorded, str):
        return {recorded}
    archived = {
        record_space(r)
        for _, r, _ in iter_archive(archive_path)
        if r is not None and r.get("run_id") == run.run_id
    }
    # Before runs named their space, one that archived nothing can only be placed by default.
    return archived or ({DEFAULT_SPACE} if recorded is _UNRECORDED else set())


def _visible_run(store: Store, run_id: str, archive_path: Path) -> RunRecord | None:
    """A forgetting run this store may restore from; a run of a space it may not write is,
    to it, no run at all (it must not learn that another space ran one)."""
    run = store.forgetting_run(run_id)
    if run is None or store.spaces.read is None:
        return run
    if any(store.spaces.may_write(s) for s in _run_spaces(run, archive_path)):
        return run
    return None


def _not_found(
    store: Store, selector: str, run_id: str | None, archive_path: Path
) -> NotFoundError:
    if run_id is not None:
        run = _visible_run(store, run_id, archive_path)
        if run is None:
            why = "there is no such forgetting run (run ids are printed by `forget --apply`)"
        elif run.status == PENDING:
            why = "that run was interrupted before it removed anything: its chunks are still live"
        elif run.n_archived == 0:
            why = "that run archived nothing"
        else:
            why = "every chunk of that run is already restored"
    else:
        why = "nothing archived matches (never archived, already restored, or from an interrupted run)"
    return NotFoundError(f"nothing to restore for {selector}: {why}")


def _vectors(
    store: Store, embedder: Embedder, records: list[dict[str, Any]]
) -> tuple[np.ndarray, int, int]:
    """Archived vectors of the current model; known vectors by content; embed the rest.

    Returns (vectors, archived vectors reused, re-embedded). A vector known only from a
    space the store may not read counts as re-embedded, so the counts never tell that
    another space holds the text.
    """
    vectors: list[np.ndarray | None] = [
        decode_vector(r["vector"])
        if r.get("vector") and r.get("model_id") == embedder.model_id
        else None
        for r in records
    ]
    reused = sum(v is not None for v in vectors)
    todo = [i for i, v in enumerate(vectors) if v is None]
    known = store.vectors_by_content(
        (content_sha(indexed_text(records[i])) for i in todo), embedder.model_id
    )
    fresh = [i for i in todo if content_sha(indexed_text(records[i])) not in known]
    embedded = embedder.embed_documents([indexed_text(records[i]) for i in fresh])
    for row, i in enumerate(fresh):
        vectors[i] = embedded[row]
    for i in todo:
        if vectors[i] is None:
            vectors[i] = known[content_sha(indexed_text(records[i]))]
    if not records:
        return np.zeros((0, embedder.dim), np.float32), 0, 0
    matrix = np.stack([np.asarray(v, dtype=np.float32) for v in vectors])
    store.check_model(embedder.model_id, int(matrix.shape[1]))
    told = store.readable_contents(known, embedder.model_id) if known else set()
    from_known = [content_sha(indexed_text(records[i])) for i in sorted(set(todo) - set(fresh))]
    return matrix, reused, len(fresh) + sum(sha not in told for sha in from_known)


def restore_archived(
    store: Store,
    writer: IndexUpdater,
    archive_path: Path,
    embedder: Embedder,
    *,
    run_id: str | None = None,
    doc_id: str | None = None,
    chunk_ids: Iterable[int] | None = None,
) -> RestoreReport:
    """Bring archived chunks back with new ids, in one transaction, then update the index."""
    for name, value in (("run_id", run_id), ("doc_id", doc_id)):
        if isinstance(value, str):
            check_text(name, value)
    started = time.perf_counter()
    selector, matches, asked = _selector(run_id, doc_id, chunk_ids)
    chosen: dict[tuple[str, int], dict[str, Any]] = {}
    superseded: list[dict[str, Any]] = []
    for record in archived_records(store, archive_path):
        # Chunks of a space this memory may not write do not exist for it.
        if matches(record) and store.spaces.may_write(record_space(record)):
            position = (record["doc_id"], int(record["chunk_index"]))
            if position in chosen:  # archived, restored elsewhere, archived again: latest wins
                superseded.append(chosen[position])
            chosen[position] = record
    if not chosen:
        raise _not_found(store, selector, run_id, archive_path)
    report = RestoreReport(selector, len(chosen) + len(superseded), 0, 0, 0, 0)
    seen_ids = {int(r["chunk_id"]) for r in [*chosen.values(), *superseded]}
    report.not_archived = [i for i in asked if i not in seen_ids]
    for r in superseded:
        report.skipped.append(
            SkippedChunk(
                int(r["chunk_id"]),
                r["doc_id"],
                int(r["chunk_index"]),
                "a later archived copy is restored instead",
            )
        )
    live = set(store.live_positions(chosen))
    todo = [r for position, r in chosen.items() if position not in live]
    if todo:
        vectors, report.reused_vectors, report.reembedded = _vectors(store, embedder, todo)
        items = [
            RestoredChunk(
                document_row(r["doc_id"], r["document"], record_space(r)),
                chunk_row(r),
                tuple(r["tags"]),
                archive_key(r["run_id"], r["chunk_id"]),
            )
            for r in todo
        ]
        written = store.restore_chunks(items, vectors, embedder.model_id, now_utc())
        kept = set(written.kept)
        # Positions someone re-ingested meanwhile were skipped inside the transaction.
        live |= {item.position for i, item in enumerate(items) if i not in kept}
        todo = [todo[i] for i in written.kept]
        new_ids, report.documents_recreated = written.new_ids, written.documents_recreated
        report.restored = len(new_ids)
        report.new_ids = {int(r["chunk_id"]): i for r, i in zip(todo, new_ids, strict=True)}
        try:
            report.index_version = writer.update().version
        except (MemoryPipelineError, OSError) as exc:  # the database is the truth; serving copes
            report.index_error = str(exc)
    for position, r in chosen.items():
        if position in live:
            report.skipped.append(
                SkippedChunk(
                    int(r["chunk_id"]), *position, "a chunk at this position is live again"
                )
            )
    report.seconds = time.perf_counter() - started
    return report
