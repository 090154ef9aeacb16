"""What the Qdrant backend asks of a Qdrant engine, in the backend's own terms.

Two implementations: ``client.ClientEngine`` (``qdrant-client``: a server, or its
pure-Python local mode) and ``edge.EdgeEngine`` (Qdrant Edge: Qdrant's own Rust engine,
in-process). Each translates a ``Where`` into its library's filter, so the service
(``__init__``) and the searches (``search.py``) are written once.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

Ranked = list[tuple[int, float]]
DENSE, SPARSE = "dense", "bm25"
PAGE = 1_000


@dataclass(frozen=True)
class Where:
    """Points to act on: all of the conditions given (None: no condition)."""

    spaces: Collection[str] | None = None  # payload ``space`` is one of these
    ids: Collection[int] | None = None  # the point id is one of these
    term: str | None = None  # payload ``terms`` holds this token
    has_sparse: bool = False  # the point has a BM25 vector


@dataclass(frozen=True)
class PointData:
    """One chunk's point: its dense vector, BM25 weights (hashed term -> weight), payload."""

    id: int
    dense: list[float]
    sparse_indices: list[int]
    sparse_values: list[float]
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Held:
    """A point read back: its payload fields and, if asked, its dense vector."""

    id: int
    payload: dict[str, Any]
    dense: list[float] | None


class Engine(Protocol):
    """Collections of points behind an alias, and the reads and writes the backend makes."""

    # A real engine (a server, Qdrant Edge): dense search is HNSW once a segment is
    # indexed (so a filtered search asks for exact), and collection-wide idf counts
    # deleted points until they are optimised away (so searches name their idf corpus).
    # False for qdrant-client's local mode: exact, and idf over live points only.
    indexed: bool

    def target(self, alias: str) -> str | None:
        """The collection ``alias`` points to; None if there is none."""

    def exists(self, name: str) -> bool: ...

    def create(self, name: str, dim: int) -> None:
        """A collection of ``dim``-dimensional dense vectors (dot product) and BM25
        sparse vectors under Qdrant's IDF modifier."""

    def drop(self, name: str) -> None: ...

    def point_alias(self, alias: str, name: str) -> None:
        """Move ``alias`` to ``name`` in one step."""

    def metadata(self, name: str) -> dict[str, Any]: ...

    def set_metadata(self, name: str, meta: dict[str, Any]) -> None: ...

    def upsert(self, name: str, points: Sequence[PointData]) -> None:
        """Write (or replace by id) ``points``; held once this returns."""

    def delete(self, name: str, ids: Sequence[int]) -> None: ...

    def retrieve(
        self, name: str, ids: Sequence[int], *, payload: Sequence[str], dense: bool
    ) -> list[Held]: ...

    def count(self, name: str, where: Where | None = None) -> int: ...

    def scroll_ids(self, name: str, where: Where | None = None) -> np.ndarray:
        """Sorted ids of the points ``where`` selects."""

    def search_dense(
        self, name: str, vector: np.ndarray, limit: int, where: Where | None, *, exact: bool
    ) -> Ranked:
        """Best first (ties by id), with dot-product scores."""

    def search_sparse(
        self,
        name: str,
        indices: list[int],
        values: list[float],
        limit: int,
        where: Where | None,
        idf_over: Collection[str] | None,
    ) -> Ranked:
        """Best first (ties by id); idf over the points of the spaces ``idf_over``
        (None: the whole collection)."""

    def size_bytes(self) -> int | None:
        """Bytes on disk, where the engine keeps them here; None for a server."""

    def close(self) -> None: ...


def ranked(pairs: Sequence[tuple[int, float]]) -> Ranked:
    out = [(int(i), float(s)) for i, s in pairs]
    out.sort(key=lambda p: (-p[1], p[0]))
    return out
