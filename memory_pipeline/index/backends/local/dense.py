"""Dense vector segments: immutable files, searched with FAISS inner product.

A published index is a list of segments plus a set of deleted ids. Segments
never change once written, so a new version hard-links the old ones and adds a
small new segment: an update costs what it adds, not what the corpus holds.
Vectors are stored as plain ``.npy`` (the source for merges); segments past
``ivf_threshold`` vectors also get an IVF index file for sub-linear search.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import faiss
import numpy as np

from memory_pipeline.durable import fsync_file, save_npy
from memory_pipeline.index.backends.local.defaults import DEFAULT_DENSE_INDEX as DEFAULT_DENSE_INDEX
from memory_pipeline.index.backends.local.defaults import (
    DEFAULT_IVF_THRESHOLD as DEFAULT_IVF_THRESHOLD,
)
from memory_pipeline.index.backends.local.defaults import DENSE_INDEXES as DENSE_INDEXES
from memory_pipeline.index.versions import SegmentInfo

log = logging.getLogger(__name__)

#: Tiered merging: more segments than this fold the small ones together ...
MAX_SEGMENTS = 8
#: ... and deleted entries above this share of all entries fold everything.
MAX_DELETED_FRACTION = 0.2

IVF_NPROBE = 64
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 100
HNSW_EF_SEARCH = 128
#: A filtered search scores the allowed vectors of an approximate segment exactly when
#: they are at most this many, or this share of the segment: a graph or a few probed
#: lists would miss most of a small allowed set.
EXACT_FILTER_MAX = 20_000
EXACT_FILTER_SHARE = 0.1


def write_segment(
    directory: Path,
    name: str,
    ids: np.ndarray,
    vectors: np.ndarray,
    *,
    ivf_threshold: int = DEFAULT_IVF_THRESHOLD,
    dense_index: str = DEFAULT_DENSE_INDEX,
) -> None:
    """Write one immutable segment: ids, vectors and, when it holds at least
    ``ivf_threshold`` vectors, the approximate index ``dense_index`` names."""
    ids = np.ascontiguousarray(ids, dtype=np.int64)
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or len(ids) != len(vectors):
        raise ValueError(f"segment {name}: {len(ids)} ids for vectors of shape {vectors.shape}")
    save_npy(directory / f"{name}.ids.npy", ids)
    save_npy(directory / f"{name}.vecs.npy", vectors)
    if len(ids) >= ivf_threshold and dense_index != "flat":
        index = _build_hnsw(ids, vectors) if dense_index == "hnsw" else _build_ivf(ids, vectors)
        path = directory / f"{name}.{dense_index}.faiss"
        faiss.write_index(index, str(path))
        fsync_file(path)


def segment_files(directory: Path, name: str) -> list[Path]:
    return sorted(directory.glob(f"{name}.*"))


def _build_hnsw(ids: np.ndarray, vectors: np.ndarray) -> faiss.Index:
    # A graph cannot remove entries: deleted ids stay in the segment's deleted list
    # (filtered at search) until a merge or a rebuild writes the segment again.
    hnsw = faiss.IndexHNSWFlat(vectors.shape[1], HNSW_M, faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
    index = faiss.IndexIDMap2(hnsw)
    index.add_with_ids(vectors, ids)
    return index


def _build_ivf(ids: np.ndarray, vectors: np.ndarray) -> faiss.Index:
    # nlist ~ 4·sqrt(n) is FAISS's usual guidance; training on a sample keeps
    # the build linear. The hashtable id map makes removal cheap (DESIGN §2).
    n, dim = vectors.shape
    nlist = max(64, int(4 * np.sqrt(n)))
    quantizer = faiss.IndexFlatIP(dim)
    ivf = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    rng = np.random.default_rng(0)
    sample = vectors[rng.choice(n, size=min(n, nlist * 64), replace=False)]
    ivf.train(sample)
    ivf.add_with_ids(vectors, ids)
    ivf.nprobe = IVF_NPROBE
    return ivf


@dataclass
class DenseSegment:
    """A loaded segment: its ids and a FAISS index over its vectors."""

    name: str
    ids: np.ndarray
    index: faiss.Index
    dim: int
    _sorted_ids: np.ndarray | None = field(default=None, repr=False)
    kind: str = "flat"  # flat | ivf | hnsw
    folder: Path | None = None  # where its vectors are, for exact scores (approximate kinds)
    _order: np.ndarray | None = field(default=None, repr=False)

    @property
    def approximate(self) -> bool:
        return self.kind != "flat"

    def exact_search(
        self, query: np.ndarray, top_n: int, allowed: np.ndarray
    ) -> list[tuple[int, float]]:
        """Top-n of the ``allowed`` ids it holds, by exact inner product (its stored vectors)."""
        if self._sorted_ids is None:
            self._sorted_ids = np.sort(self.ids)
        if self._order is None:
            self._order = np.argsort(self.ids, kind="stable")
        want = allowed[self.holds(allowed)]
        if not len(want) or self.folder is None:
            return []
        rows = np.sort(self._order[np.searchsorted(self._sorted_ids, want)])
        vectors = np.load(self.folder / f"{self.name}.vecs.npy", mmap_mode="r")
        scores = np.asarray(vectors[rows]) @ query.astype(np.float32, copy=False)
        ids = self.ids[rows]
        top = np.argsort(-scores, kind="stable")[:top_n]
        return [(int(ids[i]), float(scores[i])) for i in top]

    def holds(self, ids: np.ndarray) -> np.ndarray:
        """Mask of ``ids`` that are in this segment (a binary search, not a scan)."""
        if self._sorted_ids is None:
            self._sorted_ids = np.sort(self.ids)
        hay = self._sorted_ids
        if not len(hay):
            return np.zeros(len(ids), dtype=bool)
        pos = np.minimum(np.searchsorted(hay, ids), len(hay) - 1)
        return np.asarray(hay[pos] == ids)

    @classmethod
    def load(cls, directory: Path, name: str) -> DenseSegment:
        ids = np.load(directory / f"{name}.ids.npy")
        ivf_path = directory / f"{name}.ivf.faiss"
        hnsw_path = directory / f"{name}.hnsw.faiss"
        if ivf_path.exists():
            index = faiss.read_index(str(ivf_path))
            faiss.extract_index_ivf(index).nprobe = IVF_NPROBE
            return cls(name, ids, index, index.d, kind="ivf", folder=directory)
        if hnsw_path.exists():
            index = faiss.read_index(str(hnsw_path))
            return cls(name, ids, index, index.d, kind="hnsw", folder=directory)
        else:
            vectors = np.load(directory / f"{name}.vecs.npy")
            dim = int(vectors.shape[1]) if vectors.size else 0
            index = faiss.IndexIDMap2(faiss.IndexFlatIP(max(dim, 1)))
            if len(ids):
                index.add_with_ids(vectors, ids)
        return cls(name=name, ids=ids, index=index, dim=dim)

    def vectors(self, directory: Path) -> np.ndarray:
        return np.load(directory / f"{self.name}.vecs.npy", mmap_mode="r")

    def search(
        self, query: np.ndarray, top_n: int, *, selector: faiss.IDSelector | None = None
    ) -> list[tuple[int, float]]:
        if not len(self.ids) or top_n <= 0:
            return []
        k = min(top_n, len(self.ids))
        params = None
        if self.kind == "hnsw":
            params = faiss.SearchParametersHNSW(sel=selector, efSearch=max(HNSW_EF_SEARCH, k))  # type: ignore[attr-defined]
        elif selector is not None:
            params = (
                faiss.SearchParametersIVF(sel=selector, nprobe=IVF_NPROBE)  # type: ignore[call-arg]
                if isinstance(self.index, faiss.IndexIVF)
                else faiss.SearchParameters(sel=selector)  # type: ignore[call-arg]
            )
        scores, labels = self.index.search(
            query.reshape(1, -1).astype(np.float32), k, params=params
        )
        return [(int(i), float(s)) for i, s in zip(labels[0], scores[0], strict=True) if i >= 0]


def scores_for_ids(
    segments: Sequence[DenseSegment], query: np.ndarray, ids: np.ndarray, *, deleted: np.ndarray
) -> tuple[list[tuple[int, float]], np.ndarray]:
    """Exact inner products of the given ids, read from flat segments.

    Returns ``(id, score)`` pairs and the ids no flat segment holds (not indexed,
    deleted, or in an IVF segment, which keeps no id -> vector map).
    """
    want = np.setdiff1d(np.asarray(ids, dtype=np.int64), deleted)
    out: list[tuple[int, float]] = []
    q = query.astype(np.float32, copy=False)
    for segment in segments:
        if not len(want):
            break
        if not isinstance(segment.index, faiss.IndexIDMap2) or not len(segment.ids):
            continue
        held = want[segment.holds(want)]
        if len(held):
            vectors = segment.index.reconstruct_batch(held)
            out.extend(zip(held.tolist(), (vectors @ q).tolist(), strict=True))
            want = np.setdiff1d(want, held)
    return out, want


def allowed_live(allowed: np.ndarray | None, deleted: np.ndarray) -> np.ndarray | None:
    """The allowed ids that are not deleted (None: no restriction)."""
    if allowed is None:
        return None
    return np.setdiff1d(allowed, deleted) if len(deleted) else np.asarray(allowed)


def make_selector(keep: np.ndarray | None, deleted: np.ndarray) -> faiss.IDSelector | None:
    """A FAISS id selector for ``keep`` (allowed and not deleted, see ``allowed_live``),
    or for 'not deleted' when nothing restricts (None when everything passes)."""
    if keep is not None:
        return faiss.IDSelectorBatch(np.ascontiguousarray(keep, dtype=np.int64))
    if len(deleted):
        return faiss.IDSelectorNot(
            faiss.IDSelectorBatch(np.ascontiguousarray(deleted, dtype=np.int64))
        )
    return None


def search_segments(
    segments: Sequence[DenseSegment],
    query: np.ndarray,
    top_n: int,
    *,
    deleted: np.ndarray,
    allowed: np.ndarray | None = None,
) -> list[tuple[int, float]]:
    """Top-n (id, inner product) over all segments, deleted ids excluded, filters first."""
    if allowed is not None and not len(allowed):
        return []
    keep = allowed_live(allowed, deleted)
    selector = make_selector(keep, deleted)
    merged: list[tuple[int, float]] = []
    for segment in segments:
        small = keep is not None and len(keep) <= max(
            EXACT_FILTER_MAX, EXACT_FILTER_SHARE * len(segment.ids)
        )
        if segment.approximate and small:
            assert keep is not None
            merged.extend(segment.exact_search(query, top_n, keep))
        else:
            merged.extend(segment.search(query, top_n, selector=selector))
    merged.sort(key=lambda pair: (-pair[1], pair[0]))
    return merged[:top_n]


@dataclass
class SegmentedDense:
    """The published dense side: immutable segments minus the ids deleted since."""

    segments: Sequence[DenseSegment]
    deleted: np.ndarray

    def search(
        self, query: np.ndarray, top_n: int, *, allowed: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        return search_segments(self.segments, query, top_n, deleted=self.deleted, allowed=allowed)

    def scores_for(
        self, query: np.ndarray, ids: np.ndarray
    ) -> tuple[list[tuple[int, float]], np.ndarray]:
        return scores_for_ids(self.segments, query, ids, deleted=self.deleted)

    def member_ids(self) -> np.ndarray:
        if not self.segments:
            return np.zeros(0, dtype=np.int64)
        return np.setdiff1d(np.concatenate([s.ids for s in self.segments]), self.deleted)


@dataclass
class SegmentWriter:
    """The dense side of a new index version (a ``DenseWriter``): the parent's segments,
    already linked into ``folder``, plus new segments, deletions and tiered merges.

    Segments are immutable once written; a delete only lists the id (``deleted``), and
    a merge rewrites the small segments (or all of them, when deletes pile up) without
    their deleted entries.
    """

    folder: Path
    version: int
    ivf_threshold: int = DEFAULT_IVF_THRESHOLD
    dense_index: str = DEFAULT_DENSE_INDEX
    segments: list[SegmentInfo] = field(default_factory=list)
    seg_ids: dict[str, np.ndarray] = field(default_factory=dict)
    deleted: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def held(self) -> np.ndarray:
        """Every id in a segment (deleted ones included)."""
        parts = list(self.seg_ids.values())
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def delete(self, ids: np.ndarray) -> None:
        self.deleted = np.union1d(self.deleted, ids)

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """One new segment of ``ids`` (sorted, none held yet) and their vectors."""
        if len(ids):
            self._write(f"seg{self.version:06d}", ids, vectors)

    def _write(self, name: str, ids: np.ndarray, vectors: np.ndarray) -> None:
        write_segment(
            self.folder,
            name,
            ids,
            vectors,
            ivf_threshold=self.ivf_threshold,
            dense_index=self.dense_index,
        )
        self.segments.append(SegmentInfo(name, len(ids)))
        self.seg_ids[name] = ids

    @property
    def live(self) -> int:
        return sum(s.count for s in self.segments) - len(self.deleted)

    def finish(self) -> tuple[list[SegmentInfo], np.ndarray]:
        """Merge where due; the version's segments and deleted ids."""
        total = sum(s.count for s in self.segments)
        if total and len(self.deleted) / total > MAX_DELETED_FRACTION:
            victims = list(self.segments)
        elif len(self.segments) > MAX_SEGMENTS:
            largest = max(self.segments, key=lambda s: s.count)
            victims = [s for s in self.segments if s is not largest]
        else:
            return self.segments, self.deleted
        ids_parts, vec_parts = [], []
        for seg in victims:
            ids = self.seg_ids[seg.name]
            keep = ~np.isin(ids, self.deleted)
            vecs = np.load(self.folder / f"{seg.name}.vecs.npy", mmap_mode="r")
            ids_parts.append(ids[keep])
            vec_parts.append(np.asarray(vecs[keep]))
            for f in self.folder.glob(f"{seg.name}.*"):
                f.unlink()
        merged_ids = np.concatenate(ids_parts)
        merged_vecs = np.concatenate(vec_parts) if merged_ids.size else np.zeros((0, 0), np.float32)
        merged_away = np.concatenate([self.seg_ids.pop(s.name) for s in victims])
        self.deleted = np.setdiff1d(self.deleted, merged_away)
        self.segments = [s for s in self.segments if s not in victims]
        if len(merged_ids):
            self._write(f"mrg{self.version:06d}", merged_ids, merged_vecs)
        log.info("merged %d segments into one of %d vectors", len(victims), len(merged_ids))
        return self.segments, self.deleted
