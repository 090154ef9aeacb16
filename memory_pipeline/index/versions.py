"""On-disk layout of published index versions and their atomic publication.

::

    <index root>/
      CURRENT            {"version": 7, "dir": "v000007"}   (replaced by one atomic rename)
      .writer.lock       one writer at a time
      v000007/
        manifest.json    model id, dimension, counts, segments, watermark
        dense/           immutable segments (hard links shared between versions)
        deleted.npy      ids removed since their segment was written
        sparse/          tantivy index (segment files hard-linked from the parent)

A version is written in a ``.tmp-*`` folder, renamed into place, and only then
named by ``CURRENT``. A crash at any point leaves the previous version serving
and, at worst, a stray temp folder that the next writer deletes.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from memory_pipeline.durable import fsync_dir, fsync_tree
from memory_pipeline.errors import IndexBusyError, IndexUnavailableError
from memory_pipeline.index.tokenizer import TOKENIZER_ID

CURRENT = "CURRENT"
LOCK = ".writer.lock"
MANIFEST = "manifest.json"
FORMAT = 1
KEEP_VERSIONS = 3


@dataclass
class SegmentInfo:
    name: str
    count: int


@dataclass
class Manifest:
    version: int
    model_id: str
    dim: int
    segments: list[SegmentInfo]
    n_dense: int
    n_sparse: int
    n_deleted: int
    watermark: int  # highest chunk id the version holds
    created_at: str
    kind: str
    parent: int | None = None
    format: int = FORMAT
    extra: dict[str, Any] = field(default_factory=dict)
    # The BM25 token rules the sparse index was built with (versions written before
    # the field existed used CJK bigrams only).
    tokenizer: str = "mp-cjk-bigram-v1"

    @property
    def stale_tokens(self) -> bool:
        """Its BM25 terms were made by other token rules than queries now use."""
        return self.tokenizer != TOKENIZER_ID

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        data = json.loads(text)
        if data.get("format") != FORMAT:
            raise IndexUnavailableError(
                f"index format {data.get('format')} is not supported; run rebuild-index"
            )
        data["segments"] = [SegmentInfo(**s) for s in data["segments"]]
        return cls(**data)


def version_dir_name(version: int) -> str:
    return f"v{version:06d}"


def read_current(root: Path) -> tuple[Manifest, Path] | None:
    """The published manifest and its folder, or None when nothing is published yet."""
    pointer = root / CURRENT
    try:
        data = json.loads(pointer.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise IndexUnavailableError(f"cannot read {pointer}: {exc}; run rebuild-index") from exc
    vdir = root / data["dir"]
    try:
        manifest = Manifest.from_json((vdir / MANIFEST).read_text())
    except FileNotFoundError as exc:
        raise IndexUnavailableError(
            f"published version folder {vdir} is missing; run rebuild-index"
        ) from exc
    return manifest, vdir


def pointer_stamp(root: Path) -> tuple[int, int, bytes] | None:
    """A cheap fingerprint of CURRENT: it changes whenever a version is published.

    Its content (the version, which every publish raises) is part of it: the inode
    of the replaced pointer can be handed to the next one, and two publishes can
    share one mtime tick on a coarse clock.
    """
    try:
        st = (root / CURRENT).stat()
        raw = (root / CURRENT).read_bytes()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, raw


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


@contextmanager
def writer_lock(root: Path, timeout: float = 600.0) -> Iterator[None]:
    """One index writer at a time, across processes."""
    root.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(root / LOCK), timeout=timeout)
    try:
        with lock:
            yield
    except Timeout as exc:
        raise IndexBusyError(
            f"another process has held the index writer lock ({root / LOCK}) for {timeout:.0f}s; "
            "wait for it to finish and try again"
        ) from exc


def new_temp_dir(root: Path, version: int) -> Path:
    tmp = root / f".tmp-{version_dir_name(version)}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    return tmp


def publish(root: Path, tmp: Path, manifest: Manifest) -> Path:
    """Make ``tmp`` the published version: manifest, rename, then one rename of CURRENT."""
    (tmp / MANIFEST).write_text(manifest.to_json())
    fsync_tree(tmp)
    final = root / version_dir_name(manifest.version)
    if final.exists():  # debris of a crash after the rename but before CURRENT moved
        shutil.rmtree(final)
    os.rename(tmp, final)
    fsync_dir(root)
    pointer_tmp = root / f"{CURRENT}.tmp"
    with open(pointer_tmp, "w") as fh:
        json.dump({"version": manifest.version, "dir": final.name}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(pointer_tmp, root / CURRENT)
    fsync_dir(root)
    return final


def clean_stale(root: Path, current_version: int | None, keep: int = KEEP_VERSIONS) -> None:
    """Remove temp folders of crashed writers and versions older than the last few.

    Call only under the writer lock. Readers that still hold an older version
    keep working: open files survive their unlinking.
    """
    for tmp in root.glob(".tmp-*"):
        shutil.rmtree(tmp, ignore_errors=True)
    (root / f"{CURRENT}.tmp").unlink(missing_ok=True)
    if current_version is None:
        return
    for vdir in root.glob("v[0-9]*"):
        try:
            number = int(vdir.name[1:])
        except ValueError:
            continue
        if number > current_version or number <= current_version - keep:
            shutil.rmtree(vdir, ignore_errors=True)


def link_tree(src: Path, dst: Path) -> None:
    """Hard-link every file of src into dst (same file system): O(files), not O(bytes)."""
    dst.mkdir(parents=True, exist_ok=True)
    for item in src.iterdir():
        if item.is_file():
            os.link(item, dst / item.name)


def dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
