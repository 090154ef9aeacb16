"""The pgvector backend's own promises, on a real PostgreSQL 18 with pgvector.

BM25 in SQL equals ``rank_bm25`` (with Lucene's idf) on the project's tokens, and keeps
equalling it after adds and deletes (statistics exact, not approximate); a memory moves
from ``local`` to ``pgvector`` with one ``rebuild-index``; a rebuild leaves searches
serving the old tables until it commits; the errors name what to do.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.errors import IndexUnavailableError
from memory_pipeline.index.backends.pgvector import LOCK_KEY
from memory_pipeline.index.backends.pgvector.search import PgDense, PgSparse
from memory_pipeline.index.bm25 import K1 as BM25_K1
from memory_pipeline.index.bm25 import B as BM25_B
from memory_pipeline.index.tokenizer import tokenize
from memory_pipeline.system import MemorySystem
from tests.conftest import make_settings
from tests.index.test_sparse import CORPUS_TEXTS, QUERIES, LuceneIdfBM25, dedupe, ranking


def _memory(tmp_path: Path, url: str, **kw: object) -> MemorySystem:
    settings = make_settings(tmp_path, database_url=url, backend="pgvector", max_chunk_size=256)
    return MemorySystem(settings.replace(**kw), embedder=HashingEmbedder())


def _live_texts(memory: MemorySystem) -> dict[int, str]:
    """chunk id -> text of every live chunk."""
    ids = memory.store.all_ids()
    return {cid: record.content for cid, record in memory.store.get_chunks(ids).items()}


def _check_parity(memory: MemorySystem, live: dict[int, str]) -> None:
    """BM25 of every query over the live texts, as rank_bm25 computes it."""
    ids = sorted(live)
    corpus = [tokenize(live[i]) for i in ids]
    reference = LuceneIdfBM25(corpus, k1=BM25_K1, b=BM25_B)
    view = memory.published()
    assert view is not None
    for text in QUERIES:
        query = dedupe(tokenize(text))
        scores = reference.get_scores(query)
        expected = [(ids[k], float(s)) for k, s in enumerate(scores) if s > 0]
        got = view.sparse.search(query, len(ids))
        assert dict(got) == pytest.approx(dict(expected), rel=1e-9), text
        assert ranking(got, 5) == ranking(expected, 5), text
        assert {i for i, _ in view.sparse.search(query, 5)} == set(ranking(expected, 5)), text
        some = ids[::3]
        assert dict(view.sparse.scores_for(query, some)) == pytest.approx(
            {i: s for i, s in expected if i in some}, rel=1e-9
        )


@pytest.mark.parametrize("driver", ["psycopg", "psycopg2"])
def test_bm25_equals_rank_bm25_through_adds_and_deletes(
    tmp_path: Path, pgvector_url: str, driver: str
) -> None:
    """On psycopg 3 the rows go in by COPY; other drivers (psycopg2) take statements."""
    memory = _memory(tmp_path, pgvector_url.replace("+psycopg:", f"+{driver}:", 1))
    try:
        # Every text is one chunk of at most 40 tokens: lengths are stored exactly.
        docs = {t: memory.ingest_text(t, f"t{k}").doc_id for k, t in enumerate(CORPUS_TEXTS)}
        live = _live_texts(memory)
        _check_parity(memory, live)
        for text in CORPUS_TEXTS[::4]:  # deletes: N, lengths and document frequencies fall
            memory.delete_document(docs[text])
        live = {cid: t for cid, t in live.items() if t not in CORPUS_TEXTS[::4]}
        _check_parity(memory, live)
        added = memory.ingest_text("BM25 and dense vectors, once more: 記憶の検索。", "again")
        live.update(_live_texts(memory))
        assert added.chunks == 1
        _check_parity(memory, live)
        with memory.store.engine.connect() as c:  # the statistics rows agree with the rows
            n, tokens = c.execute(sa.text("SELECT n_docs, n_tokens FROM pgv_stats")).one()
            assert n == len(live) and tokens == sum(len(tokenize(t)) for t in live.values())
            negative = c.execute(sa.text("SELECT count(*) FROM pgv_df WHERE df <= 0")).scalar()
            assert negative == 0
    finally:
        memory.close()


def test_a_local_memory_moves_to_pgvector_with_one_rebuild(
    tmp_path: Path, pgvector_url: str
) -> None:
    local = MemorySystem(
        make_settings(tmp_path, database_url=pgvector_url, max_chunk_size=256),
        embedder=HashingEmbedder(),
    )
    try:
        for k, text in enumerate(CORPUS_TEXTS):
            local.ingest_text(text, f"t{k}")
        local.update_index()
        want = [
            [
                h.chunk_id
                for h in local.query(q, local.settings.search_request(record_access=False)).hits
            ]
            for q in QUERIES
        ]
    finally:
        local.close()
    moved = _memory(tmp_path, pgvector_url)
    try:
        with pytest.raises(IndexUnavailableError, match="rebuild-index"):
            moved.query(
                "BM25", moved.settings.search_request(record_access=False)
            )  # not silently empty
        result = moved.rebuild_index()
        assert result.n_dense == len(CORPUS_TEXTS) and moved.index_health().healthy
        got = [
            [
                h.chunk_id
                for h in moved.query(q, moved.settings.search_request(record_access=False)).hits
            ]
            for q in QUERIES
        ]
        assert got == want
    finally:
        moved.close()


def test_searches_go_on_during_a_rebuild(tmp_path: Path, pgvector_url: str) -> None:
    memory = _memory(tmp_path, pgvector_url)
    try:
        for k, text in enumerate(CORPUS_TEXTS):
            memory.ingest_text(text, f"t{k}")
        before = memory.query(
            "BM25 keyword", memory.settings.search_request(record_access=False)
        ).hits
        engine = sa.create_engine(pgvector_url)
        with engine.begin() as c:  # a rebuild in flight holds the writers' lock...
            c.execute(sa.text(f"SELECT pg_advisory_xact_lock({LOCK_KEY})"))
            c.execute(sa.text("CREATE TABLE pgv_vectors_v99 (chunk_id bigint)"))
            # ...and searches still answer from the live tables.
            during = memory.query(
                "BM25 keyword", memory.settings.search_request(record_access=False)
            ).hits
            assert [h.chunk_id for h in during] == [h.chunk_id for h in before]
        engine.dispose()
        assert memory.rebuild_index().version == 2
        after = memory.query(
            "BM25 keyword", memory.settings.search_request(record_access=False)
        ).hits
        assert [h.chunk_id for h in after] == [h.chunk_id for h in before]
    finally:
        memory.close()


def test_a_filtered_dense_search_is_exact(tmp_path: Path, pgvector_url: str) -> None:
    memory = _memory(tmp_path, pgvector_url)
    try:
        for k, text in enumerate(CORPUS_TEXTS):
            memory.ingest_text(text, f"t{k}")
        view = memory.published()
        assert view is not None
        ids = memory.store.all_ids()
        found, vecs = memory.store.vectors_for(ids.tolist(), memory.model_id)
        q = memory.embedder.embed_query("vector search")
        allowed = np.sort(found[::5])
        exact = sorted(
            zip(found.tolist(), (vecs @ q).tolist(), strict=True), key=lambda p: (-p[1], p[0])
        )
        want = [i for i, _ in exact if i in set(allowed.tolist())][:3]
        assert [i for i, _ in view.dense.search(q, 3, allowed=allowed)] == want
    finally:
        memory.close()


def test_sqlite_is_refused_with_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(IndexUnavailableError, match="HYBRID_RAG_DATABASE_URL"):
        MemorySystem(make_settings(tmp_path, backend="pgvector"), embedder=HashingEmbedder())


def test_a_server_without_pgvector_is_refused(tmp_path: Path, pg_url: str) -> None:
    """Debian's PostgreSQL 15 here has no pgvector: the error says so, and what to do."""
    with pytest.raises(IndexUnavailableError, match="CREATE EXTENSION vector"):
        _memory(tmp_path, pg_url)


