"""Several processes opening (creating and migrating) one new database at the same instant."""

from __future__ import annotations

import multiprocessing as mp
import traceback
import uuid
from pathlib import Path

from memory_pipeline.store import Store
from tests.conftest import PG_SOCKET, _pg_admin

PROCESSES = 4
ROUNDS = 8


def _open_at_once(url: str, barrier: mp.synchronize.Barrier, errors: mp.Queue) -> None:  # type: ignore[type-arg]
    try:
        barrier.wait(timeout=60)
        store = Store(url)
        store.counts()
        store.close()
    except Exception:
        errors.put(traceback.format_exc())


def _race(url: str) -> list[str]:
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(PROCESSES)
    errors: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    procs = [
        ctx.Process(target=_open_at_once, args=(url, barrier, errors)) for _ in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert all(p.exitcode == 0 for p in procs)
    return found


def test_new_sqlite_file_opened_by_several_processes(tmp_path: Path) -> None:
    for n in range(ROUNDS):
        errors = _race(f"sqlite:///{tmp_path / f'new{n}.db'}")
        assert not errors, errors[0]


def test_new_postgresql_database_opened_by_several_processes(pg_available: bool) -> None:
    for _ in range(ROUNDS):
        name = f"mp_test_{uuid.uuid4().hex[:12]}"
        with _pg_admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        try:
            errors = _race(f"postgresql+psycopg:///{name}?host={PG_SOCKET}")
            assert not errors, errors[0]
        finally:
            with _pg_admin() as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
