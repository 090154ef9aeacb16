"""The forgetting archive: an append-only JSONL file plus two tables that say which lines count.

A chunk is *archived* iff its line is in the file, the line's run has status
``"archived"`` in the database and no ``ArchiveRestore`` row exists for its key
``f"{run_id}:{chunk_id}"``. The forgetting batch appends (and fsyncs) lines while
its run is still ``"pending"`` and flips the run to ``"archived"`` in the very
transaction that deletes the chunks, so lines of an interrupted run never count
and a chunk is live or archived at every instant — never both, never neither.
"""

from __future__ import annotations

import base64
import datetime as dt
import fcntl
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np

from memory_pipeline.durable import fsync_dir
from memory_pipeline.spaces import DEFAULT_SPACE
from memory_pipeline.store import Store, content_sha, now_utc
from memory_pipeline.store.forgetting import RUN_ARCHIVED, RUN_PENDING
from memory_pipeline.store.rows import turns_json
from memory_pipeline.types import ChunkRecord, DocumentInfo, Turn

ARCHIVE_FILE = "chunks_archive.jsonl"
RECORD_TYPE = "chunk"
ARCHIVED = RUN_ARCHIVED
PENDING = RUN_PENDING
_BATCH = 500  # rows per statement: well below SQLite's bound-parameter cap
_ARCHIVE_BATCH = 2_000  # chunks read (text, tags, vector) per round trip


def archive_key(run_id: str, chunk_id: int) -> str:
    return f"{run_id}:{int(chunk_id)}"


