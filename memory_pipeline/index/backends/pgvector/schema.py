"""The pgvector backend's tables, their triggers and locks, and how rows are written."""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from memory_pipeline.index import bm25
from memory_pipeline.index.tokenizer import tokenize

# Every transaction that changes pgv_ rows takes this lock first (pg_advisory_xact_lock).
LOCK_KEY = 0x6D70_7067  # "mppg"
TABLES = (
    "pgv_postings",
    "pgv_docs",
    "pgv_vectors",
    "pgv_df",
    "pgv_stats",
    "pgv_blocks",
    "pgv_gone",
)
# pgv_blocks holds a term's postings of the chunk ids [k << BLOCK_SHIFT, (k + 1) << BLOCK_SHIFT)
# packed in one row (block k): a term's list reads as a few rows, not a row per posting.
BLOCK_SHIFT = 10
# One posting in a block: chunk id int8, tf int4, qlen int4, big-endian (int8send, int4send).
PACKED = "int8send(chunk_id) || int4send(tf) || int4send(qlen)"
_PACKED_P = "int8send(p.chunk_id) || int4send(p.tf) || int4send(p.qlen)"

LOCK = sa.text(f"SELECT pg_advisory_xact_lock({LOCK_KEY})")
# Every transaction that reads the live pgv_ tables holds this one shared, and a rebuild
# takes it exclusively before it drops them for its new set (``reading``, ``rebuild``).
SWAP_KEY = LOCK_KEY + 1
READ = sa.text(f"SELECT pg_advisory_xact_lock_shared({SWAP_KEY})")
SWAP = sa.text(f"SELECT pg_advisory_xact_lock({SWAP_KEY})")
INDEX_TABLE = sa.text(
    "CREATE TABLE IF NOT EXISTS pgv_index (id integer PRIMARY KEY CHECK (id = 1), "
    "model_id text NOT NULL, dim integer NOT NULL, version bigint NOT NULL, "
    "kind text NOT NULL, tokenizer text NOT NULL, created_at timestamptz NOT NULL)"
)

FUNCTIONS = f"""
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
CREATE OR REPLACE FUNCTION pgv_repack(blocks bigint[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  -- these blocks packed anew from the postings, and their chunks no longer gone
  DELETE FROM pgv_blocks WHERE block = ANY(blocks);
  INSERT INTO pgv_blocks (term, space, block, postings)
    SELECT p.term, p.space, k.block, string_agg({_PACKED_P}, ''::bytea)
      FROM unnest(blocks) AS k(block)
      JOIN pgv_postings p ON p.chunk_id >= k.block << {BLOCK_SHIFT}
                         AND p.chunk_id < (k.block + 1) << {BLOCK_SHIFT}
     GROUP BY 1, 2, 3;
  DELETE FROM pgv_gone WHERE chunk_id >> {BLOCK_SHIFT} = ANY(blocks);
END $$;
CREATE OR REPLACE FUNCTION pgv_blocks_added() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  back bigint[];
BEGIN
  PERFORM pg_advisory_xact_lock({LOCK_KEY});
  -- a chunk id deleted before is back (the store does not reuse ids, but could):
  -- its blocks, which still hold its old postings, are packed anew
  SELECT array_agg(DISTINCT n.chunk_id >> {BLOCK_SHIFT}) INTO back
    FROM new_rows n JOIN pgv_gone g ON g.chunk_id = n.chunk_id;
  IF back IS NOT NULL THEN
    PERFORM pgv_repack(back);
  END IF;
  -- a block is a bag of postings: new ones are appended, in any order
  INSERT INTO pgv_blocks AS b (term, space, block, postings)
    SELECT term, space, chunk_id >> {BLOCK_SHIFT}, string_agg({PACKED}, ''::bytea)
      FROM new_rows
     WHERE back IS NULL OR NOT (chunk_id >> {BLOCK_SHIFT} = ANY(back))
     GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
  ON CONFLICT (term, space, block) DO UPDATE SET postings = b.postings || EXCLUDED.postings;
  RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION pgv_blocks_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock({LOCK_KEY});
  -- a deleted chunk's postings stay in their blocks, skipped by searches, until the
  -- blocks are packed anew (``update``, a rebuild): rewriting them here cost seconds
  -- for 100 chunks, as a block holds up to 1,024 postings of a common term
  INSERT INTO pgv_gone (chunk_id) SELECT DISTINCT chunk_id FROM old_rows
  ON CONFLICT DO NOTHING;
  RETURN NULL;
END $$;
"""


