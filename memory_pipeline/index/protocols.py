"""The seams between search and an index: what the searcher and health need of one.

Today's implementations are the FAISS segments (``dense.SegmentedDense``) and the
tantivy BM25 index (``sparse.SparseIndex``); another backend (a database with a
vector type, a vector service) implements the same reads. Scores: inner products
of unit vectors for dense, BM25 (``index/bm25.py``) for sparse; ids are chunk ids.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol

import numpy as np

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
