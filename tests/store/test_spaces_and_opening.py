"""A store bound to spaces (what it reads, writes, restricts searches to), and how it opens."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from memory_pipeline.errors import InvalidInputError, NotFoundError, StorageError
from memory_pipeline.spaces import Spaces
from memory_pipeline.store import Store
from memory_pipeline.store.opening import Opening, open_store
from memory_pipeline.types import SearchFilters
from tests.store.test_store import chunks, doc, vecs


def test_space_restriction_follows_what_other_spaces_hold(db_url: str) -> None:
    a = Store(db_url, spaces=Spaces.bound("a"))
    b = a.bound(Spaces.bound("b"))
    assert a.bound(Spaces.bound("a")) is a and b.spaces == Spaces.bound("b")
    every = Store(db_url, spaces=Spaces.everything())
    mine = a.add_document(doc("x"), chunks("x0", "x1"), vecs(2), "m")
    assert a.space_restriction() is None  # no other space holds chunks: nothing to restrict
    assert every.space_restriction() is None  # reads everything
    theirs = b.add_document(doc("y", source="y.md"), chunks("y0"), vecs(1), "m")
    assert a.space_restriction().tolist() == mine  # type: ignore[union-attr]
    assert b.space_restriction().tolist() == theirs  # type: ignore[union-attr]
    more = a.add_document(doc("z", source="z.md"), chunks("z0"), vecs(1), "m")
    assert a.space_restriction().tolist() == mine + more  # type: ignore[union-attr]
    b.delete_document("y")
    assert a.space_restriction() is None
    every.close()
    a.close()


@pytest.mark.parametrize(
    ("reader", "sees"),
    [
        (Spaces.bound("a"), {"x"}),
        (Spaces.bound("a", also_read=["b"]), {"x", "y"}),
        (Spaces.everything(), {"x", "y"}),
    ],
    ids=["own", "also-reads", "everything"],
)
def test_reads_see_the_spaces_they_read(db_url: str, reader: Spaces, sees: set[str]) -> None:
    Store(db_url, spaces=Spaces.bound("a")).add_document(
        doc("x", kt="principle"), chunks("x0"), vecs(1), "m"
    )
    Store(db_url, spaces=Spaces.bound("b")).add_document(
        doc("y", kt="principle", source="y.md"), chunks("y0"), vecs(1), "m"
    )
    store = Store(db_url, spaces=reader)
    assert store.document_ids() == sees
    assert set(store.document_labels(["x", "y"])) == sees
    assert {d for d, _ in store.chunk_positions().values()} == sees
    assert len(store.guaranteed_ids(["principle"], 1.0, SearchFilters())) == len(sees)
    assert len(store.guaranteed_ids([], 0.5, SearchFilters())) == len(sees)  # importance 0.5
    assert len(store.guaranteed_ids([], 0.9, SearchFilters())) == 0
    assert store.counts_report([], top_tags=0).documents == len(sees)
    store.close()


@pytest.mark.parametrize(
    ("writer", "error"),
    [(Spaces.bound("a", also_read=["b"]), InvalidInputError), (Spaces.bound("a"), NotFoundError)],
    ids=["reads-not-writes", "does-not-read"],
)
def test_another_spaces_document_cannot_be_changed(
    db_url: str, writer: Spaces, error: type
) -> None:
    Store(db_url, spaces=Spaces.bound("b")).add_document(doc("y"), chunks("y0"), vecs(1), "m")
    store = Store(db_url, spaces=writer)
    for change in (
        lambda: store.delete_document("y"),
        lambda: store.set_source_date("y", dt.date(2024, 1, 1), "x"),
    ):
        with pytest.raises(error):
            change()
    assert Store(db_url, spaces=Spaces.everything()).counts() == {"documents": 1, "chunks": 1}
    store.close()


def test_opening_read_only_writes_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    index = tmp_path / "indices"
    # A memory that does not exist yet is made, as any command would make it.
    made = open_store(url, Spaces(), Opening.READ_ONLY, index_folder=index)
    assert not made.read_only and index.is_dir()
    made.add_document(doc("d"), chunks("a"), vecs(1), "m")
    made.close()

    other_index = tmp_path / "other"
    store = open_store(url, Spaces(), Opening.READ_ONLY, index_folder=other_index)
    assert store.read_only and not other_index.exists()
    assert store.counts() == {"documents": 1, "chunks": 1}
    with pytest.raises(StorageError):
        store.delete_document("d")
    with pytest.raises(StorageError):
        store.add_document(doc("e", source="e.md"), chunks("b"), vecs(1), "m")
    store.close()
    assert Store(url).counts() == {"documents": 1, "chunks": 1}
    assert not open_store(url, Spaces(), Opening.PREFER_WRITABLE, index_folder=None).read_only