@pytest.mark.parametrize(
    "probe_cost", [0, 10**9], ids=["waiting-terms-probed", "waiting-terms-read"]
)
def test_bm25_pruned_for_common_terms_equals_the_full_sum(
    tmp_path: Path, pgvector_url: str, monkeypatch: pytest.MonkeyPatch, probe_cost: int
) -> None:
    """Queries mixing very common and rare words take the MaxScore path (a floor from
    the commoner lists' n-th best sum, then the common terms that can wait, one at a
    time, for the candidates left: probed by key, or read whole); its top n is
    rank_bm25's, ties included, for every n and under an id filter."""
    from memory_pipeline.index.backends.pgvector import postings

    rng = np.random.default_rng(7)
    vocab = [f"w{i}" for i in range(400)]
    zipf = 1.0 / np.arange(1, len(vocab) + 1)
    texts = [
        " ".join(rng.choice(vocab, size=int(rng.integers(5, 40)), p=zipf / zipf.sum()))
        for _ in range(600)
    ]
    texts += texts[:150:3]  # copies: equal scores, which the floors must keep (ties by id)
    memory = _memory(tmp_path, pgvector_url)
    waited = []
    real = postings._late
    monkeypatch.setattr(postings, "PROBE_COST", probe_cost)

    def late(src: Any, ids: Any, scores: Any, waiting: Any, *rest: Any) -> Any:
        waited.append(waiting)
        return real(src, ids, scores, waiting, *rest)

    monkeypatch.setattr(postings, "_late", late)
    try:
        for k, text in enumerate(texts):  # one chunk each
            memory.ingest_text(text, f"z{k}")
        ids = sorted(memory.store.all_ids().tolist())
        live = memory.store.get_chunks(ids)
        corpus = [tokenize(live[i].content) for i in ids]
        reference = LuceneIdfBM25(corpus, k1=BM25_K1, b=BM25_B)
        view = memory.published()
        assert view is not None
        for query in (
            ["w0", "w1", "w250"],
            ["w2", "w399", "w150", "w0"],
            ["w3", "w120"],
            ["w0", "w1", "w2", "w3", "w4", "w5", "w300"],  # many common terms, one rare
            ["w0", "w1", "w2"],  # common terms only
        ):
            scores = reference.get_scores(query)
            expected = [(ids[k], float(s)) for k, s in enumerate(scores) if s > 0]
            for n in (1, 5, 20):
                got = view.sparse.search(query, n)
                assert ranking(got, n) == ranking(expected, n), (query, n)
                assert dict(got) == pytest.approx({i: s for i, s in expected if i in dict(got)})
            allowed = set(ids[::7])
            got = view.sparse.search(query, 5, allowed_ids=allowed)
            assert ranking(got, 5) == ranking([e for e in expected if e[0] in allowed], 5)
        assert any(waited), "no query let a term wait"
    finally:
        memory.close()


