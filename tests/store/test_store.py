"""The store on a real SQLite file and a real PostgreSQL database."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import numpy as np
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from memory_pipeline.errors import ModelMismatchError, NotFoundError
from memory_pipeline.store import Store
from memory_pipeline.store.schema import Base
from memory_pipeline.types import DocumentInfo, NewChunk, SearchFilters

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def doc(
    doc_id: str, *, kt: str | None = "paper", source: str = "src", day: dt.date | None = None
) -> DocumentInfo:
    return DocumentInfo(
        doc_id=doc_id,
        source=source,
        title=f"title {doc_id}",
        fmt="markdown",
        content_hash="c" * 64,
        normalized_hash="n" * 64,
        byte_size=10,
        knowledge_type=kt,
        importance=0.5,
        source_date=day,
        source_date_rule="metadata" if day else None,
        created_at=NOW,
    )


def chunks(*texts: str) -> list[NewChunk]:
    return [NewChunk(i, t, len(t.split())) for i, t in enumerate(texts)]


def vecs(n: int, dim: int = 4, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def test_migrations_create_exactly_the_schema(db_url: str) -> None:
    store = Store(db_url)
    Store(db_url).close()  # a second open is a no-op migration
    with store.engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diffs == []
    store.close()


def test_document_roundtrip_and_stable_ids(db_url: str) -> None:
    store = Store(db_url)
    v = vecs(3)
    ids = store.add_document(
        doc("d1"), chunks("alpha one", "beta two", "gamma three"), v, "m", ["t1", "t2"]
    )
    assert ids == sorted(ids) and len(set(ids)) == 3
    recs = store.get_chunks(ids)
    assert [recs[i].chunk_index for i in ids] == [0, 1, 2]
    assert recs[ids[1]].content == "beta two"
    assert recs[ids[0]].tags == ("t1", "t2")
    assert recs[ids[0]].created_at == NOW
    found, matrix = store.vectors_for(ids, "m")
    assert found.tolist() == ids
    np.testing.assert_array_equal(matrix, v)  # float32 stored bit-exactly
    assert store.get_document("d1") is not None
    assert store.counts() == {"documents": 1, "chunks": 3}
    more = store.add_document(doc("d2", source="other"), chunks("delta"), vecs(1), "m")
    assert more[0] > max(ids)
    store.close()


def test_a_document_reads_back_as_it_was_stored(db_url: str) -> None:
    """Every field of DocumentInfo, through each read (n_chunks is the store's count)."""
    store = Store(db_url)
    dated = doc("dated", source="dated.md", day=dt.date(2025, 5, 6))
    undated = doc("undated", kt=None, source="undated.md")
    store.add_document(dated, chunks("one", "two"), vecs(2), "m")
    store.add_document(undated, chunks("three"), vecs(1), "m")
    dated, undated = replace(dated, n_chunks=2), replace(undated, n_chunks=1)
    assert store.get_document("dated") == dated
    assert store.documents_by_source("dated.md") == [dated]
    assert store.documents_without_source_date() == [undated]
    assert store.documents_info(["dated", "undated", "gone"]) == {
        "dated": dated,
        "undated": undated,
    }
    store.close()


def test_delete_cascades_and_ids_are_never_reused(db_url: str) -> None:
    store = Store(db_url)
    ids = store.add_document(doc("d1"), chunks("a", "b"), vecs(2), "m", ["x"])
    assert store.delete_document("d1") == 2
    queue = store.pending_changes()
    assert queue.adds.tolist() == ids and queue.deletes.tolist() == ids  # the writer sees both
    assert store.pending_adds() == []  # a deleted chunk is never "waiting to be indexed"
    store.clear_changes(queue.seqs)
    assert not store.pending_changes()
    assert store.get_chunks(ids) == {}
    assert store.find_by_tag("x") == []
    assert store.vectors_for(ids, "m")[0].size == 0
    with pytest.raises(NotFoundError, match="no document"):
        store.delete_document("d1")
    again = store.add_document(doc("d1"), chunks("a", "b"), vecs(2), "m")
    assert min(again) > max(ids)
    store.close()


def test_filters_tags_and_access(db_url: str) -> None:
    store = Store(db_url)
    a = store.add_document(
        doc("p", kt="principle", day=dt.date(2020, 1, 1)),
        chunks("p0", "p1"),
        vecs(2),
        "m",
        ["core"],
    )
    b = store.add_document(
        doc("n", kt="news", source="s2", day=dt.date(2026, 1, 1)),
        chunks("n0"),
        vecs(1),
        "m",
        ["core", "x"],
    )
    assert store.filter_ids(SearchFilters(knowledge_types=("news",))).tolist() == b
    assert store.filter_ids(SearchFilters(tags=("core", "x"))).tolist() == b
    assert store.filter_ids(SearchFilters(tags=("core",))).tolist() == a + b
    assert store.filter_ids(SearchFilters(doc_ids=("p",))).tolist() == a
    window = SearchFilters(source_date_from=dt.date(2025, 1, 1), source_date_to=dt.date(2026, 6, 1))
    assert store.filter_ids(window).tolist() == b
    assert [c.id for c in store.find_by_tag("x")] == b
    assert store.pending_changes().adds.tolist() == a + b

    rec = store.set_chunk_tags("p", 1, importance=0.9, knowledge_type="paper", tags=["new"])
    assert (rec.importance, rec.knowledge_type, rec.tags) == (0.9, "paper", ("new",))
    assert store.find_by_tag("new")[0].id == a[1]
    with pytest.raises(NotFoundError):
        store.set_chunk_tags("p", 7, importance=0.1)

    store.record_access([a[0], a[0]])
    store.record_access([a[0]], when=NOW)
    rec0 = store.get_chunks([a[0]])[a[0]]
    assert rec0.access_count == 2 and rec0.last_accessed_at == NOW
    store.close()


def test_vectors_by_content_and_model_guard(db_url: str) -> None:
    store = Store(db_url)
    v = vecs(2)
    first = store.add_document(doc("d"), chunks("same text", "other"), v, "m")
    from memory_pipeline.store import content_sha

    known = store.vectors_by_content([content_sha("same text"), content_sha("unknown")], "m")
    assert list(known) == [content_sha("same text")]
    np.testing.assert_array_equal(known[content_sha("same text")], v[0])
    store.check_model("m", 4)
    with pytest.raises(ModelMismatchError, match="dim 4"):
        store.check_model("other-model", 4)
    with pytest.raises(ModelMismatchError):
        store.check_model("m", 8)
    batches = list(store.iter_vectors("m", batch_size=1))
    assert [b[0].tolist() for b in batches] == [[first[0]], [first[1]]]

    v2 = vecs(3, seed=1)
    second = store.add_document(doc("e", source="other"), chunks("x", "y", "z"), v2, "m")
    # Keyset batches of 2 over 5 vectors: every id once, ascending, with its own vector.
    batches = list(store.iter_vectors("m", batch_size=2))
    every = first + second
    assert [b[0].tolist() for b in batches] == [every[0:2], every[2:4], every[4:5]]
    np.testing.assert_array_equal(np.concatenate([b[1] for b in batches]), np.concatenate([v, v2]))
    assert list(store.iter_vectors("other-model", batch_size=2)) == []
    store.close()


def test_replace_is_one_transaction(db_url: str) -> None:
    store = Store(db_url)
    store.add_document(doc("old", source="file.md"), chunks("v1"), vecs(1), "m")
    v = vecs(2, seed=2)
    ids = store.add_document(
        doc("new", source="file.md"), chunks("v2", "v2b"), v, "m", ["keep"], replace=["old"]
    )
    assert [d.doc_id for d in store.documents_by_source("file.md")] == ["new"]
    queued = store.pending_changes().seqs.tolist()

    # Each replace deletes "new", then fails inserting its successor (two chunks with
    # one chunk_index violate the unique constraint): the delete must roll back with it.
    clash = [NewChunk(0, "v3", 1), NewChunk(0, "v3 again", 2)]
    with pytest.raises(sa.exc.IntegrityError):
        store.add_document(doc("newer", source="file.md"), clash, vecs(2), "m", replace=["new"])
    with pytest.raises(sa.exc.IntegrityError):
        store.store_document(doc("newest", source="file.md"), clash, vecs(2), "m")

    assert [d.doc_id for d in store.documents_by_source("file.md")] == ["new"]
    assert store.get_document("newer") is None and store.get_document("newest") is None
    records = store.get_chunks(ids)
    assert [(records[i].content, records[i].tags) for i in ids] == [
        ("v2", ("keep",)),
        ("v2b", ("keep",)),
    ]
    found, matrix = store.vectors_for(ids, "m")
    assert found.tolist() == ids
    np.testing.assert_array_equal(matrix, v)
    assert [c.id for c in store.find_by_tag("keep")] == ids
    assert store.pending_changes().seqs.tolist() == queued  # no delete of "new" was queued
    assert store.counts() == {"documents": 1, "chunks": 2}
    store.close()


def test_store_document_replaces_every_version_of_its_source(db_url: str) -> None:
    store = Store(db_url)
    store.add_document(doc("v1", source="file.md"), chunks("one"), vecs(1), "m")
    store.add_document(doc("v2", source="file.md"), chunks("two"), vecs(1), "m")  # a stray copy
    stored = store.store_document(doc("v3", source="file.md"), chunks("three"), vecs(1), "m")
    assert stored is not None and sorted(stored.replaced) == ["v1", "v2"]
    assert [d.doc_id for d in store.documents_by_source("file.md")] == ["v3"]
    assert store.store_document(doc("v3", source="file.md"), chunks("three"), vecs(1), "m") is None
    assert store.counts() == {"documents": 1, "chunks": 1}
    store.close()


def test_sqlite_pragmas(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = Store(f"sqlite:///{tmp_path / 'x.db'}")
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
    store.close()
