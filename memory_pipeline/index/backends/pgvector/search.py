"""The pgvector backend's reads: dense (HNSW, or exact over allowed rows), BM25 in SQL
(exact, MaxScore for common terms), and the view a search holds."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from memory_pipeline.index import bm25
from memory_pipeline.index.backends.pgvector.schema import TABLES, as_ids, reading, vector_text
from memory_pipeline.index.versions import Manifest

Ranked = list[tuple[int, float]]
# term -> (idf * (k1 + 1), df) of a query's terms, and the average document length
Stats = tuple[dict[str, tuple[float, int]], float]

# hnsw.ef_search cannot exceed this (pgvector); a longer list is an exact scan.
MAX_EF_SEARCH = 1000
# BM25 of one posting (tf, qlen) for a term of weight w = idf * (k1 + 1) (index/bm25.py).
# Every factor float8: a bare 0.75 is numeric in SQL, and numeric arithmetic on each of
# a common term's postings cost more than the rest of its scoring.
_TERM_SCORE = (
    f"w.w * p.tf / (p.tf + CAST({bm25.K1} AS float8) * (CAST({1 - bm25.B} AS float8) "
    f"+ CAST({bm25.B} AS float8) * p.qlen / CAST(:avgdl AS float8)))"
)
# A term in more than 1/COMMON_SHARE of the documents is scored last (MaxScore).
COMMON_SHARE = 50
# Candidates within this share of a floor are kept: partial sums are rounded.
_SLACK = 1e-9


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
        with reading(self.engine) as c:
            if allowed is None and top_n <= MAX_EF_SEARCH:
                ef = min(MAX_EF_SEARCH, max(self.ef_search, top_n))
                c.execute(sa.text(f"SET LOCAL hnsw.ef_search = {ef}"))
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
        """Top-n BM25, exact (MaxScore). The rare terms' top n, scored on every term,
        sets a floor; the common terms (in more than 1/COMMON_SHARE of the documents:
        long posting lists, small weights) whose weights together stay below it cannot
        lift a document that none of the others scores, so they are scored only for the
        documents that can still reach the floor. When nothing can be proven, every
        posting is scored."""
        terms = bm25.distinct_terms(query_tokens)
        if not terms or top_n <= 0 or (allowed_ids is not None and not allowed_ids):
            return []
        with reading(self.engine) as c:
            stats = self._stats(c, terms)
            if stats is None:
                return []
            weights, avgdl = stats
            ids = as_ids(allowed_ids)
            every = {t: w for t, (w, _) in weights.items()}
            n_docs = self._num_docs or 1
            common = sorted(
                (t for t, (_, df) in weights.items() if df * COMMON_SHARE > n_docs),
                key=lambda t: weights[t][0],
            )
            rare = {t: w for t, w in every.items() if t not in common}
            if not common or not rare:
                return self._sum(c, every, avgdl, ids=ids, top_n=top_n)
            first = self._first(c, rare, {t: every[t] for t in common}, avgdl, ids, top_n)
            if len(first) < top_n:
                return self._sum(c, every, avgdl, ids=ids, top_n=top_n)
            floor = min(first)  # n documents score this or more: so does the final n-th
            skipped: list[str] = []  # the lightest common terms, while they stay below it
            bound = 0.0
            for t in common:
                if bound + every[t] >= floor:
                    break
                skipped.append(t)
                bound += every[t]
            if not skipped:
                return self._sum(c, every, avgdl, ids=ids, top_n=top_n)
            scored = {t: w for t, w in every.items() if t not in skipped}
            late = {t: every[t] for t in skipped}
            return self._pruned(c, scored, late, avgdl, ids, floor - bound, top_n)

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
            pcond, params = space_cond("space", self.spaces)
            rows = c.execute(
                sa.text(
                    "SELECT chunk_id, term, tf, qlen FROM pgv_postings "
                    f"WHERE chunk_id = ANY(:ids) AND term = ANY(:terms) AND {pcond}"
                ),
                {"ids": as_ids(ids), "terms": list(weights), **params},
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

    def _sum(
        self,
        c: sa.Connection,
        weights: dict[str, float],
        avgdl: float,
        *,
        ids: list[int] | None = None,
        top_n: int | None = None,
    ) -> Ranked:
        """BM25 over ``weights``' terms, of every document (or of ``ids``)."""
        pcond, params = space_cond("p.space", self.spaces)
        only = "AND p.chunk_id = ANY(:ids)" if ids is not None else ""
        limit = "ORDER BY s DESC, p.chunk_id LIMIT :n" if top_n is not None else ""
        sql = f"""
            SELECT p.chunk_id, sum({_TERM_SCORE}) AS s
              FROM unnest(CAST(:terms AS text[]), CAST(:w AS float8[])) AS w(term, w)
              JOIN pgv_postings p ON p.term = w.term
             WHERE {pcond} {only}
             GROUP BY p.chunk_id {limit}"""
        args: dict[str, Any] = {
            "terms": list(weights),
            "w": list(weights.values()),
            "avgdl": avgdl,
            **params,
        }
        if top_n is not None:
            args["n"] = top_n
        return _scored(c, sql, args, ids)

    def _first(
        self,
        c: sa.Connection,
        rare: dict[str, float],
        common: dict[str, float],
        avgdl: float,
        ids: list[int] | None,
        top_n: int,
    ) -> list[float]:
        """The full scores of the top n on the rare terms: their common terms' postings
        are read by key, a few probes each. Far higher than the rare terms' n-th score
        alone, this floor lets every common term wait in most queries."""
        pcond, params = space_cond("p.space", self.spaces)
        only = "AND p.chunk_id = ANY(:ids)" if ids is not None else ""
        sql = f"""
            WITH r AS (
              SELECT p.chunk_id, sum({_TERM_SCORE}) AS s
                FROM unnest(CAST(:terms AS text[]), CAST(:w AS float8[])) AS w(term, w)
                JOIN pgv_postings p ON p.term = w.term
               WHERE {pcond} {only}
               GROUP BY p.chunk_id ORDER BY s DESC, p.chunk_id LIMIT :n)
            SELECT r.chunk_id, r.s + coalesce((
              SELECT sum({_TERM_SCORE})
                FROM unnest(CAST(:cterms AS text[]), CAST(:cw AS float8[])) AS w(term, w)
                JOIN pgv_postings p ON p.chunk_id = r.chunk_id AND p.term = w.term), 0)
              FROM r"""
        args: dict[str, Any] = {
            "terms": list(rare),
            "w": list(rare.values()),
            "cterms": list(common),
            "cw": list(common.values()),
            "avgdl": avgdl,
            "n": top_n,
            **params,
        }
        return [s for _, s in _scored(c, sql, args, ids)]

    def _pruned(
        self,
        c: sa.Connection,
        scored: dict[str, float],
        late: dict[str, float],
        avgdl: float,
        ids: list[int] | None,
        floor: float,
        top_n: int,
    ) -> Ranked:
        """The top n when only documents scoring at least ``floor`` on the ``scored``
        terms can make it: that score plus what the ``late`` terms give them.

        The late terms are added one at a time, heaviest first (MaxScore's candidate
        pruning): after each, the n-th best partial score among the candidates is a
        floor too (a final score only grows, and the candidates are some of the
        documents), and a candidate whose partial score plus the late terms still to
        come stays below it is dropped before the next term is probed for it."""
        pcond, params = space_cond("p.space", self.spaces)
        only = "AND p.chunk_id = ANY(:ids)" if ids is not None else ""
        order = sorted(late, key=lambda t: -late[t])
        rest = [sum(late[t] for t in order[i:]) for i in range(len(order) + 1)]
        steps = [
            """c0 AS MATERIALIZED (
              SELECT chunk_id, s FROM agg
               WHERE s >= greatest(:floor, coalesce((SELECT s FROM nth), 0) - :r0) - :eps)"""
        ]
        args: dict[str, Any] = {
            "terms": list(scored),
            "w": list(scored.values()),
            "avgdl": avgdl,
            "floor": floor,
            "n": top_n,
            "r0": rest[0],
            "eps": _SLACK * (abs(floor) + rest[0]),
            **params,
        }
        for i, term in enumerate(order, 1):
            # this term's posting of each candidate: the planner probes the key for a
            # few candidates, or reads the term's list once for many
            step = f"""s{i} AS MATERIALIZED (
              SELECT c.chunk_id, c.s + coalesce(x.s, 0) AS s
                FROM c{i - 1} c LEFT JOIN (
                  SELECT p.chunk_id, {_TERM_SCORE.replace("w.w", f"CAST(:w{i} AS float8)")} AS s
                    FROM pgv_postings p WHERE p.term = :t{i}) x ON x.chunk_id = c.chunk_id)"""
            if i < len(order):
                step += f""",
            c{i} AS MATERIALIZED (
              SELECT chunk_id, s FROM s{i}
               WHERE s >= coalesce((SELECT s FROM s{i} ORDER BY s DESC OFFSET :n - 1 LIMIT 1), 0)
                          - :r{i} - :eps)"""
            steps.append(step)
            args.update({f"t{i}": term, f"w{i}": late[term], f"r{i}": rest[i]})
        sql = f"""
            WITH agg AS MATERIALIZED (
              SELECT p.chunk_id, sum({_TERM_SCORE}) AS s
                FROM unnest(CAST(:terms AS text[]), CAST(:w AS float8[])) AS w(term, w)
                JOIN pgv_postings p ON p.term = w.term
               WHERE {pcond} {only}
               GROUP BY p.chunk_id),
            -- the n-th best on these terms is a floor too, usually a higher one
            nth AS (SELECT s FROM agg ORDER BY s DESC OFFSET :n - 1 LIMIT 1),
            {", ".join(steps)}
            SELECT chunk_id, s FROM s{len(order)}
             ORDER BY s DESC, chunk_id LIMIT :n"""
        return _scored(c, sql, args, ids)

    def score_external(
        self, query_tokens: Sequence[str], docs: Sequence[tuple[int, Sequence[str]]]
    ) -> Ranked:
        return bm25.score_external(query_tokens, docs, self._index_stats)

    def _index_stats(self, terms: list[str]) -> bm25.IndexStats:
        with reading(self.engine) as c:
            n, t, df = self._collection(c, terms)
        return bm25.IndexStats(n, float(t), lambda term: df.get(term, 0))


def _scored(c: sa.Connection, sql: str, args: dict[str, Any], ids: list[int] | None) -> Ranked:
    """A BM25 query's (chunk id, score) rows, best first; ``ids`` restrict it when given."""
    if ids is not None:
        args["ids"] = ids
    out = [(int(i), float(s)) for i, s in c.execute(sa.text(sql), args)]
    out.sort(key=lambda p: (-p[1], p[0]))
    return out


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