def _blocks_and_postings(
    memory: MemorySystem,
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every live posting as the blocks hold it (those of chunks listed gone skipped, as
    searches skip them), and as pgv_postings does, sorted."""
    from memory_pipeline.index.backends.pgvector.postings import RECORD
    from memory_pipeline.index.backends.pgvector.schema import BLOCK_SHIFT

    with memory.store.engine.connect() as c:
        gone = set(c.execute(sa.text("SELECT chunk_id FROM pgv_gone")).scalars())
        packed = []
        for term, space, block, blob in c.execute(
            sa.text("SELECT term, space, block, postings FROM pgv_blocks")
        ):
            for cid, tf, qlen in np.frombuffer(bytes(blob), dtype=RECORD).tolist():
                assert cid >> BLOCK_SHIFT == block  # a posting sits in its chunk's block
                if cid not in gone:
                    packed.append((term, space, cid, tf, qlen))
        rows = c.execute(sa.text("SELECT term, space, chunk_id, tf, qlen FROM pgv_postings"))
        return sorted(packed), sorted(tuple(r) for r in rows)


def _skip_ids_to(memory: MemorySystem, next_id: int) -> None:
    """The next chunk gets ``next_id``: later chunks land in another block."""
    with memory.store.engine.begin() as c:
        c.execute(
            sa.text("SELECT setval(pg_get_serial_sequence('chunks', 'id'), :n)"), {"n": next_id - 1}
        )


def _gone(memory: MemorySystem) -> int:
    with memory.store.engine.connect() as c:
        return int(c.execute(sa.text("SELECT count(*) FROM pgv_gone")).scalar_one())


def test_the_postings_blocks_hold_exactly_the_postings_through_writes_and_a_rebuild(
    tmp_path: Path, pgvector_url: str
) -> None:
    """Blocks are derived: after adds into several blocks, deletes of chunks spread over
    them (a block left empty too: their postings stay, listed gone, until ``update``),
    a deleted id coming back, an update and a rebuild, they hold every live posting
    once, in its chunk's block, and nothing else; BM25 still equals rank_bm25."""
    from memory_pipeline.index.backends.pgvector.schema import BLOCK_SHIFT

    memory = _memory(tmp_path, pgvector_url)
    try:
        docs = []
        for k, text in enumerate(CORPUS_TEXTS):
            if k % 3 == 0:
                _skip_ids_to(memory, (k // 3 + 1) << BLOCK_SHIFT)
            docs.append(memory.ingest_text(text, f"t{k}").doc_id)
        packed, rows = _blocks_and_postings(memory)
        assert packed == rows and len({r[2] >> BLOCK_SHIFT for r in rows}) > 2
        for doc in docs[1::2] + docs[:1]:
            memory.delete_document(doc)
        packed, rows = _blocks_and_postings(memory)
        assert packed == rows and len(rows) > 0
        assert _gone(memory) > 0
        _skip_ids_to(memory, 1 << BLOCK_SHIFT)  # a deleted chunk's id comes back
        memory.ingest_text(CORPUS_TEXTS[1], "again")
        packed, rows = _blocks_and_postings(memory)
        assert packed == rows
        memory.update_index()  # the deleted chunks' postings leave their blocks
        assert _gone(memory) == 0
        packed, rows = _blocks_and_postings(memory)
        assert packed == rows
        _check_parity(memory, _live_texts(memory))
        memory.delete_document(docs[2])
        memory.rebuild_index()
        assert _gone(memory) == 0
        packed, rows = _blocks_and_postings(memory)
        assert packed == rows and len(rows) > 0
    finally:
        memory.close()


def test_an_index_built_before_the_blocks_gets_them_when_the_backend_opens(
    tmp_path: Path, pgvector_url: str
) -> None:
    """A memory indexed by the version without ``pgv_blocks`` is searchable as before
    once opened: the blocks are packed from its postings (the postings' term index,
    which they replace, dropped), and kept from then on."""
    memory = _memory(tmp_path, pgvector_url)
    try:
        for k, text in enumerate(CORPUS_TEXTS):
            memory.ingest_text(text, f"t{k}")
        with memory.store.engine.begin() as c:  # the tables as that version left them
            c.execute(sa.text("DROP TABLE pgv_blocks, pgv_gone"))
            c.execute(sa.text("DROP FUNCTION pgv_blocks_added, pgv_blocks_removed CASCADE"))
            c.execute(
                sa.text(
                    "CREATE INDEX pgv_postings_term_v1 ON pgv_postings (term) "
                    "INCLUDE (chunk_id, space, tf, qlen)"
                )
            )
    finally:
        memory.close()
    memory = _memory(tmp_path, pgvector_url)
    try:
        packed, rows = _blocks_and_postings(memory)
        assert packed == rows and len(rows) > 0
        with memory.store.engine.connect() as c:  # the term index the blocks replace is gone
            names = c.execute(
                sa.text("SELECT indexname FROM pg_indexes WHERE tablename = 'pgv_postings'")
            ).scalars()
            assert not [n for n in names if n.startswith("pgv_postings_term")]
        memory.ingest_text("BM25 and dense vectors, once more: 記憶の検索。", "again")
        packed, rows = _blocks_and_postings(memory)
        assert packed == rows
        _check_parity(memory, _live_texts(memory))
    finally:
        memory.close()


def test_a_view_reads_a_query_statistics_once(
    tmp_path: Path, pgvector_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search and the scores of the other retriever's candidates weigh the terms
    with the same statistics, read once per view; a new view reads them anew."""
    memory = _memory(tmp_path, pgvector_url)
    try:
        for k, text in enumerate(CORPUS_TEXTS):
            memory.ingest_text(text, f"t{k}")
        reads = []
        collection = PgSparse._collection

        def counted(self: PgSparse, *a: Any) -> Any:
            reads.append(1)
            return collection(self, *a)

        monkeypatch.setattr(PgSparse, "_collection", counted)
        query = dedupe(tokenize("BM25 keyword search"))
        view = memory.published()
        assert view is not None
        top = view.sparse.search(query, 3)
        others = view.sparse.scores_for(query, memory.store.all_ids().tolist())
        assert top and len(reads) == 1
        assert {i: dict(others)[i] for i, _ in top} == pytest.approx(dict(top), rel=1e-12)
        fresh = memory.published()
        assert fresh is not None
        fresh.sparse.search(query, 3)
        assert len(reads) == 2
    finally:
        memory.close()


def _waiting_on_a_lock(url: str) -> bool:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as c:
            return bool(
                c.execute(
                    sa.text(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
                    )
                ).scalar()
            )
    finally:
        engine.dispose()


def test_a_rebuild_swapping_tables_waits_for_a_search_between_its_reads(
    tmp_path: Path, pgvector_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A BM25 search reads the statistics, then the postings, in one transaction. A
    rebuild that swapped its tables in one by one while such a search sat between its two
    reads held the postings (dropped) and waited for the statistics, while the search
    waited for the postings: PostgreSQL broke the deadlock by aborting one of them. The
    search here is held between its reads until the rebuild waits; both must finish."""
    memory = _memory(tmp_path, pgvector_url)
    try:
        for k, text in enumerate(CORPUS_TEXTS):
            memory.ingest_text(text, f"t{k}")
        view = memory.published()
        assert view is not None
        query = dedupe(tokenize("BM25 keyword"))
        expected = view.sparse.search(query, 5)
        assert expected

        between_reads, go_on = threading.Event(), threading.Event()
        collection = PgSparse._collection

        def held(self: PgSparse, c: sa.Connection, terms: list[str]) -> Any:
            out = collection(self, c, terms)
            between_reads.set()
            go_on.wait(60)
            return out

        monkeypatch.setattr(PgSparse, "_collection", held)
        outcome: dict[str, Any] = {}

        def run(name: str, work: Callable[[], Any]) -> threading.Thread:
            def body() -> None:
                try:
                    outcome[name] = work()
                except Exception as exc:
                    outcome[name] = exc

            thread = threading.Thread(target=body)
            thread.start()
            return thread

        fresh = memory.published()  # a view of its own: it reads the statistics anew
        assert fresh is not None
        search = run("search", lambda: fresh.sparse.search(query, 5))
        assert between_reads.wait(60)
        rebuild = run("rebuild", memory.rebuild_index)
        for _ in range(600):  # until the rebuild waits for a lock (or is done)
            if _waiting_on_a_lock(pgvector_url) or not rebuild.is_alive():
                break
            time.sleep(0.05)
        go_on.set()
        search.join(120)
        rebuild.join(120)
        assert not isinstance(outcome["search"], Exception), outcome["search"]
        assert not isinstance(outcome["rebuild"], Exception), outcome["rebuild"]
        assert outcome["search"] == expected
        assert outcome["rebuild"].version == 2
    finally:
        memory.close()


@pytest.mark.parametrize("write", ["ingest", "delete"])
def test_health_is_not_fooled_by_a_write_between_its_reads(
    tmp_path: Path, pgvector_url: str, monkeypatch: pytest.MonkeyPatch, write: str
) -> None:
    """pgvector's index is tables beside the chunks, written in the same transaction: a
    write committed between health's read of the live ids and its read of the index's
    is no inconsistency, however the two reads fall."""
    memory = _memory(tmp_path, pgvector_url)
    other = _memory(tmp_path, pgvector_url)
    try:
        docs = [memory.ingest_text(t, f"t{k}").doc_id for k, t in enumerate(CORPUS_TEXTS)]
        members = PgDense.member_ids
        calls = 0

        def after_a_write(self: PgDense) -> np.ndarray:
            nonlocal calls
            calls += 1
            if calls == 1:  # once, between the snapshot and the index's ids
                if write == "ingest":
                    other.ingest_text("a note written while health reads", "late")
                else:
                    other.delete_document(docs[0])
            return members(self)

        monkeypatch.setattr(PgDense, "member_ids", after_a_write)
        report = memory.index_health()
        assert calls >= 1
        assert report.healthy, [f.message for f in report.findings if f.severity == "error"]
    finally:
        other.close()
        memory.close()


@pytest.mark.parametrize(("configured", "during"), [("64MB", "512MB"), ("2GB", "2GB")])
def test_a_rebuild_raises_the_build_memory_and_never_lowers_it(
    tmp_path: Path, pgvector_url: str, monkeypatch: pytest.MonkeyPatch, configured: str, during: str
) -> None:
    """An HNSW build that outgrows ``maintenance_work_mem`` goes on many times slower; a
    rebuild takes at least 512MB, and more if the database is configured with more (a
    million chunks' graph needs several GB)."""
    from memory_pipeline.store.changes import Reads

    admin = sa.create_engine(pgvector_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        name = c.execute(sa.text("SELECT current_database()")).scalar()
        c.execute(sa.text(f"ALTER DATABASE \"{name}\" SET maintenance_work_mem = '{configured}'"))
    admin.dispose()
    memory = _memory(tmp_path, pgvector_url)
    memory.ingest_text("The heron waits by the river.", "heron")
    seen: list[str] = []
    change_seqs = Reads.change_seqs

    def spy(self: Reads) -> Any:
        seen.append(self.conn.execute(sa.text("SHOW maintenance_work_mem")).scalar_one())
        return change_seqs(self)

    monkeypatch.setattr(Reads, "change_seqs", spy)
    memory.rebuild_index()
    memory.close()
    assert seen and set(seen) == {during}


def _keys_and_indexes(memory: MemorySystem) -> list[tuple[str, str]]:
    """(table, definition) of every constraint and index of the live tables, the version
    tags of their names taken out."""
    with memory.store.engine.connect() as c:
        rows = c.execute(
            sa.text(
                "SELECT conrelid::regclass::text, contype::text || ' ' || pg_get_constraintdef(oid) "
                "FROM pg_constraint WHERE conrelid::regclass::text LIKE 'pgv\\_%' "
                "UNION ALL SELECT tablename, regexp_replace(indexdef, '_v[0-9]+', '', 'g') "
                "FROM pg_indexes WHERE tablename LIKE 'pgv\\_%' ORDER BY 1, 2"
            )
        ).all()
    return [(str(t), str(d)) for t, d in rows]


def test_a_rebuild_gives_its_tables_the_keys_a_new_index_has(
    tmp_path: Path, pgvector_url: str
) -> None:
    """A rebuild fills its tables first and adds their keys after (one sort per key instead
    of an index insertion and a referenced-row lookup per posting): the tables it swaps in
    have every key, reference and index the first index was created with, and deleting a
    chunk still takes its rows with it."""
    memory = _memory(tmp_path, pgvector_url)
    try:
        docs = [memory.ingest_text(text, f"t{k}").doc_id for k, text in enumerate(CORPUS_TEXTS)]
        created = _keys_and_indexes(memory)
        kinds = {d.split(" ", 1)[0] for t, d in created if t == "pgv_postings"}
        assert {"p", "f"} <= kinds
        memory.rebuild_index()
        assert _keys_and_indexes(memory) == created
        memory.delete_document(docs[0])
        with memory.store.engine.connect() as c:
            left = c.execute(
                sa.text(
                    "SELECT (SELECT count(*) FROM pgv_vectors) + (SELECT count(*) FROM pgv_docs)"
                    " + (SELECT count(*) FROM pgv_postings p WHERE NOT EXISTS "
                    "(SELECT 1 FROM chunks WHERE id = p.chunk_id))"
                )
            ).scalar_one()
        assert left == 2 * len(memory.store.all_ids())
        _check_parity(memory, _live_texts(memory))
    finally:
        memory.close()


def test_rows_go_in_by_copy_exactly(
    tmp_path: Path, pgvector_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """COPY's binary vectors hold the stored floats bit for bit, and terms with the
    characters COPY's text form escapes (backslash, tab, newline, carriage return) come
    back as they went in."""
    from memory_pipeline.index.backends.pgvector import schema

    terms = ["back\\slash", "tab\there", "new\nline", "cr\rhere", "\\N", "plain", "plain"]
    monkeypatch.setattr(schema, "tokenize", lambda text: terms)
    memory = _memory(tmp_path, pgvector_url)
    try:
        memory.ingest_text("Any text: the terms are the ones above.", "odd")
        [cid] = memory.store.all_ids()
        with memory.store.engine.connect() as c:
            got = dict(c.execute(sa.text("SELECT term, tf FROM pgv_postings")).all())
            stored = c.execute(
                sa.text("SELECT vector FROM embeddings WHERE chunk_id = :i"), {"i": int(cid)}
            ).scalar_one()
            held = c.execute(
                sa.text("SELECT embedding::real[] FROM pgv_vectors WHERE chunk_id = :i"),
                {"i": int(cid)},
            ).scalar_one()
        assert got == {t: terms.count(t) for t in terms}
        want = np.frombuffer(stored, dtype=np.float32)
        assert np.array_equal(np.asarray(held, dtype=np.float32), want) and want.any()
    finally:
        memory.close()
