"""The pgvector backend: vectors and BM25 inside the memory's own PostgreSQL.

Everything lives in the database that holds the chunks, and is written by **the same
transaction** as the chunks (``Store.index_hook``): a committed ingest is searchable by
every process at once, a committed delete is never returned, and there is no
publication step to crash in. Nothing is queued; ``update`` has nothing to do once the
index exists, and ``rebuild`` (a model change, a move from another backend) builds a
fresh set of tables from the stored vectors and swaps them in with one commit.

Tables (``pgv_``), all cascading from ``chunks``:

* ``pgv_vectors (chunk_id, embedding vector(dim))`` with an HNSW index over inner
  product (``vector_ip_ops``);
* ``pgv_docs (chunk_id, space, n_tokens)`` and ``pgv_postings (chunk_id, term, space,
  tf, qlen)``: the project's own tokens (``index/tokenizer.py``), so Japanese works as
  it does locally; ``qlen`` is the document length as tantivy stores it, so a score
  here equals the local backend's (``index/bm25.py``);
* ``pgv_stats (space, n_docs, n_tokens)`` and ``pgv_df (space, term, df)``: collection
  statistics kept exact under adds and deletes by statement triggers in the same
  transaction (one advisory lock orders every writer, so counters never deadlock);
* ``pgv_index``: the model id and dimension (one embedding space), a version number
  raised by each rebuild.

Filters are SQL conditions on the chunk ids before the cut: a restricted dense search
is an exact scan of the allowed rows (the HNSW graph would cut first and filter after).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from memory_pipeline.errors import IndexError_, ModelMismatchError
from memory_pipeline.index import bm25
from memory_pipeline.index.backends.names import DEFAULT_EF_SEARCH
from memory_pipeline.index.tokenizer import TOKENIZER_ID, tokenize
from memory_pipeline.index.versions import Manifest
from memory_pipeline.store import Store
from memory_pipeline.types import IndexUpdateResult

log = logging.getLogger(__name__)

Ranked = list[tuple[int, float]]

# Every transaction that changes pgv_ rows takes this lock first (pg_advisory_xact_lock).
LOCK_KEY = 0x6D70_7067  # "mppg"
# hnsw.ef_search cannot exceed this (pgvector); a longer list is an exact scan.
MAX_EF_SEARCH = 1000
_BATCH = 2_000
TABLES = ("pgv_postings", "pgv_docs", "pgv_vectors", "pgv_df", "pgv_stats")

# BM25 of one posting (tf, qlen) for a term of weight w = idf * (k1 + 1) (index/bm25.py).
_TERM_SCORE = f"w.w * p.tf / (p.tf + {bm25.K1} * ({1 - bm25.B} + {bm25.B} * p.qlen / :avgdl))"
# A term in more than 1/COMMON_SHARE of the documents is scored last (MaxScore).
COMMON_SHARE = 50

_LOCK = sa.text(f"SELECT pg_advisory_xact_lock({LOCK_KEY})")
_INDEX_TABLE = sa.text(
    "CREATE TABLE IF NOT EXISTS pgv_index (id integer PRIMARY KEY CHECK (id = 1), "
    "model_id text NOT NULL, dim integer NOT NULL, version bigint NOT NULL, "
    "kind text NOT NULL, tokenizer text NOT NULL, created_at timestamptz NOT NULL)"
)

_FUNCTIONS = f"""
CREATE OR REPLACE FUNCTION pgv_docs_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock({LOCK_KEY});
  INSERT INTO pgv_stats AS s (space, n_docs, n_tokens)
    SELECT space, count(*), sum(n_tokens) FROM new_rows GROUP BY space ORDER BY space
  ON CONFLICT (space) DO UPDATE
    SET n_docs = s.n_docs + EXCLUDED.n_docs, n_tokens = s.n_tokens + EXCLUDED.n_tokens;
  RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION pgv_docs_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock({LOCK_KEY});
  UPDATE pgv_stats s SET n_docs = s.n_docs - o.n, n_tokens = s.n_tokens - o.t
    FROM (SELECT space, count(*) AS n, sum(n_tokens) AS t FROM old_rows GROUP BY space) o
   WHERE s.space = o.space;
  RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION pgv_postings_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock({LOCK_KEY});
  INSERT INTO pgv_df AS d (space, term, df)
    SELECT space, term, count(*) FROM new_rows GROUP BY space, term ORDER BY space, term
  ON CONFLICT (space, term) DO UPDATE SET df = d.df + EXCLUDED.df;
  RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION pgv_postings_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock({LOCK_KEY});
  UPDATE pgv_df d SET df = d.df - o.n
    FROM (SELECT space, term, count(*) AS n FROM old_rows GROUP BY space, term) o
   WHERE d.space = o.space AND d.term = o.term;
  DELETE FROM pgv_df d USING (SELECT DISTINCT space, term FROM old_rows) o
   WHERE d.space = o.space AND d.term = o.term AND d.df <= 0;
  RETURN NULL;
