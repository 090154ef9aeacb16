"""The seams between the memory and an index: what the searcher and health read of one
(``DenseIndex``, ``SparseIndex``) and what the index writer writes (``DenseWriter``,
``SparseWriter``).

Today's implementations are the FAISS segments (``dense.SegmentedDense`` to read,
``dense.SegmentWriter`` to write one version) and the tantivy BM25 index
(``sparse.SparseIndex``, both sides); another backend (a database with a vector type,
a vector service) implements the same four. Scores: inner products
of unit vectors for dense, BM25 (``index/bm25.py``) for sparse; ids are chunk ids.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from memory_pipeline.index.versions import Manifest
    from memory_pipeline.types import IndexUpdateResult

Ranked = list[tuple[int, float]]


class DenseIndex(Protocol):
    def search(self, query: np.ndarray, top_n: int, *, allowed: np.ndarray | None = None) -> Ranked:
        """Top-n (id, score), best first, among ``allowed`` ids when given (filters first)."""
        ...

    def scores_for(self, query: np.ndarray, ids: np.ndarray) -> tuple[Ranked, np.ndarray]:
        """Exact scores of the given ids, and the ids it cannot score (not held)."""
        ...

    def member_ids(self) -> np.ndarray:
        """Every id it serves, sorted."""
        ...


class SparseIndex(Protocol):
    @property
    def num_docs(self) -> int: ...

    def ids(self) -> np.ndarray:
        """Every id it serves, sorted."""
        ...

    def search(
        self, query_tokens: Sequence[str], top_n: int, *, allowed_ids: Collection[int] | None = None
    ) -> Ranked:
        """Top-n (id, BM25), best first, among ``allowed_ids`` when given."""
        ...

    def scores_for(self, query_tokens: Sequence[str], ids: Sequence[int]) -> Ranked:
        """BM25 of the given ids that share a term with the query."""
        ...

    def score_external(
        self, query_tokens: Sequence[str], docs: Sequence[tuple[int, Sequence[str]]]
    ) -> Ranked:
        """BM25 of documents it does not hold, as if they had been added."""
        ...


class IndexView(Protocol):
    """What a search reads: one published version of the local index, or the live
    state of an index that lives in a database or a service."""

    @property
    def manifest(self) -> Manifest:
        """Its model id, dimension, counts and version number."""
        ...

    @property
    def dense(self) -> DenseIndex: ...

    @property
    def sparse(self) -> SparseIndex: ...

    def for_spaces(self, read: Collection[str] | None) -> IndexView:
        """This view as a memory reading ``read`` sees it (None: every space)."""
        ...

    def member_ids(self) -> np.ndarray:
        """Every id the dense side serves, sorted."""
        ...

    def stored_sparse_ids(self) -> np.ndarray:
        """Every id the BM25 side holds as stored now (not as loaded), sorted."""
        ...

    def size_bytes(self) -> int: ...


class IndexSource(Protocol):
    def current(self) -> IndexView | None:
        """What serves now; None before anything is published."""
        ...


class IndexUpdater(Protocol):
    def update(self) -> IndexUpdateResult:
        """Take in what the store queued (the cost follows the change)."""
        ...

    def rebuild(self) -> IndexUpdateResult:
        """Everything again from the stored vectors and texts; never re-embeds."""
        ...

    def drop_older(self) -> None:
        """Keep on disk no index data but the published version's (a scrub, after its
        rebuild: no earlier version's copy of a text it rewrote stays)."""
        ...


class DenseWriter(Protocol):
    """The dense side of one index version being written; nothing is visible until the
    writer publishes the version."""

    def held(self) -> np.ndarray:
        """Every id it holds, deleted ones included."""
        ...

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Vectors of ids it does not hold yet (sorted ids, one row each)."""
        ...

    def delete(self, ids: np.ndarray) -> None: ...

    def finish(self) -> tuple[Any, np.ndarray]:
        """Compact where due; (what the version's manifest records, deleted ids)."""
        ...


class SparseWriter(Protocol):
    """The BM25 side of one index version being written."""

    @property
    def num_docs(self) -> int: ...

    def add(self, items: Iterable[tuple[int, Sequence[str]]]) -> int:
        """(id, tokens) of chunks it does not hold yet; returns how many were added."""
        ...

    def delete(self, ids: Iterable[int]) -> int: ...

    def commit(self) -> None: ...

    def close(self) -> None: ...
