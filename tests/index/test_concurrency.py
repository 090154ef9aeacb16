"""Index updates and rebuilds interleaved with other processes at every read.

Another connection deletes a document just before the index writer's N-th read
statement, for every N the writer runs: whatever the interleaving, the update
must succeed, publish a healthy version, and never serve the deleted chunks. And
another process publishes a version just before a search's N-th read of the store
or the index, for every N: the search still finds every live note.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.spaces import DEFAULT_SPACE, Spaces
from memory_pipeline.store import Store
from memory_pipeline.store.engine import WRITE_OPTION
from memory_pipeline.system import MemorySystem
from tests.conftest import PG_SOCKET, _pg_admin, make_settings


def _open(settings: Settings) -> MemorySystem:
    return MemorySystem(settings, embedder=HashingEmbedder())


@contextmanager
def before_read(
    system: MemorySystem, nth: int, action: Callable[[], object], *, index_reads: bool = False
) -> Iterator[dict[str, int]]:
    """Run ``action`` (on another connection) just before the system's ``nth`` read: a
    SELECT of its store, or with ``index_reads`` also a look at the published index."""
    seen = {"reads": 0, "fired": 0}

    def read() -> None:
        seen["reads"] += 1
        if seen["reads"] == nth and not seen["fired"]:
            seen["fired"] = 1
            action()

    def hook(conn: sa.Connection, _cursor: Any, statement: str, *_: Any) -> None:
        if conn.get_execution_options().get(WRITE_OPTION) or seen["fired"]:
            return
        if statement.lstrip().upper().startswith("SELECT"):
            read()

    source = system.reader
    current = source.current

    def looked_up() -> Any:
        read()
        return current()

    sa.event.listen(system.store.engine, "before_cursor_execute", hook)
    if index_reads:
        source.current = looked_up  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        sa.event.remove(system.store.engine, "before_cursor_execute", hook)
        if index_reads:
            del source.current


@contextmanager
def paused_before(obj: object, method: str, meanwhile: Callable[[], bool]) -> Iterator[list[bool]]:
    """Run ``meanwhile`` each time just before ``obj``'s ``method`` does; yields its answers."""
    answers: list[bool] = []
    original = getattr(obj, method)

    def paused(*args: Any, **kwargs: Any) -> Any:
        answers.append(meanwhile())
        return original(*args, **kwargs)

    setattr(obj, method, paused)
    try:
        yield answers
    finally:
        delattr(obj, method)


@contextmanager
def fresh_settings(backend: str, folder: Path) -> Iterator[Settings]:
    """Settings for an empty memory in ``folder`` (a new PostgreSQL database when asked)."""
    folder.mkdir(parents=True, exist_ok=True)
    settings = make_settings(folder)
    if backend == "sqlite":
        yield settings
        return
    name = f"mp_test_{uuid.uuid4().hex[:12]}"
    with _pg_admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield settings.replace(database_url=f"postgresql+psycopg:///{name}?host={PG_SOCKET}")
    finally:
        with _pg_admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "postgresql":
        request.getfixturevalue("pg_available")
    return str(request.param)


def _seed(system: MemorySystem, n: int, prefix: str) -> list[str]:
    return [
        system.ingest_text(
            f"{prefix} note {i}: lantern harbour {prefix}{i}", f"{prefix}-{i}"
        ).doc_id
        for i in range(n)
    ]


def _assert_consistent(system: MemorySystem, deleted_doc: str) -> None:
    report = system.index_health()
    errors = [f for f in report.findings if f.severity == "error"]
    assert not errors, [f.message for f in errors]
    hits = system.query(
        "lantern harbour", system.settings.search_request(top_k=50, record_access=False)
    ).hits
    assert deleted_doc not in {h.doc_id for h in hits}


def _reads_of_one_run(backend: str, op: str, folder: Path) -> int:
    with fresh_settings(backend, folder) as settings:
        probe = _open(settings)
        _seed(probe, 3, "old")
        probe.update_index()
        _seed(probe, 3, "new")
        with before_read(probe, 10**9, lambda: None) as seen:
            getattr(probe, f"{op}_index")()
        probe.close()
    return seen["reads"]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
@pytest.mark.parametrize("op", ["update", "rebuild"])
def test_delete_between_any_two_reads_of_the_writer(backend: str, op: str, tmp_path: Path) -> None:
    total_reads = _reads_of_one_run(backend, op, tmp_path / "probe")
    assert total_reads >= 2
    for nth in range(1, total_reads + 1):
        with fresh_settings(backend, tmp_path / f"run{nth}") as settings:
            system = _open(settings)
            other = Store(settings.url)
            _seed(system, 3, "old")
            system.update_index()
            victim = _seed(system, 3, "new")[1]
            with before_read(system, nth, functools.partial(other.delete_document, victim)) as seen:
                result = getattr(system, f"{op}_index")()
            assert seen["fired"], f"read {nth} never happened"
            assert result.kind in {"update", "rebuild"}
            # The delete that raced this run is taken in by the next one.
            system.update_index()
            _assert_consistent(system, victim)
            other.close()
            system.close()