END $$;
"""


def _tables(suffix: str, dim: int) -> list[str]:
    """DDL of one set of tables (``suffix`` '' is the live set; a rebuild fills another)."""
    t = {name: f"{name}{suffix}" for name in TABLES}
    return [
        f"""CREATE TABLE {t["pgv_vectors"]} (
              chunk_id bigint PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
              embedding vector({dim}) NOT NULL)""",
        f"""CREATE TABLE {t["pgv_docs"]} (
              chunk_id bigint PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
              space text NOT NULL, n_tokens integer NOT NULL)""",
        f"""CREATE TABLE {t["pgv_postings"]} (
              chunk_id bigint NOT NULL REFERENCES {t["pgv_docs"]}(chunk_id) ON DELETE CASCADE,
              term text NOT NULL, space text NOT NULL, tf integer NOT NULL,
              qlen integer NOT NULL, PRIMARY KEY (chunk_id, term) INCLUDE (tf, qlen))""",
        f"""CREATE TABLE {t["pgv_stats"]} (
              space text PRIMARY KEY, n_docs bigint NOT NULL, n_tokens bigint NOT NULL)""",
        f"""CREATE TABLE {t["pgv_df"]} (
              space text NOT NULL, term text NOT NULL, df bigint NOT NULL,
              PRIMARY KEY (term, space))""",
    ]


def _indexes(suffix: str, tag: str) -> list[str]:
    return [
        f"CREATE INDEX pgv_postings_term_{tag} ON pgv_postings{suffix} (term) "
        "INCLUDE (chunk_id, space, tf, qlen)",
        f"CREATE INDEX pgv_vectors_hnsw_{tag} ON pgv_vectors{suffix} "
        "USING hnsw (embedding vector_ip_ops)",
    ]


def _triggers(suffix: str) -> list[str]:
    out = []
    for table, event, name in (
        ("pgv_docs", "INSERT", "added"),
        ("pgv_docs", "DELETE", "removed"),
        ("pgv_postings", "INSERT", "added"),
        ("pgv_postings", "DELETE", "removed"),
    ):
        ref = "NEW TABLE AS new_rows" if event == "INSERT" else "OLD TABLE AS old_rows"
        out.append(
            f"CREATE TRIGGER {table}_{name} AFTER {event} ON {table}{suffix} "
            f"REFERENCING {ref} FOR EACH STATEMENT EXECUTE FUNCTION {table}_{name}()"
        )
    return out


def vector_text(v: np.ndarray) -> str:
    """pgvector's text form of one vector."""
    return "[" + ",".join(map(repr, v.astype(np.float32).tolist())) + "]"


@dataclass(frozen=True)
class _State:
    model_id: str
    dim: int
    version: int
    kind: str
    created_at: dt.datetime