@contextmanager
def reading(engine: Engine, settings: dict[str, str] | None = None) -> Iterator[sa.Connection]:
    """A connection whose transaction reads the live tables, the swap lock held shared
    (and ``settings`` made for the transaction, in the same statement: a round trip less).

    A BM25 search reads the statistics, then the postings, in one transaction. Were the
    tables dropped one by one under it, the rebuild could hold the postings and wait for
    the statistics while the search held the statistics and waited for the postings: a
    deadlock PostgreSQL ends by aborting one of them. With this lock taken before any
    table, a rebuild waits for the searches under way to end, and a search arriving
    meanwhile waits for the swap, holding nothing the rebuild needs.
    """
    with engine.connect() as c:
        if settings:
            names = list(settings)
            made = ", ".join(f"set_config(:k{i}, :v{i}, true)" for i in range(len(names)))
            params = {f"k{i}": k for i, k in enumerate(names)}
            params.update({f"v{i}": settings[k] for i, k in enumerate(names)})
            c.execute(sa.text(f"SELECT pg_advisory_xact_lock_shared({SWAP_KEY}), {made}"), params)
        else:
            c.execute(READ)
        yield c


def tables_ddl(suffix: str, dim: int) -> list[str]:
    """DDL of one set of tables (``suffix`` '' is the live set; a rebuild fills another),
    without the keys of the three per-chunk tables: ``keys_ddl`` adds them."""
    t = {name: f"{name}{suffix}" for name in TABLES}
    return [
        f"""CREATE TABLE {t["pgv_vectors"]} (
              chunk_id bigint NOT NULL, embedding vector({dim}) NOT NULL)""",
        f"""CREATE TABLE {t["pgv_docs"]} (
              chunk_id bigint NOT NULL, space text NOT NULL, n_tokens integer NOT NULL)""",
        f"""CREATE TABLE {t["pgv_postings"]} (
              chunk_id bigint NOT NULL, term text NOT NULL, space text NOT NULL,
              tf integer NOT NULL, qlen integer NOT NULL)""",
        f"""CREATE TABLE {t["pgv_stats"]} (
              space text PRIMARY KEY, n_docs bigint NOT NULL, n_tokens bigint NOT NULL)""",
        f"""CREATE TABLE {t["pgv_df"]} (
              space text NOT NULL, term text NOT NULL, df bigint NOT NULL,
              PRIMARY KEY (term, space))""",
        *blocks_ddl(t["pgv_blocks"], t["pgv_gone"]),
    ]


def keys_ddl(suffix: str) -> list[str]:
    """The primary and foreign keys of the per-chunk tables. A rebuild adds them after
    filling the tables: one sort per key and one join per reference, instead of an index
    insertion and a lookup in the referenced table for every row (of ~70 postings a
    chunk)."""
    t = {name: f"{name}{suffix}" for name in TABLES}
    return [
        f"ALTER TABLE {t['pgv_vectors']} ADD PRIMARY KEY (chunk_id), "
        "ADD FOREIGN KEY (chunk_id) REFERENCES chunks(id) ON DELETE CASCADE",
        f"ALTER TABLE {t['pgv_docs']} ADD PRIMARY KEY (chunk_id), "
        "ADD FOREIGN KEY (chunk_id) REFERENCES chunks(id) ON DELETE CASCADE",
        f"ALTER TABLE {t['pgv_postings']} ADD PRIMARY KEY (chunk_id, term) INCLUDE (tf, qlen), "
        f"ADD FOREIGN KEY (chunk_id) REFERENCES {t['pgv_docs']}(chunk_id) ON DELETE CASCADE",
    ]