def _iso(value: dt.date | dt.datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def encode_vector(vector: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f4").astype(np.float32)


def chunk_line(
    *,
    run_id: str,
    archived_at: dt.datetime,
    reason: str,
    score: float | None,
    chunk: ChunkRecord,
    document: DocumentInfo,
    model_id: str,
    vector: np.ndarray | None,
) -> dict[str, Any]:
    """One archive record: everything needed to bring the chunk (and its document) back."""
    return {
        "type": RECORD_TYPE,
        "run_id": run_id,
        "archived_at": archived_at.isoformat(),
        "reason": reason,
        "score": score,
        "chunk_id": chunk.id,
        "doc_id": chunk.doc_id,
        "space": chunk.space,
        "chunk_index": chunk.chunk_index,
        "content": chunk.content,
        "index_text": chunk.index_text,
        "turns": [t.to_dict() for t in chunk.turns],
        "token_count": chunk.token_count,
        "knowledge_type": chunk.knowledge_type,
        "importance": chunk.importance,
        "tags": list(chunk.tags),
        "access_count": chunk.access_count,
        "last_accessed_at": _iso(chunk.last_accessed_at),
        "created_at": _iso(chunk.created_at),
        "source_date": _iso(chunk.source_date),
        "model_id": model_id,
        "vector": encode_vector(vector) if vector is not None else None,
        "dim": int(vector.shape[0]) if vector is not None else None,
        "document": {
            "source": document.source,
            "title": document.title,
            "fmt": document.fmt,
            "content_hash": document.content_hash,
            "normalized_hash": document.normalized_hash,
            "byte_size": document.byte_size,
            "knowledge_type": document.knowledge_type,
            "importance": document.importance,
            "source_date": _iso(document.source_date),
            "source_date_rule": document.source_date_rule,
            "created_at": _iso(document.created_at),
            "n_chunks": document.n_chunks,
        },
    }


# ------------------------------------------------------------ record <-> rows
def _date(value: str | None) -> dt.date | None:
    return dt.date.fromisoformat(value) if value else None


def _datetime(value: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(value) if value else None


def record_space(r: dict[str, Any]) -> str:
    """The space an archived chunk came from (records written before spaces: default)."""
    return str(r.get("space") or DEFAULT_SPACE)


def document_row(doc_id: str, doc: dict[str, Any], space: str) -> dict[str, Any]:
    return {
        "doc_id": doc_id,
        "space": space,
        **{k: doc[k] for k in ("source", "title", "fmt", "content_hash", "normalized_hash")},
        "byte_size": int(doc["byte_size"]),
        "knowledge_type": doc.get("knowledge_type"),
        "importance": doc.get("importance"),
        "source_date": _date(doc.get("source_date")),
        "source_date_rule": doc.get("source_date_rule"),
        "created_at": _datetime(doc["created_at"]),
        "n_chunks": int(doc.get("n_chunks") or 0),
    }


def indexed_text(r: dict[str, Any]) -> str:
    """What an archived chunk's indices held: its index text, else its content."""
    text = r.get("index_text")
    return text if isinstance(text, str) else str(r["content"])


def chunk_row(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "doc_id": r["doc_id"],
        "space": record_space(r),
        "chunk_index": int(r["chunk_index"]),
        "content": r["content"],
        "content_sha": content_sha(indexed_text(r)),
        "index_text": r.get("index_text"),
        "turns": turns_json([Turn.from_dict(t) for t in r.get("turns") or ()]),
        "token_count": int(r["token_count"]),
        "knowledge_type": r.get("knowledge_type"),
        "importance": r.get("importance"),
        "access_count": int(r.get("access_count") or 0),
        "last_accessed_at": _datetime(r.get("last_accessed_at")),
        "created_at": _datetime(r["created_at"]),
        "source_date": _date(r.get("source_date")),
    }


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


class ArchiveAppender:
    """Writes records as JSON lines; the caller's ``with`` block ends with flush + fsync."""

    def __init__(self, fh: IO[bytes]) -> None:
        self._fh = fh
        self.written = 0

    def write(self, record: Mapping[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        self._fh.write(line.encode("utf-8") + b"\n")
        self.written += 1


@contextmanager
def archive_lock(path: Path) -> Iterator[None]:
    """Held while the archive at ``path`` is appended to or rewritten whole (a scrub): an
    append lands before a rewrite reads the file or after it renamed the new one in, never
    in between. A lock file beside it (``flock``: released if its holder dies)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "ab") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextmanager
def append_to_archive(path: Path) -> Iterator[ArchiveAppender]:
    """Append lines durably: file data fsynced, and its folder too when the file is new."""
    new_dirs = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
    path.parent.mkdir(parents=True, exist_ok=True)
    with archive_lock(path), _appending(path, new_dirs) as appender:
        yield appender


@contextmanager
def _appending(path: Path, new_dirs: list[Path]) -> Iterator[ArchiveAppender]:
    created = not path.exists()
    with open(path, "ab") as fh:
        # A run killed mid-write leaves a partial last line: never glue a record onto it.
        if not created and path.stat().st_size and not _ends_with_newline(path):
            fh.write(b"\n")
        appender = ArchiveAppender(fh)
        yield appender
        fh.flush()
        os.fsync(fh.fileno())
    if created:
        for folder in [path.parent, *(p.parent for p in reversed(new_dirs))]:
            fsync_dir(folder)


def iter_archive(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """(line number, record or None, parse error or None) for every non-blank line."""
    if not path.exists():
        return
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                yield number, None, f"line {number}: not valid JSON ({exc})"
                continue
            if not isinstance(record, dict):
                yield number, None, f"line {number}: not a JSON object"
                continue
            yield number, record, None


def archived_records(store: Store, path: Path) -> Iterator[dict[str, Any]]:
    """Archive records that count as archived right now (see the module docstring)."""
    statuses = store.forgetting_run_statuses()
    restored = store.restored_archive_keys()
    for _, record, _ in iter_archive(path):
        if record is None or record.get("type") != RECORD_TYPE:
            continue
        run_id = record.get("run_id")
        if not isinstance(run_id, str) or statuses.get(run_id) != ARCHIVED:
            continue
        if archive_key(run_id, record["chunk_id"]) in restored:
            continue
        yield record


def archived_keys(store: Store, path: Path) -> set[str]:
    """Keys ``run_id:chunk_id`` of every chunk archived right now."""
    return {archive_key(r["run_id"], r["chunk_id"]) for r in archived_records(store, path)}


# ------------------------------------------------------------------ appending
def append_chunks(
    store: Store,
    archive_path: Path,
    model_id: str,
    run_id: str,
    entries: Sequence[tuple[int, str, float | None]],
) -> list[int]:
    """One fsynced line per (chunk id, reason, score) still live; returns the ids written."""
    written: list[int] = []
    archived_at = now_utc()
    docs: dict[str, DocumentInfo] = {}
    with append_to_archive(archive_path) as out:
        for start in range(0, len(entries), _ARCHIVE_BATCH):
            batch = entries[start : start + _ARCHIVE_BATCH]
            ids = [chunk_id for chunk_id, _, _ in batch]
            records = store.get_chunks(ids)
            found, matrix = store.vectors_for(ids, model_id)
            vectors = {int(i): matrix[row] for row, i in enumerate(found)}
            docs.update(store.documents_info({r.doc_id for r in records.values()} - docs.keys()))
            for chunk_id, reason, score in batch:
                record = records.get(chunk_id)
                document = docs.get(record.doc_id) if record else None
                if record is None or document is None:  # deleted since it was scored
                    continue
                out.write(
                    chunk_line(
                        run_id=run_id,
                        archived_at=archived_at,
                        reason=reason,
                        score=score,
                        chunk=record,
                        document=document,
                        model_id=model_id,
                        vector=vectors.get(chunk_id),
                    )
                )
                written.append(chunk_id)
    return written