def _state(c: sa.Connection) -> _State | None:
    if c.execute(sa.text("SELECT to_regclass('pgv_index')")).scalar() is None:
        return None
    row = c.execute(
        sa.text("SELECT model_id, dim, version, kind, created_at FROM pgv_index WHERE id = 1")
    ).first()
    return _State(*row) if row else None


def _space_cond(column: str, spaces: Collection[str] | None) -> tuple[str, dict[str, Any]]:
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
        with self.engine.connect() as c:
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
                    {"q": q, "n": top_n, "ids": _ids(allowed)},
                )
            out = [(int(i), -float(d)) for i, d in rows]
        out.sort(key=lambda p: (-p[1], p[0]))
        return out

    def scores_for(self, query: np.ndarray, ids: np.ndarray) -> tuple[Ranked, np.ndarray]:
        if not len(ids):
            return [], np.zeros(0, dtype=np.int64)
        with self.engine.connect() as c:
            rows = c.execute(
                sa.text(
                    "SELECT chunk_id, embedding <#> CAST(:q AS vector) FROM pgv_vectors "
                    "WHERE chunk_id = ANY(:ids)"
                ),
                {"q": vector_text(query), "ids": _ids(ids)},
            ).all()
        found = [(int(i), -float(d)) for i, d in rows]
        held = np.asarray([i for i, _ in found], dtype=np.int64)
        return found, np.setdiff1d(np.asarray(ids, dtype=np.int64), held)

    def member_ids(self) -> np.ndarray:
        with self.engine.connect() as c:
            ids = c.execute(sa.text("SELECT chunk_id FROM pgv_vectors ORDER BY 1")).scalars()
            return np.asarray(list(ids), dtype=np.int64)


