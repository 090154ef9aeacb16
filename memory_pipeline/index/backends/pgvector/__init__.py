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
* ``pgv_blocks (term, space, block, postings)``: the same postings packed per term and
  block of 1,024 chunk ids (``schema.BLOCK_SHIFT``), 16 bytes each, so that BM25 reads a
  term's list as a few rows (``postings.py``); an add appends to its blocks, a delete
  lists its chunks in ``pgv_gone`` (searches skip their postings) and ``update`` packs
  their blocks anew; added from the postings to an index built before them when the
  backend opens;
* ``pgv_stats (space, n_docs, n_tokens)`` and ``pgv_df (space, term, df)``: collection
  statistics kept exact under adds and deletes by statement triggers in the same
  transaction (one advisory lock orders every writer, so counters never deadlock; a
  writer takes it before touching chunk rows, as a rebuild, whose tables reference
  ``chunks``, takes it before locking them);
* ``pgv_index``: the model id and dimension (one embedding space), a version number
  raised by each rebuild.

Filters are SQL conditions on the chunk ids before the cut: a restricted dense search
is an exact scan of the allowed rows (the HNSW graph would cut first and filter after).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import sqlalchemy as sa

from memory_pipeline.errors import IndexUnavailableError, ModelMismatchError
from memory_pipeline.index.backends.names import DEFAULT_EF_SEARCH
from memory_pipeline.index.backends.pgvector.schema import (
    BLOCK_SHIFT,
    BLOCK_TRIGGERS,
    FUNCTIONS,
    INDEX_TABLE,
    LOCK,
    LOCK_KEY,
    SWAP,
    TABLES,
    blocks_ddl,
    fill_blocks,
    has_table,
    indexes_ddl,
    insert_rows,
    keys_ddl,
    read_state,
    read_state_and_counts,
    reading,
    tables_ddl,
    triggers_ddl,
)
from memory_pipeline.index.backends.pgvector.search import PgDense, PgSparse, PgView
from memory_pipeline.index.backends.queued import IndexState
from memory_pipeline.index.tokenizer import TOKENIZER_ID
from memory_pipeline.store import Store
from memory_pipeline.store.store import Reads
from memory_pipeline.types import IndexUpdateResult

__all__ = ["LOCK_KEY", "PgDense", "PgSparse", "PgVectorIndex", "PgView"]

_BATCH = 2_000
# An HNSW build that outgrows maintenance_work_mem goes on many times slower: a rebuild
# takes at least 512MB, or what the server is configured with if that is more (the graph
# of a million 384-d chunks needs several GB).
BUILD_MEMORY = sa.text(
    "SELECT set_config('maintenance_work_mem', CASE WHEN "
    "pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes('512MB') "
    "THEN '512MB' ELSE current_setting('maintenance_work_mem') END, true)"
)