def test_a_change_committed_late_with_a_lower_seq_stays_queued(pg_url: str) -> None:
    """PostgreSQL hands out queue numbers at insert, not at commit: clear only what was read."""
    from memory_pipeline.store.schema import IndexChange

    store = Store(pg_url)
    with store.engine.connect() as slow:
        slow.execute(sa.insert(IndexChange).values(chunk_id=10**6, op="add"))  # draws the lower seq
        with store.write() as s:
            s.execute(sa.insert(IndexChange).values(chunk_id=10**6 + 1, op="add"))
        taken_in = store.pending_changes()
        assert taken_in.adds.tolist() == [10**6 + 1]
        slow.commit()
    store.clear_changes(taken_in.seqs)
    assert store.pending_changes().adds.tolist() == [10**6]
    store.close()


def test_a_reused_inode_does_not_serve_a_stale_segment(
    system: MemorySystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    """File systems reuse the inode numbers of deleted files: a reader that cached
    segments by inode alone served an old segment under a new version (found by the
    stress test as "dense and sparse disagree ... only sparse")."""
    import os

    from memory_pipeline.index.backends.local import reader as reader_module

    real_stat = os.stat

    def same_inode(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        st = real_stat(path, *args, **kwargs)
        fields = list(st)
        fields[1] = 42  # st_ino: every segment file "reuses" one inode
        return os.stat_result(fields)

    monkeypatch.setattr(reader_module.os, "stat", same_inode)
    _seed(system, 2, "old")
    system.update_index()
    assert system.reader.current() is not None
    new_doc = _seed(system, 1, "new")[0]
    system.rebuild_index()  # one new segment file, seg000002
    version = system.reader.current()
    assert version is not None
    assert len(version.member_ids()) == len(system.store.all_ids()) == 3
    hits = system.query(
        "lantern harbour new0", system.settings.search_request(top_k=1, record_access=False)
    ).hits
    assert hits[0].doc_id == new_doc


@pytest.mark.parametrize("index_backend", ["local", "qdrant", "chroma"])
def test_a_live_note_is_found_whenever_another_process_publishes(
    index_backend: str, tmp_path: Path
) -> None:
    """A server bound to its space (another space holds chunks, so its searches are
    restricted to its ids) searches for a note that another process ingested and has
    not indexed yet; that process publishes a version holding the note and clears
    it from the queue just before the search's N-th read (the store or the index),
    for every N. Then it publishes with the search run between its own steps: after
    publishing, before clearing the queue; after clearing, before recording the
    version. Every search finds the note."""
    settings = make_settings(tmp_path, backend=index_backend)
    writer = _open(settings)
    writer.bound(Spaces.bound("other")).ingest_text(
        "Walruses bask on the northern shore.", "walrus"
    )
    _seed(writer, 3, "old")
    writer.update_index()
    server = MemorySystem(settings, embedder=HashingEmbedder()).bound(Spaces.bound(DEFAULT_SPACE))

    def note(n: int) -> tuple[str, str]:
        text = f"Penguin {n} waddles across floe{n} and hums tune{n}."
        return writer.ingest_text(text, f"penguin-{n}").doc_id, text

    def found(doc_id: str, text: str) -> bool:
        return doc_id in {
            h.doc_id
            for h in server.query(text, server.settings.search_request(record_access=False)).hits
        }

    assert found(*note(0))  # the server has searched: its index and its space's ids loaded
    lost, nth = [], 0
    while True:
        nth += 1
        doc_id, text = note(nth)
        with before_read(server, nth, writer.update_index, index_reads=True) as seen:
            hit = found(doc_id, text)
        if not seen["fired"]:  # past the search's last read
            break
        if not hit:
            lost.append(nth)
    assert nth > 4, f"a search made only {nth - 1} reads"
    assert not lost, f"published before read {lost} of {nth - 1}: the live note was not found"

    for step in ("clear_changes", "record_index_version"):
        writer.update_index()
        assert found(doc_id, text)  # the server knows its space's ids as they are now
        doc_id, text = note(100 + len(step))
        with paused_before(writer.store, step, functools.partial(found, doc_id, text)) as answers:
            writer.update_index()
        assert answers == [True], f"searched before the updater's {step}"
    server.close()
    writer.close()
