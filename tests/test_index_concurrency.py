"""Index updates and rebuilds beside a writer that deletes between the writer's reads.

Another connection deletes a document just before the index writer's N-th read
statement, for every N the writer runs: whatever the interleaving, the update
must succeed, publish a healthy version, and never serve the deleted chunks.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.store import Store
from memory_pipeline.store.engine import WRITE_OPTION
from memory_pipeline.system import MemorySystem
from tests.conftest import PG_SOCKET, _pg_admin, make_settings


def _open(settings: Settings) -> MemorySystem:
    return MemorySystem(settings, embedder=HashingEmbedder())


@contextmanager
def delete_before_read(
    system: MemorySystem, nth: int, action: Callable[[], None]
) -> Iterator[dict[str, int]]:
    """Run ``action`` (on another connection) just before the system's ``nth`` read."""
    seen = {"reads": 0, "fired": 0}

    def hook(conn: sa.Connection, _cursor: Any, statement: str, *_: Any) -> None:
        if conn.get_execution_options().get(WRITE_OPTION) or seen["fired"]:
            return
        if not statement.lstrip().upper().startswith("SELECT"):
            return
        seen["reads"] += 1
        if seen["reads"] == nth:
            seen["fired"] = 1
            action()

    sa.event.listen(system.store.engine, "before_cursor_execute", hook)
    try:
        yield seen
    finally:
        sa.event.remove(system.store.engine, "before_cursor_execute", hook)


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
    hits = system.query("lantern harbour", top_k=50, record_access=False).hits
    assert deleted_doc not in {h.doc_id for h in hits}


def _reads_of_one_run(backend: str, op: str, folder: Path) -> int:
    with fresh_settings(backend, folder) as settings:
        probe = _open(settings)
        _seed(probe, 3, "old")
        probe.update_index()
        _seed(probe, 3, "new")
        with delete_before_read(probe, 10**9, lambda: None) as seen:
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
            with delete_before_read(
                system, nth, lambda v=victim, o=other: o.delete_document(v)
            ) as seen:
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

    from memory_pipeline.index import reader as reader_module

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
    hits = system.query("lantern harbour new0", top_k=1, record_access=False).hits
    assert hits[0].doc_id == new_doc
