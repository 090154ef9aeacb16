"""BM25's exact top n over the postings blocks (``pgv_blocks``): MaxScore, scored in numpy.

The database reads and ships a term's packed blocks (``schema.PACKED``, a few rows per
term); the sums are numpy's. Measured at 100k chunks: a query's 33k postings read
and summed in SQL (one row each, a hash aggregate) took ~25 ms, their blocks read
as bytes and summed here ~4 ms.

MaxScore (Turtle & Flood, "Query evaluation: strategies and optimizations", 1995): the
lists of the terms in at most 1/LIST_SHARE of the documents are read whole, and the n-th
best sum over them is a floor (n documents score that much, so does the final n-th);
the lightest of the commoner terms, while their weights together stay below it,
cannot lift a document none of the others holds, so they *wait*: they are added only
to the documents that can still reach the floor, heaviest first, each read whole or
probed by key for those documents, whichever reads less. A floor from the rare terms'
top n completed by key on every common term (what the SQL version did) measured 16 %
slower here: its probes cost more than the commoner lists they spared.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
import sqlalchemy as sa

from memory_pipeline.index import bm25

Ranked = list[tuple[int, float]]
# One packed posting (schema.PACKED).
RECORD = np.dtype([("id", ">i8"), ("tf", ">i4"), ("qlen", ">i4")])
# A term in more than 1/LIST_SHARE of the documents is read only if it cannot wait.
LIST_SHARE = 8
# Probing one document's posting by key costs about as much as reading this many
# postings of a block (both measured at 100k chunks): a waiting term is probed for the
# candidates when they are fewer than its postings over this.
PROBE_COST = 60
# Candidates within this share of a floor are kept: sums are rounded.
SLACK = 1e-9


def impact(w: float, tf: np.ndarray, qlen: np.ndarray, avgdl: float) -> np.ndarray:
    """BM25 of postings of a term of weight ``w`` = idf * (k1 + 1), as ``bm25.py`` has it."""
    return w * tf / (tf + bm25.K1 * (1.0 - bm25.B + bm25.B * qlen / avgdl))


@dataclass(frozen=True)
class Postings:
    """Where a search reads postings: its connection, spaces, allowed ids and statistics."""

    conn: sa.Connection
    spaces: frozenset[str] | None
    allowed: np.ndarray | None  # sorted chunk ids, or None for every chunk
    avgdl: float
    gone: np.ndarray  # deleted chunks whose postings the blocks still hold (gone_ids)

    def lists(self, weights: dict[str, float]) -> list[tuple[np.ndarray, np.ndarray]]:
        """(chunk ids, scores) of each term's postings, in the order of ``weights``."""
        if not weights:
            return []
        where = "" if self.spaces is None else " AND space = ANY(%(spaces)s)"
        rows = fetch(
            self.conn,
            f"SELECT term, postings FROM pgv_blocks WHERE term = ANY(%(terms)s){where}",
            {"terms": list(weights), "spaces": sorted(self.spaces or ())},
            binary=True,
        )
        blobs: dict[str, list[bytes]] = {t: [] for t in weights}
        for term, blob in rows:
            blobs[term].append(blob)
        out = []
        for term, w in weights.items():
            rec = np.frombuffer(b"".join(blobs[term]), dtype=RECORD)
            ids = rec["id"].astype(np.int64)
            scores = impact(
                w, rec["tf"].astype(np.float64), rec["qlen"].astype(np.float64), self.avgdl
            )
            if self.allowed is not None:
                keep = np.isin(ids, self.allowed, assume_unique=True)
                ids, scores = ids[keep], scores[keep]
            if len(self.gone):
                keep = ~np.isin(ids, self.gone)
                ids, scores = ids[keep], scores[keep]
            out.append((ids, scores))
        return out

    def probed(
        self, ids: np.ndarray, weights: dict[str, float]
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Like ``lists``, only the postings of ``ids`` (by primary key)."""
        where = "" if self.spaces is None else " AND space = ANY(%(spaces)s)"
        rows = fetch(
            self.conn,
            "SELECT term, chunk_id, tf, qlen FROM pgv_postings WHERE "
            f"chunk_id = ANY(CAST(%(ids)s AS bigint[])) AND term = ANY(%(terms)s){where}",
            {"ids": ids.tolist(), "terms": list(weights), "spaces": sorted(self.spaces or ())},
        )
        by_term: dict[str, list[tuple[int, int, int]]] = {t: [] for t in weights}
        for term, cid, tf, qlen in rows:
            by_term[term].append((cid, tf, qlen))
        out = []
        for term, w in weights.items():
            got = np.asarray(by_term[term], dtype=np.int64).reshape(-1, 3)
            tf, qlen = got[:, 1].astype(np.float64), got[:, 2].astype(np.float64)
            out.append((got[:, 0], impact(w, tf, qlen, self.avgdl)))
        return out


def gone_ids(conn: sa.Connection) -> np.ndarray:
    """The deleted chunks whose postings are still in their blocks (``schema``)."""
    [(packed,)] = fetch(
        conn, "SELECT string_agg(int8send(chunk_id), ''::bytea) FROM pgv_gone", {}, binary=True
    )
    return np.frombuffer(packed or b"", dtype=">i8").astype(np.int64)


def top_n(src: Postings, weights: dict[str, tuple[float, int]], n_docs: int, n: int) -> Ranked:
    """The n best documents by BM25 over ``weights`` (term -> (weight, df)), ties by id."""
    w = {t: wd[0] for t, wd in sorted(weights.items(), key=lambda kv: (-kv[1][0], kv[0]))}
    # the most common terms, lightest first: they wait if they can
    common = [t for t in reversed(w) if weights[t][1] * LIST_SHARE > n_docs]
    found = src.lists({t: x for t, x in w.items() if t not in common})
    ids, scores = _summed(found)
    floor = _nth(scores, n)  # n documents score this or more: so does the final n-th
    waiting: dict[str, float] = {}
    for t in common:
        if sum(waiting.values()) + w[t] >= floor - SLACK * floor:
            break
        waiting[t] = w[t]
    essential = {t: w[t] for t in reversed(common) if t not in waiting}
    if essential:
        ids, scores = _summed(found + src.lists(essential))
    late = {t: weights[t] for t in reversed(waiting)}  # heaviest first
    return _late(src, ids, scores, late, floor, n)


def _late(
    src: Postings,
    ids: np.ndarray,
    scores: np.ndarray,
    waiting: dict[str, tuple[float, int]],
    floor: float,
    n: int,
) -> Ranked:
    """The waiting terms (heaviest first) added to the documents that can still reach
    the floor. After each, the n-th best partial score is a floor too (a score only
    grows), and a document below it by more than the terms still to come is dropped."""
    terms = list(waiting)
    for k, term in enumerate(terms):
        rest = sum(waiting[t][0] for t in terms[k:])
        floor = max(floor, _nth(scores, n))
        keep = scores >= floor - rest - SLACK * (abs(floor) + rest)
        ids, scores = ids[keep], scores[keep]
        if len(ids) * PROBE_COST < waiting[term][1]:
            # few candidates left: every waiting term still to come, by key, at once
            later = {t: waiting[t][0] for t in terms[k:]}
            for t_ids, t_scores in src.probed(ids, later):
                scores = _added(ids, scores, t_ids, t_scores)
            return _best(ids, scores, n)
        [(t_ids, t_scores)] = src.lists({term: waiting[term][0]})
        scores = _added(ids, scores, t_ids, t_scores)
    return _best(ids, scores, n)


def _summed(lists: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Sorted ids and their sums. bincount adds in input order, term by term, so equal
    documents get bit-equal sums (ties are then broken by id, as the reference does)."""
    if not lists:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    ids = np.concatenate([i for i, _ in lists])
    uniq, inverse = np.unique(ids, return_inverse=True)
    return uniq, np.bincount(
        inverse, weights=np.concatenate([s for _, s in lists]), minlength=len(uniq)
    )


def _added(
    ids: np.ndarray, scores: np.ndarray, t_ids: np.ndarray, t_scores: np.ndarray
) -> np.ndarray:
    """``scores`` of sorted ``ids`` plus one term's postings (each id at most once)."""
    if not len(ids) or not len(t_ids):
        return scores
    at = np.minimum(np.searchsorted(ids, t_ids), len(ids) - 1)
    hit = ids[at] == t_ids
    out = scores.copy()
    out[at[hit]] += t_scores[hit]
    return out


def _nth(scores: np.ndarray, n: int) -> float:
    if len(scores) < n:
        return 0.0
    return float(-np.partition(-scores, n - 1)[n - 1])


def _best(ids: np.ndarray, scores: np.ndarray, n: int) -> Ranked:
    order = np.lexsort((ids, -scores))[:n]
    return [(int(i), float(s)) for i, s in zip(ids[order], scores[order], strict=True)]


def fetch(
    conn: sa.Connection, sql: str, params: dict[str, Any], *, binary: bool = False
) -> list[Any]:
    """Rows of ``sql`` (psycopg's placeholders), planned for these very parameters.

    psycopg prepares a statement run often on a connection, and PostgreSQL may then keep
    a generic plan: for ``chunk_id = ANY(...) AND term = ANY(...)`` the generic plan
    read the terms' whole lists (60 ms against 1.5 ms, 100k chunks). ``binary`` ships
    bytea as bytes (as text, psycopg decodes the hex form).
    """
    raw = conn.connection.driver_connection
    if isinstance(raw, psycopg.Connection):
        with raw.cursor(binary=binary) as cur:
            cur.execute(sql, params, prepare=False)
            return cur.fetchall()
    return list(conn.execute(sa.text(re.sub(r"%\((\w+)\)s", r":\1", sql)), params))