class PgVectorIndex:
    """The backend: the store's in-transaction hook, the source of views, the updater."""

    name = "pgvector"

    def __init__(self, store: Store, model_id: str, *, ef_search: int = DEFAULT_EF_SEARCH) -> None:
        if store.backend != "postgresql":
            raise IndexUnavailableError(
                "the pgvector backend keeps the index in the memory's PostgreSQL database, but "
                f"the store is {store.backend}; set HYBRID_RAG_DATABASE_URL to a PostgreSQL "
                "server with the vector extension, or HYBRID_RAG_INDEX_BACKEND=local"
            )
        self.store = store
        self.engine = store.engine
        self.model_id = model_id
        self.ef_search = ef_search
        self._seen = False  # pgv_index exists (rebuilds keep it: it is never dropped)
        self._check_extension()
        store.index_hook = self

    def _check_extension(self) -> None:
        url = self.engine.url.render_as_string(hide_password=True)
        try:
            with self.engine.begin() as c:
                c.execute(LOCK)
                c.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
                c.execute(sa.text(FUNCTIONS))
                migrated = self._add_blocks(c)
        except sa.exc.DBAPIError as exc:
            raise IndexUnavailableError(
                f"the PostgreSQL at {url} cannot serve the pgvector backend: "
                f"{str(exc.orig).strip().splitlines()[0]}; install pgvector on that server "
                "(CREATE EXTENSION vector), or use HYBRID_RAG_INDEX_BACKEND=local"
            ) from exc
        if migrated:
            self._analyze(("pgv_blocks", "pgv_gone"))

    def _add_blocks(self, c: sa.Connection) -> bool:
        """An index built before the postings blocks gets them, from its postings, and
        loses the postings' term index, which they replace."""
        if read_state(c) is None or has_table(c, "pgv_blocks"):
            return False
        c.execute(SWAP)  # the searches under way end first (schema.reading)
        for (name,) in c.execute(
            sa.text(
                "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND "
                "tablename = 'pgv_postings' AND indexname LIKE 'pgv_postings_term_%'"
            )
        ).all():
            c.execute(sa.text(f'DROP INDEX "{name}"'))
        for ddl in blocks_ddl("pgv_blocks", "pgv_gone"):
            c.execute(sa.text(ddl))
        c.execute(sa.text(fill_blocks("")))
        for ddl in triggers_ddl("", BLOCK_TRIGGERS):
            c.execute(sa.text(ddl))
        return True

    # ------------------------------------------------------------- the hook
    def lock(self, conn: sa.Connection) -> None:
        conn.execute(LOCK)

    def added(self, conn: sa.Connection, ids: Sequence[int]) -> None:
        conn.execute(LOCK)
        for start in range(0, len(ids), _BATCH):
            batch = [int(i) for i in ids[start : start + _BATCH]]
            rows = Reads(conn).index_rows(batch, self.model_id)
            without = [int(r[0]) for r in rows if r[3] is None]
            if without:
                raise ModelMismatchError(
                    f"{len(without)} new chunks (e.g. ids {without[:5]}) have no vector of "
                    f"{self.model_id!r}, the model the pgvector index serves; embed them with it"
                )
            if not rows:
                continue
            dim = len(rows[0][3] or b"") // 4  # every row has a vector (checked above)
            self._ensure(conn, dim)
            insert_rows(conn, "", rows)

    def deleted(self, conn: sa.Connection, ids: Sequence[int]) -> None:
        if read_state(conn) is None:
            return
        conn.execute(LOCK)
        batch = [int(i) for i in ids]
        # One statement per table: the triggers run once, not once per cascaded row.
        for table in ("pgv_postings", "pgv_docs", "pgv_vectors"):
            conn.execute(sa.text(f"DELETE FROM {table} WHERE chunk_id = ANY(:ids)"), {"ids": batch})

    def _ensure(self, conn: sa.Connection, dim: int) -> None:
        state = read_state(conn)
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
        conn.execute(INDEX_TABLE)
        for ddl in (
            tables_ddl("", dim) + keys_ddl("") + indexes_ddl("", f"v{version}") + triggers_ddl("")
        ):
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
        with reading(self.engine) as c:
            state, by_space = read_state_and_counts(c, seen=self._seen)
            self._seen = state is not None  # a round trip less for the next view
            if state is None:
                if Reads(c).has_chunks():
                    raise IndexUnavailableError(
                        "the memory holds chunks but the pgvector index was never built for "
                        "them (they were indexed by another backend); run rebuild-index once "
                        "(it fills the index from the stored vectors)"
                    )
                return None
        n = sum(by_space.values())
        indexed = IndexState(
            state.model_id, state.dim, state.version, state.kind, state.created_at.isoformat()
        )
        manifest = indexed.manifest(n, n)
        return PgView(manifest, self.engine, self.ef_search, by_space)

    # ----------------------------------------------------------- the updater
    def update(self) -> IndexUpdateResult:
        """Nothing to take in once the index exists (writes reach it as they commit);
        changes queued before this backend was chosen, or no index yet, mean a rebuild."""
        started = time.perf_counter()
        with self.engine.connect() as c:
            state = read_state(c)
            queued = Reads(c).queued_count()
        if state is None or queued or state.model_id != self.model_id:
            if state is not None and state.model_id != self.model_id:
                raise ModelMismatchError(
                    f"the pgvector index holds vectors of {state.model_id!r}, the embedder is "
                    f"{self.model_id!r}; run rebuild-index once vectors of the new model are stored"
                )
            return self.rebuild()
        with self.engine.begin() as c:  # deleted chunks' postings out of their blocks
            c.execute(LOCK)
            c.execute(
                sa.text(
                    f"SELECT pgv_repack(array_agg(DISTINCT chunk_id >> {BLOCK_SHIFT})) "
                    "FROM pgv_gone HAVING count(*) > 0"
                )
            )
        view = self.current()
        n = view.manifest.n_dense if view else 0
        return IndexUpdateResult(state.version, "noop", 0, 0, n, n, time.perf_counter() - started)

    def drop_older(self) -> None:
        """Nothing on disk of its own: a rebuild replaced its tables, whose dead rows the
        store's ``purge_freed`` removes (``VACUUM FULL``)."""

    def rebuild(self) -> IndexUpdateResult:
        """A fresh set of tables from every stored vector and text, swapped in by one
        commit; searches go on reading the old set while it is built. The swap waits for
        the searches under way, and a search arriving meanwhile waits for the swap
        (``schema.reading``): dropped one by one under a search, the tables deadlocked."""
        started = time.perf_counter()
        with self.engine.begin() as c:
            c.execute(LOCK)  # writers wait; they add their chunks after the swap
            c.execute(BUILD_MEMORY)
            state = read_state(c)
            version = (state.version if state else 0) + 1
            reads = Reads(c)  # the store's tables, read in this transaction
            seqs = reads.change_seqs()
            dims = reads.vector_dims(self.model_id)
            without = reads.without_vector(self.model_id)
            if without:
                raise ModelMismatchError(
                    f"{without} live chunks have no vector of model {self.model_id!r}; "
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
            for ddl in tables_ddl(suffix, dim):
                c.execute(sa.text(ddl))
            last = 0
            n = 0
            while True:
                rows = reads.index_rows_after(last, self.model_id, _BATCH)
                if not rows:
                    break
                insert_rows(c, suffix, rows)
                last = int(rows[-1][0])
                n += len(rows)
            for ddl in keys_ddl(suffix):
                c.execute(sa.text(ddl))
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
            c.execute(sa.text(fill_blocks(suffix)))
            for ddl in indexes_ddl(suffix, f"v{version}") + triggers_ddl(suffix):
                c.execute(sa.text(ddl))
            c.execute(SWAP)  # the searches under way end first (schema.reading)
            for table in TABLES:
                c.execute(sa.text(f"DROP TABLE IF EXISTS {table} CASCADE"))
            for table in TABLES:
                c.execute(sa.text(f"ALTER TABLE {table}{suffix} RENAME TO {table}"))
            c.execute(INDEX_TABLE)
            self._set_state(c, dim, version, "rebuild")
            # changes queued under another backend are covered by this rebuild
            reads.clear_changes(seqs)
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

    def _analyze(self, tables: Sequence[str] = TABLES) -> None:
        """Fresh planner statistics and visibility map (index-only scans) after a rebuild."""
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            for table in tables:
                c.execute(sa.text(f"VACUUM ANALYZE {table}"))
