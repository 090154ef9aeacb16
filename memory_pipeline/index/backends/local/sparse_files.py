"""The on-disk side of the tantivy BM25 index: its schema, its metadata, cheap clones.

A published version's sparse index is a directory of tantivy files. A new version
starts as a clone of the published one: hard links to the committed segment
files (tantivy never modifies one once written), a copy of ``meta.json``.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import tantivy

from memory_pipeline.durable import fsync_dir, write_bytes
from memory_pipeline.errors import IndexUnavailableError

BODY_FIELD = "body"
ID_FIELD = "chunk_id"
META = "meta.json"
MANAGED = ".managed.json"
LOCK_FILES = frozenset({".tantivy-meta.lock", ".tantivy-writer.lock"})


def schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field(BODY_FIELD, tokenizer_name="whitespace", index_option="freq")
    builder.add_integer_field(ID_FIELD, stored=True, indexed=True, fast=True)
    return builder.build()


def check_schema(path: Path, meta: dict[str, Any]) -> None:
    """Raise IndexUnavailableError unless ``meta`` describes the schema :func:`schema` builds."""
    fields = {f.get("name"): f for f in meta.get("schema", [])}
    body, cid = fields.get(BODY_FIELD), fields.get(ID_FIELD)
    ok = (
        body is not None
        and body.get("type") == "text"
        and (body.get("options", {}).get("indexing") or {}).get("tokenizer") == "whitespace"
        and (body.get("options", {}).get("indexing") or {}).get("record") in ("freq", "position")
        and cid is not None
        and cid.get("type") == "i64"
        and cid.get("options", {}).get("indexed")
        and cid.get("options", {}).get("fast")
    )
    if not ok:
        raise IndexUnavailableError(
            f"{path} holds a tantivy index but not a sparse index of memory_pipeline "
            f"(expected fields {BODY_FIELD!r}: whitespace-tokenized text with frequencies, "
            f"{ID_FIELD!r}: indexed fast i64; found {sorted(k for k in fields if k)}). "
            "Point to the right directory or rebuild it with SparseIndex.create()."
        )


def read_meta(path: Path) -> tuple[bytes, dict[str, Any]]:
    meta_path = path / META
    try:
        raw = meta_path.read_bytes()
    except FileNotFoundError:
        raise IndexUnavailableError(
            f"no sparse index at {path}: {META} is missing. Build one with "
            "SparseIndex.create() (or check the path / published version)."
        ) from None
    except OSError as exc:
        raise IndexUnavailableError(f"cannot read {meta_path}: {exc}") from exc
    try:
        meta = json.loads(raw)
        if not isinstance(meta, dict) or not isinstance(meta.get("segments"), list):
            raise ValueError("no 'segments' list")
    except ValueError as exc:
        raise IndexUnavailableError(
            f"sparse index at {path} is corrupt: {META} is not valid tantivy metadata "
            f"({exc}). Rebuild the index or restore the directory from a published copy."
        ) from exc
    return raw, meta


def clone_index(src: Path, dst: Path) -> None:
    """Make ``dst`` an independent copy of the index committed at ``src``.

    tantivy never modifies a segment file once written (deletes go to new
    ``.del`` files, merges to new segments, ``meta.json`` is replaced
    atomically), so the segment files of the committed snapshot are
    hard-linked, ``meta.json`` is copied and ``.managed.json`` is written
    for exactly the linked files. Cost is O(number of files). Files of
    uncommitted segments and lock files are skipped. Falls back to copying
    when hard links are impossible (other file system).

    ``dst`` must not exist or be an empty directory; it is assembled in a
    sibling temporary directory and renamed into place, so nobody sees a
    half-made copy. A commit racing in ``src`` is handled by retrying.
    """
    src, dst = Path(src), Path(dst)
    if not src.is_dir():
        raise IndexUnavailableError(f"cannot clone {src}: no such index directory.")
    if dst.exists() and (not dst.is_dir() or any(dst.iterdir())):
        raise IndexUnavailableError(
            f"cannot clone into {dst}: it exists and is not an empty directory."
        )
    dst.parent.mkdir(parents=True, exist_ok=True)
    last_error: Exception | None = None
    for _attempt in range(5):
        tmp = dst.parent / f".{dst.name}.clone-{uuid.uuid4().hex}"
        tmp.mkdir()
        try:
            _clone_once(src, tmp)
            os.replace(tmp, dst)  # replaces an empty dst directory atomically
            fsync_dir(dst.parent)
            return
        except FileNotFoundError as exc:  # a file was garbage-collected by a commit in src
            last_error = exc
        except OSError as exc:
            raise IndexUnavailableError(f"cannot clone {src} to {dst}: {exc}") from exc
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    raise IndexUnavailableError(
        f"cannot clone {src}: it kept changing during the copy ({last_error})."
    )


def _clone_once(src: Path, dst: Path) -> None:
    raw, meta = read_meta(src)
    check_schema(src, meta)
    segments: dict[str, int | None] = {}
    for seg in meta["segments"]:
        deletes = seg.get("deletes")
        segments[str(seg["segment_id"]).replace("-", "")] = (
            int(deletes["opstamp"]) if deletes else None
        )
    linked: list[str] = []
    for name in os.listdir(src):
        if name in LOCK_FILES or name in (META, MANAGED):
            continue
        parts = name.split(".")
        if parts[0] not in segments:
            continue  # uncommitted, or garbage not yet collected
        # "<segment>.<opstamp>.del": only the one of the committed opstamp is live.
        if parts[-1] == "del" and parts != [parts[0], str(segments[parts[0]]), "del"]:
            continue
        _link_or_copy(src / name, dst / name)
        linked.append(name)
    # Every segment must be complete (at least its postings and doc store).
    for seg_id in segments:
        for ext in ("idx", "store"):
            if f"{seg_id}.{ext}" not in linked:
                raise FileNotFoundError(errno.ENOENT, "segment file vanished", f"{seg_id}.{ext}")
    write_bytes(dst / META, raw)
    write_bytes(dst / MANAGED, json.dumps([*linked, META]).encode())
    fsync_dir(dst)


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError as exc:
        if exc.errno in (errno.ENOENT,):
            raise
        shutil.copy2(src, dst)  # other file system, or no hard links there