def blocks_ddl(blocks: str, gone: str) -> list[str]:
    # MAIN: a common term's block (16 bytes a posting) is compressed in its row before
    # it is moved out of line. pgv_gone: the deleted chunks whose postings the blocks
    # still hold.
    return [
        f"""CREATE TABLE {blocks} (
              term text NOT NULL, space text NOT NULL, block bigint NOT NULL,
              postings bytea STORAGE MAIN NOT NULL, PRIMARY KEY (term, space, block))""",
        f"CREATE TABLE {gone} (chunk_id bigint PRIMARY KEY)",
        # a block's rows, all terms (pgv_repack)
        f"CREATE INDEX {blocks}_block ON {blocks} (block)",
    ]


def fill_blocks(suffix: str) -> str:
    """Every block of a set of tables, from its postings (a rebuild, a migration)."""
    return (
        f"INSERT INTO pgv_blocks{suffix} (term, space, block, postings) "
        f"SELECT term, space, chunk_id >> {BLOCK_SHIFT}, string_agg({PACKED}, ''::bytea) "
        f"FROM pgv_postings{suffix} GROUP BY 1, 2, 3"
    )


def indexes_ddl(suffix: str, tag: str) -> list[str]:
    # No index on pgv_postings (term): a term's list is read from pgv_blocks, and a
    # posting is found by its key (chunk_id, term).
    return [
        f"CREATE INDEX pgv_vectors_hnsw_{tag} ON pgv_vectors{suffix} "
        "USING hnsw (embedding vector_ip_ops)",
    ]


_TRIGGERS = (
    ("pgv_docs", "INSERT", "pgv_docs_added"),
    ("pgv_docs", "DELETE", "pgv_docs_removed"),
    ("pgv_postings", "INSERT", "pgv_postings_added"),
    ("pgv_postings", "DELETE", "pgv_postings_removed"),
)
BLOCK_TRIGGERS = (
    ("pgv_postings", "INSERT", "pgv_blocks_added"),
    ("pgv_postings", "DELETE", "pgv_blocks_removed"),
)


def triggers_ddl(suffix: str, triggers: Sequence[tuple[str, str, str]] = ()) -> list[str]:
    out = []
    for table, event, function in triggers or _TRIGGERS + BLOCK_TRIGGERS:
        ref = "NEW TABLE AS new_rows" if event == "INSERT" else "OLD TABLE AS old_rows"
        out.append(
            f"CREATE TRIGGER {function} AFTER {event} ON {table}{suffix} "
            f"REFERENCING {ref} FOR EACH STATEMENT EXECUTE FUNCTION {function}()"
        )
    return out


def vector_text(v: np.ndarray) -> str:
    """pgvector's text form of one vector."""
    return "[" + ",".join(map(repr, v.astype(np.float32).tolist())) + "]"


@dataclass(frozen=True)
class State:
    model_id: str
    dim: int
    version: int
    kind: str
    created_at: dt.datetime


# Read from pg_class in the statement's snapshot: to_regclass answers from a cache that
# a transaction which waited for the lock may not have refreshed, and then misses the
# table another writer created meanwhile.
_HAS_TABLE = sa.text(
    "SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.relname = :name AND n.nspname = current_schema())"
)


def has_table(c: sa.Connection, name: str) -> bool:
    return bool(c.execute(_HAS_TABLE, {"name": name}).scalar())


def read_state(c: sa.Connection) -> State | None:
    return read_state_and_counts(c)[0]


def read_state_and_counts(
    c: sa.Connection, *, seen: bool = False
) -> tuple[State | None, dict[str, int]]:
    """The index's state and its chunks per space, in one statement once the index exists
    (``seen``: pgv_index was there before, and nothing drops it)."""
    if not seen and not has_table(c, "pgv_index"):
        return None, {}
    row = c.execute(
        sa.text(
            "SELECT model_id, dim, version, kind, created_at, (SELECT coalesce(json_object_agg("
            "space, n_docs), '{}') FROM pgv_stats) FROM pgv_index WHERE id = 1"
        )
    ).first()
    if row is None:
        return None, {}
    return State(*row[:5]), {str(k): int(v) for k, v in row[5].items()}


