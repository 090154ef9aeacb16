"""The read-only queries behind health, stats, the duplicate audit and evaluation."""

from __future__ import annotations

import numpy as np

from memory_pipeline.store import Store, content_sha
from memory_pipeline.types import NewChunk, Turn
from tests.store.test_store import chunks, doc, vecs

BUCKETS = [("never", 0, 0), ("once", 1, 1), ("often", 2, None)]


def test_counts_report_counts_what_was_stored(db_url: str) -> None:
    store = Store(db_url)
    a = store.add_document(
        doc("a", kt="news", source="a.md"), chunks("a0", "a1"), vecs(2), "m", ["x", "y"]
    )
    b = store.add_document(doc("b", kt=None, source="b.md"), chunks("b0"), vecs(1), "m", ["x"])
    store.record_access([a[0]])
    for _ in range(3):  # one access per call, however often an id is named in it
        store.record_access([b[0], b[0]])
    store.clear_changes(store.pending_changes().seqs[:1])  # the first add is indexed
    report = store.counts_report(BUCKETS, top_tags=1)
    assert (report.documents, report.chunks, report.importance_set) == (2, 3, 3)
    assert (report.tagged_chunks, report.distinct_tags, report.top_tags) == (3, 2, [("x", 3)])
    assert report.access_buckets == {"never": 1, "once": 1, "often": 1}
    assert report.total_accesses == 4 and report.unindexed_chunks == 2
    assert report.vectors_by_model == {"m": 3}
    assert report.documents_by_type == {"news": 1, None: 1}
    assert report.chunks_by_type == {"news": 2, None: 1}
    store.close()


def test_vector_and_chunk_rows_by_id(db_url: str) -> None:
    store = Store(db_url)
    said = Turn("t1", "alice")
    v = vecs(2)
    ids = store.add_document(
        doc("d"), [NewChunk(0, "plain", 1), NewChunk(1, "turn", 1, "alice: turn", (said,))], v, "m"
    )
    assert store.chunk_positions() == {ids[0]: ("d", 0), ids[1]: ("d", 1)}
    assert store.chunk_turn_ids() == {ids[1]: ("t1",)}
    assert store.chunk_doc_and_sha([*ids, 10_000]) == {
        ids[0]: ("d", content_sha("plain")),
        ids[1]: ("d", content_sha("alice: turn")),  # the embedded text's sha
    }
    assert store.document_ids() == {"d"}
    assert sorted(store.iter_content_vectors("m")) == sorted(
        [("plain", v[0].tobytes()), ("alice: turn", v[1].tobytes())]
    )
    assert list(store.iter_content_vectors("other")) == []
    rows = [r for batch in store.iter_vector_rows("m", batch_size=1) for r in batch]
    assert rows == [(ids[0], 4, v[0].tobytes()), (ids[1], 4, v[1].tobytes())]
    store.close()


def test_models_and_chunks_without_a_vector(db_url: str) -> None:
    store = Store(db_url)
    assert store.some_model_id() is None and store.embedding_models() == {}
    assert store.vector_counts() == {}
    ids = store.add_document(doc("d"), chunks("a", "b"), vecs(2), "m")
    empty = store.add_document(doc("e", source="e.md"), [], np.zeros((0, 4), np.float32), "m")
    assert empty == []
    assert store.some_model_id() == "m"
    assert store.embedding_models() == {"m": (4, 2)}
    assert store.vector_counts() == {("m", 4): 2}
    assert store.chunks_without_vector("m") == []
    assert store.chunks_without_vector("other") == ids
    assert store.readable_contents([content_sha("a"), content_sha("zz")], "m") == {content_sha("a")}
    assert store.readable_contents([content_sha("a")], "other") == set()
    store.close()


def test_repeated_documents_group_by_normalised_hash_oldest_first(db_url: str) -> None:
    store = Store(db_url)
    for doc_id, source in [("one", "1.md"), ("two", "2.md")]:  # doc() gives one hash to all
        store.add_document(doc(doc_id, source=source), chunks(doc_id), vecs(1), "m")
    rows = store.repeated_documents()
    assert [(r.doc_id, r.source, r.title) for r in rows] == [
        ("one", "1.md", "title one"),
        ("two", "2.md", "title two"),
    ]
    assert {r.normalized_hash for r in rows} == {"n" * 64}
    store.delete_document("two")
    assert store.repeated_documents() == []
    store.close()