class PgSparse:
    """The BM25 side over the postings of the spaces it reads (None: every space)."""

    def __init__(self, engine: Engine, spaces: Collection[str] | None, num_docs: int) -> None:
        self.engine = engine
        self.spaces = None if spaces is None else frozenset(spaces)
        self._num_docs = num_docs

    @property
    def num_docs(self) -> int:
        return self._num_docs

    def ids(self) -> np.ndarray:
        cond, params = _space_cond("space", self.spaces)
        with self.engine.connect() as c:
            ids = c.execute(
                sa.text(f"SELECT chunk_id FROM pgv_docs WHERE {cond} ORDER BY 1"), params
            ).scalars()
            return np.asarray(list(ids), dtype=np.int64)

    def search(
        self, query_tokens: Sequence[str], top_n: int, *, allowed_ids: Collection[int] | None = None
    ) -> Ranked:
        """Top-n BM25, exact (MaxScore). The rare terms' top n sets a floor; the common
        terms (in more than 1/COMMON_SHARE of the documents: long posting lists, small
        weights) whose weights together stay below it cannot lift a document that none
        of the others scores, so they are scored only for the documents that can still
        reach the floor. When nothing can be proven, every posting is scored."""
        terms = list(dict.fromkeys(t for t in query_tokens if t))
        if not terms or top_n <= 0 or (allowed_ids is not None and not allowed_ids):
            return []
        with self.engine.connect() as c:
            stats = self._stats(c, terms)
            if stats is None:
                return []
            weights, avgdl = stats
            ids = _ids(allowed_ids)
            every = {t: w for t, (w, _) in weights.items()}
            n_docs = self._num_docs or 1
            common = sorted(
                (t for t, (_, df) in weights.items() if df * COMMON_SHARE > n_docs),
                key=lambda t: weights[t][0],
            )
            rare = {t: w for t, w in every.items() if t not in common}
            if not common or not rare:
                return self._sum(c, every, avgdl, ids=ids, top_n=top_n)
            first = self._sum(c, rare, avgdl, ids=ids, top_n=top_n)
            if len(first) < top_n:
                return self._sum(c, every, avgdl, ids=ids, top_n=top_n)
            floor = first[-1][1]  # the final n-th score is at least this
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
        terms = list(dict.fromkeys(t for t in query_tokens if t))
        if not terms or not len(ids):
            return []
        with self.engine.connect() as c:
            stats = self._stats(c, terms)
            if stats is None:
                return []
            weights, avgdl = stats
            pcond, params = _space_cond("space", self.spaces)
            rows = c.execute(
                sa.text(
                    "SELECT chunk_id, term, tf, qlen FROM pgv_postings "
                    f"WHERE chunk_id = ANY(:ids) AND term = ANY(:terms) AND {pcond}"
                ),
                {"ids": _ids(ids), "terms": list(weights), **params},
            )
            out: dict[int, float] = {}
            for cid, term, tf, qlen in rows:
                norm = bm25.K1 * (1.0 - bm25.B + bm25.B * qlen / avgdl)
                out[int(cid)] = out.get(int(cid), 0.0) + weights[term][0] * tf / (tf + norm)
        return sorted(out.items(), key=lambda p: (-p[1], p[0]))

    def _stats(
        self, c: sa.Connection, terms: list[str]
    ) -> tuple[dict[str, tuple[float, int]], float] | None:
        """term -> (idf * (k1 + 1), df) of the query's terms present, and the average
        document length, over the spaces read."""
        cond, params = _space_cond("space", self.spaces)
        n, t = c.execute(
            sa.text(
                "SELECT coalesce(sum(n_docs), 0), coalesce(sum(n_tokens), 0) FROM pgv_stats "
                f"WHERE {cond}"
            ),
            params,
        ).one()
        if not n:
            return None
        rows = c.execute(
            sa.text(
                f"SELECT term, sum(df) FROM pgv_df WHERE term = ANY(:terms) AND {cond} GROUP BY term"
            ),
            {"terms": terms, **params},
        ).all()
        weights = {
            str(term): (bm25.idf(int(n), int(df)) * (1.0 + bm25.K1), int(df))
            for term, df in rows
            if df
        }
        return (weights, float(t) / float(n)) if weights else None

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
        pcond, params = _space_cond("p.space", self.spaces)
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
        if ids is not None:
            args["ids"] = ids
        if top_n is not None:
            args["n"] = top_n
        out = [(int(i), float(s)) for i, s in c.execute(sa.text(sql), args)]
        out.sort(key=lambda p: (-p[1], p[0]))
        return out

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
        terms can make it: that score plus what the ``late`` terms give them."""
        pcond, params = _space_cond("p.space", self.spaces)
        only = "AND p.chunk_id = ANY(:ids)" if ids is not None else ""
        sql = f"""
            WITH agg AS MATERIALIZED (
              SELECT p.chunk_id, sum({_TERM_SCORE}) AS s
                FROM unnest(CAST(:terms AS text[]), CAST(:w AS float8[])) AS w(term, w)
                JOIN pgv_postings p ON p.term = w.term
               WHERE {pcond} {only}
               GROUP BY p.chunk_id),
            -- the n-th best on these terms is a floor too, usually a higher one
            nth AS (SELECT s FROM agg ORDER BY s DESC OFFSET :n - 1 LIMIT 1),
            cand AS (
              SELECT chunk_id, s FROM agg
               WHERE s >= greatest(:floor, coalesce((SELECT s FROM nth), 0) - :bound)),
            -- each candidate's postings of the late terms: index-only probes of the key
            scored AS (
              SELECT cand.chunk_id, cand.s + coalesce((
                SELECT sum({_TERM_SCORE})
                  FROM unnest(CAST(:lterms AS text[]), CAST(:lw AS float8[])) AS w(term, w)
                  JOIN pgv_postings p ON p.chunk_id = cand.chunk_id AND p.term = w.term), 0) AS s
                FROM cand)
            SELECT chunk_id, s FROM scored
             ORDER BY s DESC, chunk_id LIMIT :n"""
        args: dict[str, Any] = {
            "terms": list(scored),
            "w": list(scored.values()),
            "lterms": list(late),
            "lw": list(late.values()),
            "avgdl": avgdl,
            "floor": floor,
            "bound": sum(late.values()),
            "n": top_n,
            **params,
        }
        if ids is not None:
            args["ids"] = ids
        out = [(int(i), float(s)) for i, s in c.execute(sa.text(sql), args)]
        out.sort(key=lambda p: (-p[1], p[0]))
        return out

    def score_external(
        self, query_tokens: Sequence[str], docs: Sequence[tuple[int, Sequence[str]]]
    ) -> Ranked:
        terms = list(dict.fromkeys(t for t in query_tokens if t))
        if not terms or not docs:
            return []
        cond, params = _space_cond("space", self.spaces)
        with self.engine.connect() as c:
            n, t = c.execute(
                sa.text(
                    "SELECT coalesce(sum(n_docs), 0), coalesce(sum(n_tokens), 0) FROM pgv_stats "
                    f"WHERE {cond}"
                ),
                params,
            ).one()
            df: dict[str, int] = dict(
                c.execute(
                    sa.text(
                        "SELECT term, sum(df) FROM pgv_df WHERE term = ANY(:terms) AND "
                        f"{cond} GROUP BY term"
                    ),
                    {"terms": terms, **params},
                ).all()
            )
        return bm25.score_documents(
            terms,
            docs,
            n_index=int(n),
            tokens_index=float(t),
            doc_freq_index=lambda term: int(df.get(term, 0)),
        )


@dataclass
class PgView:
    """The live index as one search sees it."""

    manifest: Manifest
    engine: Engine
    ef_search: int
    by_space: dict[str, int]  # chunks indexed per space
    spaces: frozenset[str] | None = None

    @property
    def dense(self) -> PgDense:
        return PgDense(self.engine, self.ef_search)

    @property
    def sparse(self) -> PgSparse:
        n = sum(c for s, c in self.by_space.items() if self.spaces is None or s in self.spaces)
        return PgSparse(self.engine, self.spaces, n)

    def for_spaces(self, read: Collection[str] | None) -> PgView:
        if read is None or set(self.by_space) <= set(read):
            return replace(self, spaces=None)  # every space it holds: no condition
        return replace(self, spaces=frozenset(read))

    def member_ids(self) -> np.ndarray:
        return self.dense.member_ids()

    def stored_sparse_ids(self) -> np.ndarray:
        return PgSparse(self.engine, None, 0).ids()

    def size_bytes(self) -> int:
        with self.engine.connect() as c:
            return int(
                c.execute(
                    sa.text(
                        "SELECT coalesce(sum(pg_total_relation_size(to_regclass(t))), 0) "
                        "FROM unnest(CAST(:t AS text[])) AS t"
                    ),
                    {"t": list(TABLES)},
                ).scalar_one()
            )


class PgVectorIndex:
    """The backend: the store's in-transaction hook, the source of views, the updater."""

    name = "pgvector"

    def __init__(self, store: Store, model_id: str, *, ef_search: int = DEFAULT_EF_SEARCH) -> None:
        if store.backend != "postgresql":
            raise IndexError_(
                "the pgvector backend keeps the index in the memory's PostgreSQL database, but "
                f"the store is {store.backend}; set HYBRID_RAG_DATABASE_URL to a PostgreSQL "
                "server with the vector extension, or HYBRID_RAG_INDEX_BACKEND=local"
            )
        self.store = store
        self.engine = store.engine
        self.model_id = model_id
        self.ef_search = ef_search
        self._check_extension()
        store.index_hook = self

    def _check_extension(self) -> None:
        url = self.engine.url.render_as_string(hide_password=True)
        try:
            with self.engine.begin() as c:
                c.execute(_LOCK)
                c.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
                c.execute(sa.text(_FUNCTIONS))
        except sa.exc.DBAPIError as exc:
            raise IndexError_(
                f"the PostgreSQL at {url} cannot serve the pgvector backend: "
                f"{str(exc.orig).strip().splitlines()[0]}; install pgvector on that server "
                "(CREATE EXTENSION vector), or use HYBRID_RAG_INDEX_BACKEND=local"
            ) from exc

    # ------------------------------------------------------------- the hook
    def added(self, conn: sa.Connection, ids: Sequence[int]) -> None:
        conn.execute(_LOCK)
        for start in range(0, len(ids), _BATCH):
            batch = [int(i) for i in ids[start : start + _BATCH]]
            rows = conn.execute(
                sa.text(
                    "SELECT c.id, c.space, c.content, e.vector FROM chunks c LEFT JOIN embeddings e"
                    " ON e.chunk_id = c.id AND e.model_id = :m WHERE c.id = ANY(:ids) ORDER BY c.id"
                ),
                {"m": self.model_id, "ids": batch},
            ).all()
            without = [int(r[0]) for r in rows if r[3] is None]
            if without:
                raise ModelMismatchError(
                    f"{len(without)} new chunks (e.g. ids {without[:5]}) have no vector of "
                    f"{self.model_id!r}, the model the pgvector index serves; embed them with it"
                )
            if not rows:
                continue
            dim = len(rows[0][3]) // 4
            self._ensure(conn, dim)
            _insert(conn, "", rows)

    def deleted(self, conn: sa.Connection, ids: Sequence[int]) -> None:
        if _state(conn) is None:
            return
        conn.execute(_LOCK)
        batch = [int(i) for i in ids]
        # One statement per table: the triggers run once, not once per cascaded row.
        for table in ("pgv_postings", "pgv_docs", "pgv_vectors"):
            conn.execute(sa.text(f"DELETE FROM {table} WHERE chunk_id = ANY(:ids)"), {"ids": batch})

    def _ensure(self, conn: sa.Connection, dim: int) -> None:
        state = _state(conn)
        if state is None:
            self._create(conn, dim, version=1, kind="create")
            return
        if (state.model_id, state.dim) != (self.model_id, dim):
            raise ModelMismatchError(
                f"the pgvector index holds vectors of {state.model_id!r} (dim {state.dim}), "
                f"these are {self.model_id!r} (dim {dim}); run rebuild-index once vectors of "
                "the new model are stored, or configure the model the index was built with"
            )

    def _create(self, conn: sa.Connection, dim: int, *, version: int, kind: str) -> None:
        conn.execute(_INDEX_TABLE)
        for ddl in _tables("", dim) + _indexes("", f"v{version}") + _triggers(""):
            conn.execute(sa.text(ddl))
        self._set_state(conn, dim, version, kind)

    def _set_state(self, conn: sa.Connection, dim: int, version: int, kind: str) -> None:
        conn.execute(
            sa.text(
                "INSERT INTO pgv_index VALUES (1, :m, :d, :v, :k, :t, now()) ON CONFLICT (id) DO "
                "UPDATE SET model_id = :m, dim = :d, version = :v, kind = :k, tokenizer = :t, "
                "created_at = now()"
            ),
            {"m": self.model_id, "d": dim, "v": version, "k": kind, "t": TOKENIZER_ID},
        )

    # ------------------------------------------------------------ the source
    def current(self) -> PgView | None:
        with self.engine.connect() as c:
            state = _state(c)
            if state is None:
                if c.execute(sa.text("SELECT EXISTS (SELECT 1 FROM chunks)")).scalar():
                    raise IndexError_(
                        "the memory holds chunks but the pgvector index was never built for "
                        "them (they were indexed by another backend); run rebuild-index once "
                        "(it fills the index from the stored vectors)"
                    )
                return None
            by_space = {
                str(space): int(n)
                for space, n in c.execute(sa.text("SELECT space, n_docs FROM pgv_stats"))
            }
        n = sum(by_space.values())
        manifest = Manifest(
            version=state.version,
            model_id=state.model_id,
            dim=state.dim,
            segments=[],
            n_dense=n,
            n_sparse=n,
            n_deleted=0,
            watermark=0,
            created_at=state.created_at.isoformat(),
            kind=state.kind,
            tokenizer=TOKENIZER_ID,
        )
        return PgView(manifest, self.engine, self.ef_search, by_space)

    # ----------------------------------------------------------- the updater
    def update(self) -> IndexUpdateResult:
        """Nothing to take in once the index exists (writes reach it as they commit);
        changes queued before this backend was chosen, or no index yet, mean a rebuild."""
        started = time.perf_counter()
        with self.engine.connect() as c:
            state = _state(c)
            queued = c.execute(sa.text("SELECT count(*) FROM index_changes")).scalar_one()
        if state is None or queued or state.model_id != self.model_id:
            if state is not None and state.model_id != self.model_id:
                raise ModelMismatchError(
                    f"the pgvector index holds vectors of {state.model_id!r}, the embedder is "
                    f"{self.model_id!r}; run rebuild-index once vectors of the new model are stored"
                )
            return self.rebuild()
        view = self.current()
        n = view.manifest.n_dense if view else 0
        return IndexUpdateResult(state.version, "noop", 0, 0, n, n, time.perf_counter() - started)

    def rebuild(self) -> IndexUpdateResult:
        """A fresh set of tables from every stored vector and text, swapped in by one
        commit; searches go on reading the old set until then."""
        started = time.perf_counter()
        with self.engine.begin() as c:
            c.execute(_LOCK)  # writers wait; they add their chunks after the swap
            c.execute(sa.text("SET LOCAL maintenance_work_mem = '512MB'"))
            state = _state(c)
            version = (state.version if state else 0) + 1
            seqs = c.execute(sa.text("SELECT seq FROM index_changes")).scalars().all()
            dims = (
                c.execute(
                    sa.text("SELECT DISTINCT dim FROM embeddings WHERE model_id = :m"),
                    {"m": self.model_id},
                )
                .scalars()
                .all()
            )
            live = int(c.execute(sa.text("SELECT count(*) FROM chunks")).scalar_one())
            with_vector = int(
                c.execute(
                    sa.text(
                        "SELECT count(*) FROM chunks c JOIN embeddings e ON e.chunk_id = c.id "
                        "AND e.model_id = :m"
                    ),
                    {"m": self.model_id},
                ).scalar_one()
            )
            if with_vector < live:
                raise ModelMismatchError(
                    f"{live - with_vector} live chunks have no vector of model {self.model_id!r}; "
                    "re-ingest them with this model or configure the model they were embedded with"
                )
            if len(dims) > 1:
                raise ModelMismatchError(
                    f"vectors of {self.model_id!r} are stored with several dimensions {dims}"
                )
            dim = int(dims[0]) if dims else (state.dim if state else 0)
            if not dim:  # nothing stored, nothing created yet
                return IndexUpdateResult(0, "noop", 0, 0, 0, 0, time.perf_counter() - started)
            suffix = f"_v{version}"  # constraint names stay unique after the rename
            for table in TABLES:
                c.execute(sa.text(f"DROP TABLE IF EXISTS {table}{suffix} CASCADE"))
            for ddl in _tables(suffix, dim):
                c.execute(sa.text(ddl))
            last = 0
            n = 0
            while True:
                rows = c.execute(
                    sa.text(
                        "SELECT c.id, c.space, c.content, e.vector FROM chunks c JOIN embeddings e"
                        " ON e.chunk_id = c.id AND e.model_id = :m WHERE c.id > :last"
                        " ORDER BY c.id LIMIT :n"
                    ),
                    {"m": self.model_id, "last": last, "n": _BATCH},
                ).all()
                if not rows:
                    break
                _insert(c, suffix, rows)
                last = int(rows[-1][0])
                n += len(rows)
            c.execute(
                sa.text(
                    f"INSERT INTO pgv_stats{suffix} SELECT space, count(*), sum(n_tokens) "
                    f"FROM pgv_docs{suffix} GROUP BY space"
                )
            )
            c.execute(
                sa.text(
                    f"INSERT INTO pgv_df{suffix} SELECT space, term, count(*) "
                    f"FROM pgv_postings{suffix} GROUP BY space, term"
                )
            )
            for ddl in _indexes(suffix, f"v{version}") + _triggers(suffix):
                c.execute(sa.text(ddl))
            for table in TABLES:
                c.execute(sa.text(f"DROP TABLE IF EXISTS {table} CASCADE"))
            for table in TABLES:
                c.execute(sa.text(f"ALTER TABLE {table}{suffix} RENAME TO {table}"))
            c.execute(_INDEX_TABLE)
            self._set_state(c, dim, version, "rebuild")
            if seqs:  # changes queued under another backend are covered by this rebuild
                c.execute(
                    sa.text("DELETE FROM index_changes WHERE seq = ANY(:s)"), {"s": list(seqs)}
                )
        self._analyze()
        self.store.record_index_version(
            version=version,
            model_id=self.model_id,
            dim=dim,
            n_dense=n,
            n_sparse=n,
            kind="rebuild",
            added=n,
            removed=0,
        )
        return IndexUpdateResult(version, "rebuild", n, 0, n, n, time.perf_counter() - started)

    def _analyze(self) -> None:
        """Fresh planner statistics and visibility map (index-only scans) after a rebuild."""
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            for table in TABLES:
                c.execute(sa.text(f"VACUUM ANALYZE {table}"))