def insert_rows(c: sa.Connection, suffix: str, rows: Sequence[Any]) -> None:
    """Vectors, documents and postings of (id, space, content, vector blob) rows.

    On psycopg 3, by ``COPY``: the vectors in COPY's binary form straight from their
    blobs, the documents and postings as text. A statement of arrays instead spent most
    of a rebuild in Python, writing each float's text and quoting each array element
    (100k chunks, ~7M postings: 15 s and 32 s of a 100 s rebuild). Other drivers
    (psycopg2) take the statements.
    """
    if not rows:
        return
    raw = c.connection.driver_connection
    if not isinstance(raw, psycopg.Connection):
        _insert_statements(c, suffix, rows)
        return
    docs: list[str] = []
    postings: list[str] = []
    for cid, space, content, _ in rows:
        tokens = tokenize(content)
        head, where = f"{int(cid)}\t", _copy_text(str(space))
        docs.append(f"{head}{where}\t{len(tokens)}\n")
        tail = f"\t{where}\t"
        qlen = bm25.quantize_length(len(tokens))
        for term, tf in Counter(tokens).items():
            postings.append(f"{head}{_copy_text(term)}{tail}{tf}\t{qlen}\n")
    with raw.cursor() as cur:
        with cur.copy(
            f"COPY pgv_vectors{suffix} (chunk_id, embedding) FROM STDIN (FORMAT binary)"
        ) as cp:
            cp.write(binary_vectors([int(r[0]) for r in rows], [r[3] for r in rows]))
        with cur.copy(f"COPY pgv_docs{suffix} (chunk_id, space, n_tokens) FROM STDIN") as cp:
            cp.write("".join(docs))
        if postings:
            with cur.copy(
                f"COPY pgv_postings{suffix} (chunk_id, term, space, tf, qlen) FROM STDIN"
            ) as cp:
                cp.write("".join(postings))


# COPY's text form: these four characters are escaped, and nothing else is special.
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_NEEDS_ESCAPE = re.compile(r"[\\\t\n\r]")


def _copy_text(value: str) -> str:
    return value.translate(_COPY_ESCAPES) if _NEEDS_ESCAPE.search(value) else value


# PostgreSQL's binary COPY: a signature, flags and header extension, then the tuples,
# then -1.
_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_COPY_TRAILER = b"\xff\xff"


def binary_vectors(ids: Sequence[int], blobs: Sequence[bytes]) -> bytes:
    """(chunk_id, embedding) tuples in binary COPY form; pgvector's binary vector is its
    dimension (int16), an unused int16 and the floats, all big-endian."""
    x = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), -1)
    dim = x.shape[1]
    tuples = np.empty(
        len(blobs),
        dtype=[
            ("fields", ">i2"),
            ("id_len", ">i4"),
            ("id", ">i8"),
            ("vec_len", ">i4"),
            ("dim", ">i2"),
            ("unused", ">i2"),
            ("x", ">f4", (dim,)),
        ],
    )
    tuples["fields"], tuples["id_len"], tuples["vec_len"] = 2, 8, 4 + 4 * dim
    tuples["id"], tuples["dim"], tuples["unused"], tuples["x"] = ids, dim, 0, x
    return _COPY_HEADER + tuples.tobytes() + _COPY_TRAILER


def _insert_statements(c: sa.Connection, suffix: str, rows: Sequence[Any]) -> None:
    """``insert_rows`` by statements of arrays, for drivers other than psycopg 3."""
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


def as_ids(ids: Collection[int] | np.ndarray | None) -> list[int] | None:
    if ids is None:
        return None
    if isinstance(ids, np.ndarray):
        return ids.astype(np.int64, copy=False).tolist()
    return [int(i) for i in ids]
