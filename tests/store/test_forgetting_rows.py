"""The store's side of forgetting: memory rows, run records, archiving, restoring."""

from __future__ import annotations

import datetime as dt

import numpy as np
import sqlalchemy as sa

from memory_pipeline.spaces import Spaces
from memory_pipeline.store import Store
from memory_pipeline.store.forgetting import RestoredChunk
from memory_pipeline.store.schema import Chunk, Document
from tests.store.test_store import NOW, chunks, doc, vecs

LATER = NOW + dt.timedelta(days=1)


def test_memory_rows_are_the_live_chunks_of_the_write_space(db_url: str) -> None:
    store = Store(db_url)
    ids = store.add_document(
        doc("d", kt="news", day=dt.date(2025, 1, 1)), chunks("a", "b"), vecs(2), "m"
    )
    Store(db_url, spaces=Spaces.bound("b")).add_document(
        doc("o", source="o.md"), chunks("o"), vecs(1), "m"
    )
    store.record_access([ids[1]], when=LATER)
    rows = sorted(store.iter_memory_rows(), key=lambda r: r.chunk_id)
    assert [(r.chunk_id, r.doc_id, r.chunk_index) for r in rows] == [
        (ids[0], "d", 0),
        (ids[1], "d", 1),
    ]
    assert {(r.knowledge_type, r.importance, r.created_at, r.source_date) for r in rows} == {
        ("news", 0.5, NOW, dt.date(2025, 1, 1))
    }
    assert [(r.access_count, r.last_accessed_at) for r in rows] == [(0, None), (1, LATER)]
    every = Store(db_url, spaces=Spaces.everything())
    assert len(list(every.iter_memory_rows())) == 3
    every.close()
    store.close()


def test_a_run_is_pending_until_it_archives_in_one_transaction(db_url: str) -> None:
    store = Store(db_url)
    ids = store.add_document(doc("d"), chunks("a", "b", "c"), vecs(3), "m", ["t"])
    store.clear_changes(store.pending_changes().seqs)
    assert store.forgetting_run("r1") is None and store.forgetting_run_statuses() == {}
    store.start_forgetting_run("r1", '{"k": 1}', n_candidates=2, when=NOW)
    pending = store.forgetting_run("r1")
    assert pending is not None and (pending.status, pending.n_archived) == ("pending", 0)
    assert pending.params == '{"k": 1}'

    assert store.finish_forgetting_run("r1", [ids[0], ids[2], 10_000], LATER) == 2
    done = store.forgetting_run("r1")
    assert done is not None and (done.status, done.n_archived) == ("archived", 2)
    assert store.forgetting_run_statuses() == {"r1": "archived"}
    assert store.live_ids(ids) == {ids[1]}
    assert store.pending_changes().deletes.tolist() == sorted([ids[0], ids[2], 10_000])
    assert [c.id for c in store.find_by_tag("t")] == [ids[1]]
    assert store.vectors_for(ids, "m")[0].tolist() == [ids[1]]
    assert store.live_positions([("d", 0), ("d", 1), ("d", 2), ("x", 0)]) == {("d", 1): ids[1]}
    store.close()


def test_restore_skips_live_positions_and_recreates_missing_documents(db_url: str) -> None:
    store = Store(db_url)
    (live,) = store.add_document(doc("d"), chunks("kept"), vecs(1), "m")
    with store.conn() as c:
        document = dict(
            c.execute(sa.select(Document.__table__).where(Document.doc_id == "d")).one()._mapping
        )
        chunk = dict(c.execute(sa.select(Chunk.__table__).where(Chunk.id == live)).one()._mapping)
    del chunk["id"]
    gone = {**document, "doc_id": "gone", "source": "gone.md"}
    items = [
        RestoredChunk(document, chunk, ("t",), "key-live"),  # its position holds a live chunk
        RestoredChunk(gone, {**chunk, "doc_id": "gone"}, ("t", "u"), "key-gone-0"),
        RestoredChunk(gone, {**chunk, "doc_id": "gone", "chunk_index": 1}, (), "key-gone-1"),
    ]
    v = vecs(3, seed=3)
    store.clear_changes(store.pending_changes().seqs)

    wrote = store.restore_chunks(items, v, "m", LATER)
    assert wrote.kept == [1, 2] and wrote.documents_recreated == 1 and len(wrote.new_ids) == 2
    assert store.restored_archive_keys() == {"key-gone-0", "key-gone-1"}
    assert store.live_positions([("gone", 0), ("gone", 1)]) == {
        ("gone", 0): wrote.new_ids[0],
        ("gone", 1): wrote.new_ids[1],
    }
    assert store.pending_changes().adds.tolist() == wrote.new_ids
    assert sorted(c.id for c in store.find_by_tag("u")) == [wrote.new_ids[0]]
    found, matrix = store.vectors_for(wrote.new_ids, "m")
    assert found.tolist() == wrote.new_ids
    np.testing.assert_array_equal(matrix, v[1:])
    assert store.get_document("gone") is not None

    again = store.restore_chunks(items, v, "m", LATER)  # every position is live by now
    assert (again.kept, again.new_ids, again.documents_recreated) == ([], [], 0)
    store.close()
