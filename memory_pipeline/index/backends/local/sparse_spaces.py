"""The BM25 index of a version, one tantivy index per memory space.

BM25 depends on its collection (document count, document frequencies, average
length), so each space gets its own: a search bound to one space scores exactly as a
memory holding that space alone would. ``sparse/`` is the ``default`` space's
partition (so every version written before spaces reads as one); other spaces live
in ``sparse_spaces/<space>/``.

A search that reads several spaces searches each partition and merges the lists by
score; each partition's scores then use its own statistics, so the merged order is
close to, not exactly, that of one index over their union.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import Field, replace
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np

from memory_pipeline.index import bm25
from memory_pipeline.index.backends.local.sparse import SparseIndex
from memory_pipeline.index.protocols import DenseIndex
from memory_pipeline.index.protocols import SparseIndex as SparseSearch
from memory_pipeline.spaces import DEFAULT_SPACE

__all__ = [
    "DEFAULT_SPACE",
    "PartitionedSparse",
    "PartitionedView",
    "partition_dir",
    "partition_dirs",
]

DEFAULT_PARTITION = "sparse"
PARTITIONS = "sparse_spaces"

Ranked = list[tuple[int, float]]


def partition_dir(vdir: Path, space: str) -> Path:
    return vdir / DEFAULT_PARTITION if space == DEFAULT_SPACE else vdir / PARTITIONS / space


def partition_dirs(vdir: Path) -> dict[str, Path]:
    """space -> folder of every BM25 partition a version holds."""
    out: dict[str, Path] = {}
    if (vdir / DEFAULT_PARTITION).is_dir():
        out[DEFAULT_SPACE] = vdir / DEFAULT_PARTITION
    if (vdir / PARTITIONS).is_dir():
        out.update((p.name, p) for p in sorted((vdir / PARTITIONS).iterdir()) if p.is_dir())
    return out


class PartitionedSparse:
    """The ``SparseIndex`` reads over several partitions (one per space)."""

    def __init__(self, parts: dict[str, SparseIndex]) -> None:
        self.parts = parts

    @classmethod
    def open(cls, vdir: Path) -> PartitionedSparse:
        return cls({space: SparseIndex.open(path) for space, path in partition_dirs(vdir).items()})

    @classmethod
    def stored_ids(cls, vdir: Path) -> np.ndarray:
        """Every id the partitions in ``vdir`` hold as stored now, sorted."""
        parts = cls.open(vdir)
        try:
            return parts.ids()
        finally:
            parts.close()

    def view(self, read: Collection[str] | None) -> SparseIndex | PartitionedSparse:
        """The partitions of the spaces ``read`` (None: every one); a single partition
        is returned as itself, so its scores are exactly its own."""
        if read is None and len(self.parts) != 1:
            return self
        parts = self.parts if read is None else {s: p for s, p in self.parts.items() if s in read}
        if len(parts) == 1:
            return next(iter(parts.values()))
        return PartitionedSparse(parts)

    def close(self) -> None:
        for part in self.parts.values():
            part.close()

    @property
    def num_docs(self) -> int:
        return sum(p.num_docs for p in self.parts.values())

    def ids(self) -> np.ndarray:
        parts = [p.ids() for p in self.parts.values()]
        return np.sort(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)

    def search(
        self, query_tokens: Sequence[str], top_n: int, *, allowed_ids: Collection[int] | None = None
    ) -> Ranked:
        merged = [
            hit
            for part in self.parts.values()
            for hit in part.search(query_tokens, top_n, allowed_ids=allowed_ids)
        ]
        merged.sort(key=lambda x: (-x[1], x[0]))
        return merged[:top_n]

    def scores_for(self, query_tokens: Sequence[str], ids: Sequence[int]) -> Ranked:
        return [hit for part in self.parts.values() for hit in part.scores_for(query_tokens, ids)]

    def score_external(
        self, query_tokens: Sequence[str], docs: Sequence[tuple[int, Sequence[str]]]
    ) -> Ranked:
        """As ``SparseIndex.score_external``, with the partitions' statistics summed."""
        return bm25.score_external(query_tokens, docs, self._index_stats)

    def _index_stats(self, terms: Sequence[str]) -> bm25.IndexStats:
        stats = [p.collection_stats(terms) for p in self.parts.values()]
        return bm25.IndexStats(
            sum(n for n, _ in stats),
            sum(t for _, t in stats),
            lambda t: sum(p.doc_freq(t) for p in self.parts.values()),
        )


class PartitionedView:
    """What a view of a version folder whose BM25 side is its ``PartitionedSparse``
    answers the same way whatever serves the dense side (the local backend's FAISS
    segments, Chroma). For dataclasses with ``path`` (the version folder), ``partitions``
    (every space's; None: ``sparse`` alone) and ``sparse`` (the partitions it reads)."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]
    path: Path
    partitions: PartitionedSparse | None
    sparse: SparseSearch

    @property
    def dense(self) -> DenseIndex:
        raise NotImplementedError

    def for_spaces(self, read: Collection[str] | None) -> Self:
        """This view as a memory bound to ``read`` sees it (None: every space): the
        BM25 partitions of those spaces; dense search is restricted by ids instead."""
        if self.partitions is None:
            return self
        view = self.partitions.view(read)
        return self if view is self.sparse else replace(self, sparse=view)

    def member_ids(self) -> np.ndarray:
        """Ids the dense side serves, sorted."""
        return self.dense.member_ids()

    def stored_sparse_ids(self) -> np.ndarray:
        return PartitionedSparse.stored_ids(self.path)
