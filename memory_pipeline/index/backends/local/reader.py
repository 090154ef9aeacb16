"""Read side of the published index: loads a version, notices newer ones."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np

from memory_pipeline.index.backends.local.dense import DenseSegment, SegmentedDense
from memory_pipeline.index.backends.local.sparse_spaces import PartitionedSparse, PartitionedView
from memory_pipeline.index.protocols import DenseIndex
from memory_pipeline.index.protocols import SparseIndex as SparseSearch
from memory_pipeline.index.versions import Manifest, dir_size, pointer_stamp, read_current

_SegmentKey = tuple[str, int, int, int, int]


@dataclass
class LoadedVersion(PartitionedView):
    manifest: Manifest
    path: Path
    segments: list[DenseSegment]
    deleted: np.ndarray
    sparse: SparseSearch  # the BM25 partitions of the spaces this view reads
    partitions: PartitionedSparse | None = None  # every space's

    @property
    def dense(self) -> DenseIndex:  # segment ids minus deleted
        return SegmentedDense(self.segments, self.deleted)

    def size_bytes(self) -> int:
        # Hard links shared with older versions count in full: this is what the version needs.
        return dir_size(self.path)


def load_deleted(vdir: Path) -> np.ndarray:
    path = vdir / "deleted.npy"
    return np.load(path) if path.exists() else np.zeros(0, dtype=np.int64)


class IndexReader:
    """Serves the published version and swaps to a newer one on the next call.

    Segments are cached by file identity: versions share them through hard links, so
    picking up a new version loads only what it adds.
    """

    def __init__(self, root: Path, *, threads: int = 1) -> None:
        self.root = root
        # One OpenMP thread makes single-query search ~3x faster here (DESIGN §2).
        faiss.omp_set_num_threads(threads)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, bytes] | None = None
        self._loaded: LoadedVersion | None = None
        self._segments: dict[_SegmentKey, DenseSegment] = {}

    def current(self) -> LoadedVersion | None:
        stamp = pointer_stamp(self.root)
        if stamp == self._stamp and self._loaded is not None:
            return self._loaded
        with self._lock:
            stamp = pointer_stamp(self.root)
            if stamp != self._stamp or self._loaded is None:
                self._loaded = self._load() if stamp is not None else None
                self._stamp = stamp
            return self._loaded

    def _load(self) -> LoadedVersion | None:
        found = read_current(self.root)
        if found is None:
            return None
        manifest, vdir = found
        dense_dir = vdir / "dense"
        segments: list[DenseSegment] = []
        keep: dict[_SegmentKey, DenseSegment] = {}
        for info in manifest.segments:
            st = os.stat(dense_dir / f"{info.name}.ids.npy")
            # Hard links share all of these; a new file that was handed a deleted file's
            # inode number differs in name, mtime or size.
            key = (info.name, st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
            segment = self._segments.get(key) or DenseSegment.load(dense_dir, info.name)
            keep[key] = segment
            segments.append(segment)
        self._segments = keep
        parts = PartitionedSparse.open(vdir)
        return LoadedVersion(
            manifest, vdir, segments, load_deleted(vdir), parts.view(None), partitions=parts
        )