def _insert(c: sa.Connection, suffix: str, rows: Sequence[Any]) -> None:
    """Vectors, documents and postings of (id, space, content, vector blob) rows."""
    ids = [int(r[0]) for r in rows]
    vecs = [vector_text(np.frombuffer(r[3], dtype=np.float32)) for r in rows]
    c.execute(
        sa.text(
            f"INSERT INTO pgv_vectors{suffix} (chunk_id, embedding) SELECT i, CAST(v AS vector) "
            "FROM unnest(CAST(:ids AS bigint[]), CAST(:vecs AS text[])) AS u(i, v)"
        ),
        {"ids": ids, "vecs": vecs},
    )
    spaces, lengths = [], []
    p_ids: list[int] = []
    p_terms: list[str] = []
    p_spaces: list[str] = []
    p_tfs: list[int] = []
    p_qlens: list[int] = []
    for cid, space, content, _ in rows:
        tokens = tokenize(content)
        spaces.append(str(space))
        lengths.append(len(tokens))
        qlen = bm25.quantize_length(len(tokens))
        for term, tf in Counter(tokens).items():
            p_ids.append(int(cid))
            p_terms.append(term)
            p_spaces.append(str(space))
            p_tfs.append(tf)
            p_qlens.append(qlen)
    c.execute(
        sa.text(
            f"INSERT INTO pgv_docs{suffix} (chunk_id, space, n_tokens) SELECT * FROM "
            "unnest(CAST(:ids AS bigint[]), CAST(:spaces AS text[]), CAST(:n AS integer[]))"
        ),
        {"ids": ids, "spaces": spaces, "n": lengths},
    )
    if p_ids:
        c.execute(
            sa.text(
                f"INSERT INTO pgv_postings{suffix} (chunk_id, term, space, tf, qlen) SELECT * FROM "
                "unnest(CAST(:ids AS bigint[]), CAST(:terms AS text[]), CAST(:spaces AS text[]), "
                "CAST(:tfs AS integer[]), CAST(:qlens AS integer[]))"
            ),
            {"ids": p_ids, "terms": p_terms, "spaces": p_spaces, "tfs": p_tfs, "qlens": p_qlens},
        )


def _ids(ids: Collection[int] | np.ndarray | None) -> list[int] | None:
    if ids is None:
        return None
    if isinstance(ids, np.ndarray):
        return ids.astype(np.int64, copy=False).tolist()
    return [int(i) for i in ids]
