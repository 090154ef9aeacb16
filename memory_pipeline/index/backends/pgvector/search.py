"""The pgvector backend's reads: dense (HNSW, or exact over allowed rows), BM25 (exact,
MaxScore over the postings blocks: ``postings.py``), and the view a search holds."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from memory_pipeline.index import bm25
from memory_pipeline.index.backends.pgvector import postings
from memory_pipeline.index.backends.pgvector.schema import TABLES, as_ids, reading, vector_text
from memory_pipeline.index.versions import Manifest

Ranked = list[tuple[int, float]]
# term -> (idf * (k1 + 1), df) of a query's terms, and the average document length
Stats = tuple[dict[str, tuple[float, int]], float]

# hnsw.ef_search cannot exceed this (pgvector); a longer list is an exact scan.
MAX_EF_SEARCH = 1000


def space_cond(column: str, spaces: Collection[str] | None) -> tuple[str, dict[str, Any]]:
    if spaces is None:
        return "TRUE", {}
    return f"{column} = ANY(:spaces)", {"spaces": sorted(spaces)}


class PgDense:
    """The dense side: HNSW over inner product, exact over an allowed set."""

    def __init__(self, engine: Engine, ef_search: int) -> None:
        self.engine = engine
        self.ef_search = ef_search

    def search(self, query: np.ndarray, top_n: int, *, allowed: np.ndarray | None = None) -> Ranked:
        if top_n <= 0 or (allowed is not None and not len(allowed)):
            return []
        q = vector_text(query)
        graph = allowed is None and top_n <= MAX_EF_SEARCH
        ef = min(MAX_EF_SEARCH, max(self.ef_search, top_n))
        with reading(self.engine, {"hnsw.ef_search": str(ef)} if graph else None) as c:
            if graph:
                rows = c.execute(
                    sa.text(
                        "SELECT chunk_id, embedding <#> CAST(:q AS vector) AS d FROM pgv_vectors "
                        "ORDER BY embedding <#> CAST(:q AS vector) LIMIT :n"
                    ),
                    {"q": q, "n": top_n},
                )
            else:
                # OFFSET 0 keeps the planner from the HNSW index: exact over the rows.
                where = "WHERE chunk_id = ANY(:ids)" if allowed is not None else ""
                rows = c.execute(
                    sa.text(
                        "SELECT chunk_id, d FROM (SELECT chunk_id, embedding <#> CAST(:q AS vector)"
                        f" AS d FROM pgv_vectors {where} OFFSET 0) s ORDER BY d, chunk_id LIMIT :n"
                    ),
                    {"q": q, "n": top_n, "ids": as_ids(allowed)},
                )
            out = [(int(i), -float(d)) for i, d in rows]
        out.sort(key=lambda p: (-p[1], p[0]))
        return out

    def scores_for(self, query: np.ndarray, ids: np.ndarray) -> tuple[Ranked, np.ndarray]:
        if not len(ids):
            return [], np.zeros(0, dtype=np.int64)
        with reading(self.engine) as c:
            rows = c.execute(
                sa.text(
                    "SELECT chunk_id, embedding <#> CAST(:q AS vector) FROM pgv_vectors "
                    "WHERE chunk_id = ANY(:ids)"
                ),
                {"q": vector_text(query), "ids": as_ids(ids)},
            ).all()
        found = [(int(i), -float(d)) for i, d in rows]
        held = np.asarray([i for i, _ in found], dtype=np.int64)
        return found, np.setdiff1d(np.asarray(ids, dtype=np.int64), held)

    def member_ids(self) -> np.ndarray:
        with reading(self.engine) as c:
            ids = c.execute(sa.text("SELECT chunk_id FROM pgv_vectors ORDER BY 1")).scalars()
            return np.asarray(list(ids), dtype=np.int64)


class PgSparse:
    """The BM25 side over the postings of the spaces it reads (None: every space)."""

    def __init__(
        self,
        engine: Engine,
        spaces: Collection[str] | None,
        num_docs: int,
        memo: dict[tuple[str, ...], Stats | None] | None = None,
    ) -> None:
        self.engine = engine
        self.spaces = None if spaces is None else frozenset(spaces)
        self._num_docs = num_docs
        # A view's statistics per query, read once: the search and the scores of the
        # other retriever's candidates then weigh terms alike, in one statement fewer.
        self._memo = {} if memo is None else memo

    @property
    def num_docs(self) -> int:
        return self._num_docs

    def ids(self) -> np.ndarray:
        cond, params = space_cond("space", self.spaces)
        with reading(self.engine) as c:
            ids = c.execute(
                sa.text(f"SELECT chunk_id FROM pgv_docs WHERE {cond} ORDER BY 1"), params
            ).scalars()
            return np.asarray(list(ids), dtype=np.int64)

    def search(
        self, query_tokens: Sequence[str], top_n: int, *, allowed_ids: Collection[int] | None = None
    ) -> Ranked:
        """Top-n BM25, exact: MaxScore over the postings blocks (``postings.top_n``)."""
        terms = bm25.distinct_terms(query_tokens)
        if not terms or top_n <= 0 or (allowed_ids is not None and not allowed_ids):
            return []
        allowed = None
        if allowed_ids is not None:
            allowed = np.unique(np.fromiter(allowed_ids, dtype=np.int64, count=len(allowed_ids)))
        with reading(self.engine) as c:
            stats = self._stats(c, terms)
            if stats is None:
                return []
            weights, avgdl = stats
            src = postings.Postings(c, self.spaces, allowed, avgdl, postings.gone_ids(c))
            return postings.top_n(src, weights, self._num_docs or 1, top_n)

    def scores_for(self, query_tokens: Sequence[str], ids: Sequence[int]) -> Ranked:
        """BM25 of a few given ids, from their postings (found by primary key)."""
        terms = bm25.distinct_terms(query_tokens)
        if not terms or not len(ids):
            return []
        with reading(self.engine) as c:
            stats = self._stats(c, terms)
            if stats is None:
                return []
            weights, avgdl = stats
            where = "" if self.spaces is None else " AND space = ANY(%(spaces)s)"
            rows = postings.fetch(
                c,
                "SELECT chunk_id, term, tf, qlen FROM pgv_postings WHERE "
                f"chunk_id = ANY(CAST(%(ids)s AS bigint[])) AND term = ANY(%(terms)s){where}",
                {"ids": as_ids(ids), "terms": list(weights), "spaces": sorted(self.spaces or ())},
            )
            out: dict[int, float] = {}
            for cid, term, tf, qlen in rows:
                norm = bm25.K1 * (1.0 - bm25.B + bm25.B * qlen / avgdl)
                out[int(cid)] = out.get(int(cid), 0.0) + weights[term][0] * tf / (tf + norm)
        return sorted(out.items(), key=lambda p: (-p[1], p[0]))

    def _collection(self, c: sa.Connection, terms: list[str]) -> tuple[int, int, dict[str, int]]:
        """Documents and tokens of the spaces read, and the document frequency of each of
        ``terms`` they hold."""
        cond, params = space_cond("space", self.spaces)
        rows = c.execute(
            sa.text(
                "SELECT s.n, s.t, d.term, d.df FROM (SELECT coalesce(sum(n_docs), 0) AS n, "
                f"coalesce(sum(n_tokens), 0) AS t FROM pgv_stats WHERE {cond}) s "
                f"LEFT JOIN (SELECT term, sum(df) AS df FROM pgv_df WHERE term = ANY(:terms) AND "
                f"{cond} GROUP BY term) d ON TRUE"
            ),
            {"terms": terms, **params},
        ).all()  # one statement: the counts on every row, then each term present
        n, t = rows[0][0], rows[0][1]
        return int(n), int(t), {str(r[2]): int(r[3]) for r in rows if r[2] is not None and r[3]}

    def _stats(self, c: sa.Connection, terms: list[str]) -> Stats | None:
        """term -> (idf * (k1 + 1), df) of the query's terms present, and the average
        document length, over the spaces read."""
        key = tuple(terms)
        if key not in self._memo:
            n, t, df = self._collection(c, terms)
            weights = {term: (bm25.idf(n, f) * (1.0 + bm25.K1), f) for term, f in df.items()}
            self._memo[key] = (weights, t / n) if n and df else None
        return self._memo[key]

    def score_external(
        self, query_tokens: Sequence[str], docs: Sequence[tuple[int, Sequence[str]]]
    ) -> Ranked:
        return bm25.score_external(query_tokens, docs, self._index_stats)

    def _index_stats(self, terms: list[str]) -> bm25.IndexStats:
        with reading(self.engine) as c:
            n, t, df = self._collection(c, terms)
        return bm25.IndexStats(n, float(t), lambda term: df.get(term, 0))


@dataclass
class PgView:
    """The live index as one search sees it."""

    manifest: Manifest
    engine: Engine
    ef_search: int
    by_space: dict[str, int]  # chunks indexed per space
    spaces: frozenset[str] | None = None
    # BM25 statistics read by this view's searches, per query (``PgSparse._stats``)
    _stats: dict[tuple[str, ...], Stats | None] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @property
    def dense(self) -> PgDense:
        return PgDense(self.engine, self.ef_search)

    @property
    def sparse(self) -> PgSparse:
        n = sum(c for s, c in self.by_space.items() if self.spaces is None or s in self.spaces)
        return PgSparse(self.engine, self.spaces, n, self._stats)

    def for_spaces(self, read: Collection[str] | None) -> PgView:
        if read is None or set(self.by_space) <= set(read):
            return replace(self, spaces=None)  # every space it holds: no condition
        return replace(self, spaces=frozenset(read))

    def member_ids(self) -> np.ndarray:
        return self.dense.member_ids()

    def stored_sparse_ids(self) -> np.ndarray:
        return PgSparse(self.engine, None, 0).ids()

    def size_bytes(self) -> int:
        with reading(self.engine) as c:
            return int(
                c.execute(
                    sa.text(
                        "SELECT coalesce(sum(pg_total_relation_size(to_regclass(t))), 0) "
                        "FROM unnest(CAST(:t AS text[])) AS t"
                    ),
                    {"t": list(TABLES)},
                ).scalar_one()
            )
