"""Documents in the store: labels, dates set later, rows as stored, refusals."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from memory_pipeline.errors import InvalidInputError, NotFoundError
from memory_pipeline.spaces import Spaces
from memory_pipeline.store import Store
from memory_pipeline.store.engine import sqlite_url
from memory_pipeline.types import NewChunk, Turn
from tests.store.test_store import chunks, doc, vecs

DAY = dt.date(2024, 5, 6)
SAID = dt.datetime(2024, 1, 2, 9, 0, tzinfo=dt.UTC)


def test_document_labels_name_each_existing_document_once(db_url: str) -> None:
    store = Store(db_url)
    store.add_document(doc("a", source="a.md"), chunks("x"), vecs(1), "m")
    store.add_document(doc("b", source="b.md"), chunks("y"), vecs(1), "m")
    labels = store.document_labels(["b", "a", "b", "missing"])
    assert labels == {"a": ("title a", "a.md"), "b": ("title b", "b.md")}
    assert store.document_labels([]) == {}
    store.close()


def test_set_source_date_dates_the_document_and_only_its_undated_chunks(db_url: str) -> None:
    store = Store(db_url)
    turn = NewChunk(1, "said then", 2, turns=(Turn("t1", "alice", SAID),))
    ids = store.add_document(doc("d"), [NewChunk(0, "plain", 1), turn], vecs(2), "m")
    store.add_document(doc("dated", day=DAY), chunks("z"), vecs(1), "m")
    assert [d.doc_id for d in store.documents_without_source_date()] == ["d"]

    assert store.set_source_date("d", DAY, "front_matter") == 1  # the turn chunk kept its day
    info = store.get_document("d")
    assert info is not None and (info.source_date, info.source_date_rule) == (DAY, "front_matter")
    records = store.get_chunks(ids)
    assert [records[i].source_date for i in ids] == [DAY, SAID.date()]
    assert store.documents_without_source_date() == []
    store.close()


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda s: s.set_source_date("missing", DAY, "metadata"), NotFoundError),
        (lambda s: s.delete_document("missing"), NotFoundError),
        (lambda s: s.add_document(doc("d"), chunks("a", "b"), vecs(1), "m"), InvalidInputError),
        (lambda s: s.store_document(doc("d"), chunks("a"), vecs(2), "m"), InvalidInputError),
    ],
    ids=["date-missing", "delete-missing", "fewer-vectors", "more-vectors"],
)
def test_refused_writes_change_nothing(db_url: str, call, error) -> None:  # type: ignore[no-untyped-def]
    store = Store(db_url)
    store.add_document(doc("kept"), chunks("k"), vecs(1), "m")
    before = store.pending_changes().seqs.tolist()
    with pytest.raises(error):
        call(store)
    assert store.counts() == {"documents": 1, "chunks": 1}
    assert store.pending_changes().seqs.tolist() == before
    store.close()


def test_documents_info_reads_the_rows_as_stored(db_url: str) -> None:
    store = Store(db_url)
    first = doc("p", kt="principle", source="p.md", day=DAY)
    store.add_document(first, chunks("p0"), vecs(1), "m")
    store.add_document(doc("n", kt=None, source="n.md"), chunks("n0"), vecs(1), "m")
    info = store.documents_info(["p", "n", "p", "gone"])
    assert sorted(info) == ["n", "p"]
    assert info["p"] == dataclasses.replace(first, n_chunks=1)  # the store counts the chunks
    assert (info["n"].knowledge_type, info["n"].source_date) == (None, None)
    assert store.documents_info([]) == {}
    store.close()


def test_tagged_documents_are_those_with_a_live_tagged_chunk_and_their_latest_stamp(
    db_url: str,
) -> None:
    from memory_pipeline.spaces import Spaces

    store = Store(db_url, spaces=Spaces.bound("p"))
    stamp = "last:2024-05-0"
    store.add_document(doc("a"), chunks("x", "y"), vecs(2), "m", tags=["conv", f"{stamp}1"])
    store.add_document(doc("b"), chunks("z"), vecs(1), "m", tags=["conv"])
    store.add_document(doc("c"), chunks("w"), vecs(1), "m", tags=[f"{stamp}9"])  # not conv
    # "_" and "%" in a prefix are not wildcards: "lastX" does not start with "last_".
    store.add_document(doc("d"), chunks("v"), vecs(1), "m", tags=["conv", "lastX"])
    store.bound(Spaces.bound("q")).add_document(doc("e"), chunks("u"), vecs(1), "m", tags=["conv"])
    store.set_chunk_tags("a", 1, tags=["conv", f"{stamp}3"])

    found = store.tagged_documents("conv", "last:")
    assert [(d.doc_id, d.title, d.latest) for d in found] == [
        ("a", "title a", f"{stamp}3"),
        ("b", "title b", None),
        ("d", "title d", None),
    ]
    assert [d.doc_id for d in store.tagged_documents("conv", "last_")] == ["a", "b", "d"]
    assert all(d.latest is None for d in store.tagged_documents("conv", "last_"))
    store.close()


def test_document_labels_look_documents_up_by_key_not_by_space(tmp_path: Path) -> None:
    """The labels of a search's hits are ten documents found by key. Asked for them within
    its spaces, SQLite (no statistics) chose the space index once ten ids were asked
    for, and read every document of the space: 2 ms at 20k documents, growing with
    them. The space is checked on the rows found, so no plan walks that index."""
    url = sqlite_url(tmp_path / "m.db")
    other = Store(url, spaces=Spaces.bound("other"))
    other.add_document(doc("elsewhere"), chunks("y"), vecs(1), "m")
    other.close()
    store = Store(url, spaces=Spaces.bound("default"))
    for k in range(30):
        store.add_document(doc(f"d{k}", source=f"d{k}.md"), chunks("x"), vecs(1), "m")
    plans: list[str] = []

    @sa.event.listens_for(store.engine, "before_cursor_execute")
    def explain(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            rows = cursor.connection.execute("EXPLAIN QUERY PLAN " + statement, params)
            plans.extend(str(r[-1]) for r in rows.fetchall())

    wanted = [f"d{k}" for k in range(12)] + ["missing", "elsewhere"]
    labels = store.document_labels(wanted)
    assert labels == {f"d{k}": (f"title d{k}", f"d{k}.md") for k in range(12)}
    assert plans and not [p for p in plans if "ix_documents_space" in p], plans
    store.close()


def test_recent_documents_newest_first_by_date_in_the_readable_spaces(db_url: str) -> None:
    """The viewer's timeline: by source date, else by the day stored; then the later
    stored first; only the spaces the store reads; pages by limit and offset."""
    store = Store(db_url, spaces=Spaces.bound("ours"))
    stored = dt.datetime(2024, 3, 1, 12, 0, tzinfo=dt.UTC)
    for doc_id, day in [
        ("old", dt.date(2023, 1, 1)),
        ("new", dt.date(2024, 6, 1)),
        ("undated", None),
    ]:
        info = dataclasses.replace(doc(doc_id, day=day), created_at=stored)
        store.add_document(info, chunks("x"), vecs(1), "m")
    later = dataclasses.replace(doc("same-day"), created_at=stored + dt.timedelta(hours=1))
    store.add_document(later, chunks("y"), vecs(1), "m")
    theirs = store.bound(Spaces.bound("theirs"))
    theirs.add_document(doc("theirs", day=dt.date(2030, 1, 1)), chunks("z"), vecs(1), "m")
    order = ["new", "same-day", "undated", "old"]
    assert [d.doc_id for d in store.recent_documents(10)] == order
    assert [d.doc_id for d in store.recent_documents(2, 1)] == order[1:3]
    assert [d.doc_id for d in theirs.recent_documents(10)] == ["theirs"]
    store.close()
