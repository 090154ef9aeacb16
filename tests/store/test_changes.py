"""The index-change queue, the index writer's snapshot reads, and index versions."""

from __future__ import annotations

import numpy as np
import sqlalchemy as sa

from memory_pipeline.spaces import Spaces
from memory_pipeline.store import Store
from memory_pipeline.store.schema import IndexVersion
from memory_pipeline.types import NewChunk
from tests.store.test_store import chunks, doc, vecs


def test_the_queue_counts_every_add_and_delete_until_cleared(db_url: str) -> None:
    store = Store(db_url)
    assert store.last_change() == 0 and store.unqueued_chunks() == (0, 0)
    a = store.add_document(doc("a", source="a.md"), chunks("a0", "a1"), vecs(2), "m")
    b = store.add_document(doc("b", source="b.md"), chunks("b0"), vecs(1), "m")
    queue = store.pending_changes()
    assert queue.adds.tolist() == a + b and queue.deletes.tolist() == []
    assert store.last_change() == max(queue.seqs) and len(queue.seqs) == 3
    assert store.unqueued_chunks() == (3, 0)  # every held chunk has its add queued

    store.clear_changes(queue.seqs)
    store.clear_changes(queue.seqs)  # idempotent
    assert not store.pending_changes() and store.pending_adds() == []
    assert store.unqueued_chunks() == (3, 3)  # held, none waiting: the index has them
    assert store.last_change() == 0  # an empty queue

    store.delete_document("a")
    after = store.pending_changes()
    assert after.deletes.tolist() == a and after.adds.tolist() == []
    assert store.unqueued_chunks() == (1, 1)
    store.clear_changes(np.asarray([], dtype=np.int64))  # nothing to clear
    assert store.pending_changes().seqs.tolist() == after.seqs.tolist()
    store.close()


def test_a_snapshot_reads_texts_vectors_spaces_and_the_queue(db_url: str) -> None:
    store = Store(db_url)
    v = vecs(2)
    plain, turn = NewChunk(0, "said", 1), NewChunk(1, "heard", 1, index_text="alice: heard")
    ids = store.add_document(doc("d"), [plain, turn], v, "m")
    other = Store(db_url, spaces=Spaces.bound("b"))
    (theirs,) = other.add_document(doc("e", source="e.md"), chunks("elsewhere"), vecs(1), "m")
    every = [*ids, theirs]
    with store.snapshot() as reads:
        assert reads.pending_changes().adds.tolist() == every
        assert sorted(reads.change_seqs().tolist()) == sorted(reads.pending_changes().seqs)
        # The index serves every space: its reads are not bound to this store's.
        assert reads.all_ids().tolist() == every
        assert reads.live_ids([*every, 10_000]) == set(every)
        assert reads.spaces_of([*every, 10_000]) == {
            ids[0]: "default",
            ids[1]: "default",
            theirs: "b",
        }
        assert reads.contents(ids) == {ids[0]: "said", ids[1]: "heard"}
        assert reads.sparse_texts(ids) == {ids[0]: "said", ids[1]: "alice: heard\nheard"}
        found, matrix = reads.vectors_for([*ids, 10_000], "m")
        assert found.tolist() == ids
        np.testing.assert_array_equal(matrix, v)
        assert reads.vectors_for(ids, "other-model")[0].size == 0
    # The same reads outside a snapshot, through the store.
    assert store.contents(ids) == {ids[0]: "said", ids[1]: "heard"}
    assert store.sparse_texts([ids[1]]) == {ids[1]: "alice: heard\nheard"}
    assert store.live_ids([*every, 10_000]) == set(every)
    other.close()
    store.close()


def test_record_index_version_writes_one_row_per_version(db_url: str) -> None:
    store = Store(db_url)
    for version, n_dense, n_sparse in [(1, 2, 2), (2, 3, 3), (2, 5, 4)]:  # 2 again: merged
        store.record_index_version(
            version=version,
            model_id="m",
            dim=4,
            n_dense=n_dense,
            n_sparse=n_sparse,
            kind="update",
            added=2,
            removed=0,
        )
    with store.conn() as c:
        rows = c.execute(
            sa.select(IndexVersion.version, IndexVersion.n_dense, IndexVersion.n_sparse).order_by(
                IndexVersion.version
            )
        ).all()
    assert [tuple(r) for r in rows] == [(1, 2, 2), (2, 5, 4)]
    store.close()
