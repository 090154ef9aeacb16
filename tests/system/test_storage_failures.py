"""When storage lets a memory down: a deleted index folder, a full disk, a read-only file.

Each failure must reach the user as a message that says what happened, that nothing was
lost, and what to do (CLI: one ``error:`` line and a non-zero exit; MCP: a tool error
while the server keeps serving), never as a traceback or as an answer that looks fine.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from mcp import Client

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.system import MemorySystem
from serving.harness import StoreLayout, error_text, stdio_params, structured
from serving.server import build_server
from tests.cli.test_commands import run
from tests.conftest import make_settings

NOTES = {
    "fusion.md": "# Fusion\n\nReciprocal rank fusion adds one over k plus rank.",
    "bm25.md": "# BM25\n\nOkapi BM25 ranks documents by term frequency.",
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder for one memory, the environment cleared of other memories' settings."""
    for key in list(os.environ):
        if key.startswith(("HYBRID_RAG_", "MEMORY_PIPELINE_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HYBRID_RAG_ARCHIVE_PATH", str(tmp_path / "archive"))
    monkeypatch.setenv("HYBRID_RAG_MODEL_CACHE", str(tmp_path / "models"))
    monkeypatch.chdir(tmp_path)
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in NOTES.items():
        (docs / name).write_text(text, encoding="utf-8")
    return tmp_path


def cli(home: Path, *args: str) -> list[str]:
    command, *rest = args
    storage = ["--db", str(home / "memory.db"), "--index", str(home / "indices")]
    return [command, *storage, "--model", "hashing", *rest]


def ingest(home: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> None:
    notes = sorted(str(p) for p in (home / "docs").iterdir())
    code, _, err = run(cli(home, "ingest", *flags, *notes), capsys)
    assert code == 0, err


# ------------------------------------------------------------- a deleted index folder
def test_search_without_its_index_folder_says_so_and_how_to_fix(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ingest(home, capsys)
    shutil.rmtree(home / "indices")
    code, out, err = run(cli(home, "search", "rank fusion"), capsys)
    assert (code, out) == (2, "")
    assert "no published index" in err and "2 chunks" in err
    assert "run rebuild-index" in err
    code, _, err = run(cli(home, "rebuild-index"), capsys)
    assert code == 0, err
    code, out, err = run(cli(home, "search", "rank fusion", "--no-access"), capsys)
    assert code == 0 and "fusion" in out.lower(), err


@pytest.mark.parametrize("ingested", [False, True], ids=["empty", "queued-only"])
def test_search_without_an_index_is_fine_when_it_sees_everything(
    ingested: bool, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty memory has nothing to find; chunks stored with --no-index are all queued
    and scored directly: neither is an index that went missing."""
    if ingested:
        ingest(home, capsys, "--no-index")
    code, out, err = run(cli(home, "search", "rank fusion", "--no-access"), capsys)
    assert code == 0, err
    assert ("fusion" in out.lower()) if ingested else (out == "no results\n")
    assert "no published index" not in err


@pytest.mark.anyio
async def test_mcp_search_without_its_index_folder_is_a_tool_error(
    system: MemorySystem, tmp_path: Path
) -> None:
    system.ingest_text("Reciprocal rank fusion adds one over k plus rank.", "fusion")
    system.update_index()
    shutil.rmtree(system.settings.index_path)
    async with Client(
        build_server(system, roots=[tmp_path], cwd=tmp_path, tool_set="all")
    ) as client:
        missing = await client.call_tool("hybrid_search", {"query": "rank fusion"})
        rebuilt = await client.call_tool("rebuild_index", {})
        found = await client.call_tool("hybrid_search", {"query": "rank fusion"})
    assert missing.is_error
    assert "no published index" in error_text(missing)
    assert "call rebuild_index" in error_text(missing)
    assert not rebuilt.is_error
    assert [c["title"] for c in structured(found)["chunks"]] == ["fusion"]


# ------------------------------------------------------------ read-only, full, failing
@contextmanager
def read_only(*paths: Path) -> Iterator[None]:
    """Nobody can write ``paths`` (files and folders) meanwhile: chmod for a user; for root,
    whom permissions do not stop, the immutable attribute (``chattr +i``)."""
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in paths}
        for p in paths:
            p.chmod(0o555 if p.is_dir() else 0o444)
        try:
            yield
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
        return
    if not shutil.which("chattr"):
        pytest.skip("running as root without chattr: no way to make a file read-only here")
    done = subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"running as root and chattr +i is refused here: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", *map(str, paths)], check=True)


@pytest.fixture
def stored(home: Path) -> Path:
    """Two notes stored and indexed; every connection closed (no -wal file left behind)."""
    settings = make_settings(home).replace(model="hashing")
    system = MemorySystem(settings, embedder=HashingEmbedder())
    system.ingest(sorted((home / "docs").iterdir()))
    system.close()
    assert not (home / "memory.db-wal").exists()
    return home


def sql(db: Path, statement: str) -> list[Any]:
    """One statement on its own connection, committed and closed (no -wal left open)."""
    with closing(sqlite3.connect(db)) as conn, conn:
        return conn.execute(statement).fetchall()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def no_traceback(err: str) -> None:
    assert "Traceback" not in err and err.startswith("error: ") and err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (("stats", "--json"), '"chunks": 2'),
        (("health",), "healthy"),
        (("search", "rank fusion", "--no-access"), "fusion"),
        (("search", "rank fusion"), "fusion"),
    ],
    ids=["stats", "health", "search-no-access", "search"],
)
def test_reading_commands_work_on_a_read_only_memory(
    args: tuple[str, ...], expect: str, stored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = stored / "memory.db"
    before = digest(db)
    with read_only(db, stored):
        code, out, err = run(cli(stored, *args), capsys)
    assert code == 0, err
    assert expect in out.lower()
    assert "Traceback" not in err
    counted = args == ("search", "rank fusion")
    assert err.count("not counted as an access") == (1 if counted else 0), err
    assert digest(db) == before and not (stored / "memory.db-wal").exists()


def test_reading_commands_do_not_create_or_migrate_an_up_to_date_database(
    stored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reading command opens the file read-only: on a writable one it changes nothing
    either (no migration, no journal-mode switch: the bytes stay the same)."""
    db = stored / "memory.db"
    sql(db, "PRAGMA journal_mode=DELETE")
    before = digest(db)
    code, _, err = run(cli(stored, "stats"), capsys)
    assert code == 0, err
    assert digest(db) == before
    assert sql(db, "PRAGMA journal_mode") == [("delete",)]


def test_writing_to_a_read_only_memory_is_one_line_saying_what_to_do(
    stored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    note = stored / "new.md"
    note.write_text("# New\n\nViolins and cellos.", encoding="utf-8")
    db = stored / "memory.db"
    before = digest(db)
    with read_only(db, stored):
        code, out, err = run(cli(stored, "ingest", str(note)), capsys)
    assert (code, out) == (2, "")
    no_traceback(err)
    assert str(db) in err and "cannot be written" in err
    assert "nothing was lost" in err and "permissions" in err
    assert digest(db) == before


def test_a_read_only_database_that_needs_a_migration_says_so(
    stored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = stored / "memory.db"
    sql(db, "UPDATE alembic_version SET version_num = '0004'")
    with read_only(db, stored):
        code, out, err = run(cli(stored, "stats"), capsys)
    assert (code, out) == (2, "")
    no_traceback(err)
    assert "schema" in err and "0004" in err and "cannot be written" in err


@contextmanager
def page_limit() -> Iterator[None]:
    """Every new SQLite connection may not grow its file: a write that needs a new page
    fails with SQLITE_FULL ("database or disk is full"), as on a full disk."""

    def limit(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.execute("PRAGMA max_page_count = 1")  # raised to the file's size

    sa.event.listen(sa.pool.Pool, "connect", limit)
    try:
        yield
    finally:
        sa.event.remove(sa.pool.Pool, "connect", limit)


def test_a_full_disk_during_ingest_is_one_line_and_loses_nothing(
    stored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    note = stored / "new.md"
    note.write_text("# New\n\n" + "Violins and cellos. " * 400, encoding="utf-8")
    with page_limit():
        code, out, err = run(cli(stored, "ingest", str(note)), capsys)
    assert (code, out) == (2, "")
    no_traceback(err)
    assert "full" in err and str(stored / "memory.db") in err
    assert "nothing was lost" in err and "free some space" in err.lower()
    code, out, err = run(cli(stored, "stats", "--json"), capsys)
    assert code == 0 and '"documents": 2' in out, err
    code, out, err = run(cli(stored, "ingest", str(note)), capsys)
    assert code == 0 and "ingested" in out, err


def test_an_archive_that_cannot_be_written_is_one_line_and_loses_nothing(
    stored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Files beside the database (here the forgetting archive) fail like the database:
    one line saying what and where, and no chunk leaves the memory unarchived."""
    archive = stored / "archive"
    archive.mkdir()
    forget = ("forget", "--apply", "--force", "--score-threshold", "1", "--grace-days", "0")
    with read_only(archive):
        code, out, err = run(cli(stored, *forget), capsys)
    assert code == 2, err
    no_traceback(err)
    assert str(archive / "chunks_archive.jsonl") in err and "cannot be written" in err
    assert "nothing was lost" in err
    code, out, err = run(cli(stored, "stats", "--json"), capsys)
    assert code == 0 and '"chunks": 2' in out, err
    code, out, err = run(cli(stored, *forget), capsys)
    assert code == 0, err
    code, out, err = run(cli(stored, "stats", "--json"), capsys)
    assert code == 0 and '"chunks": 0' in out, err


def test_a_full_disk_while_publishing_the_index_is_one_line_and_loses_nothing(
    stored: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index files are written by Python; their ENOSPC is simulated where they meet
    the OS (``os.fsync``, which reports a full disk on delayed allocation)."""
    note = stored / "new.md"
    note.write_text("# New\n\nViolins and cellos.", encoding="utf-8")
    code, _, err = run(cli(stored, "ingest", "--no-index", str(note)), capsys)
    assert code == 0, err
    published = (stored / "indices" / "CURRENT").read_text()

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as m:
        m.setattr(os, "fsync", full)
        code, out, err = run(cli(stored, "update-index"), capsys)
    assert (code, out) == (2, "")
    no_traceback(err)
    assert "full" in err and str(stored / "indices") in err and "nothing was lost" in err
    assert (stored / "indices" / "CURRENT").read_text() == published
    code, out, err = run(cli(stored, "search", "violins cellos", "--no-access"), capsys)
    assert code == 0 and "violins" in out.lower(), err
    code, _, err = run(cli(stored, "update-index"), capsys)
    assert code == 0, err


@pytest.mark.anyio
async def test_mcp_a_full_disk_is_a_tool_error_and_the_server_keeps_serving(
    system: MemorySystem, tmp_path: Path
) -> None:
    system.ingest_text("Reciprocal rank fusion adds one over k plus rank.", "fusion")
    system.update_index()
    long = "Violins and cellos. " * 400
    async with Client(build_server(system, roots=[tmp_path], cwd=tmp_path)) as client:
        with page_limit():
            system.store.engine.dispose()  # every connection from now on is limited
            full = await client.call_tool("ingest_text", {"text": long, "title": "strings"})
            found = await client.call_tool("hybrid_search", {"query": "rank fusion"})
        system.store.engine.dispose()
        again = await client.call_tool("ingest_text", {"text": long, "title": "strings"})
    assert full.is_error
    text = error_text(full)
    assert "full" in text and "nothing was lost" in text and "Traceback" not in text
    assert [c["title"] for c in structured(found)["chunks"]] == ["fusion"]
    assert structured(again)["results"][0]["status"] == "ingested"


@pytest.mark.anyio
async def test_mcp_server_on_a_read_only_database_serves_reads_and_refuses_writes(
    tmp_path: Path,
) -> None:
    layout = StoreLayout(tmp_path)
    env = layout.env()
    (layout.docs / "note.md").write_text("# Fusion\n\nReciprocal rank fusion.", encoding="utf-8")
    settings = make_settings(tmp_path).replace(model="hashing")
    system = MemorySystem(settings, embedder=HashingEmbedder())
    system.ingest([layout.docs / "note.md"])
    system.close()
    with read_only(layout.db, tmp_path):
        async with Client(stdio_params(env, layout.docs)) as client:
            found = await client.call_tool("hybrid_search", {"query": "rank fusion"})
            stats = await client.call_tool("get_system_stats", {})
            write = await client.call_tool("ingest_text", {"text": "More.", "title": "more"})
            after = await client.call_tool("hybrid_search", {"query": "rank fusion"})
    assert [c["title"] for c in structured(found)["chunks"]] == ["Fusion"]
    assert structured(stats)["documents"] == 1
    assert write.is_error
    assert "cannot be written" in error_text(write) and "nothing was lost" in error_text(write)
    assert structured(after)["chunks"]


def test_a_search_that_cannot_record_its_access_still_answers(
    stored: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Only the file is read-only: SQLite opens it for reading without a word, and the
    first write (the access count) is refused. The answer comes anyway, with a note."""
    from memory_pipeline.system import Opening

    db = stored / "memory.db"
    settings = make_settings(stored).replace(model="hashing")
    with read_only(db):
        system = MemorySystem(settings, embedder=HashingEmbedder(), opening=Opening.PREFER_WRITABLE)
        try:
            results = [system.query("rank fusion") for _ in range(2)]
        finally:
            system.close()
    assert all(r.hits for r in results)
    for result in results:
        assert any(
            n.startswith("this search is not counted as an access") for n in result.stats.notes
        )
    warned = [r for r in caplog.records if "not counted as an access" in r.getMessage()]
    assert len(warned) == 1
    assert sql(db, "SELECT SUM(access_count) FROM chunks") == [(0,)]


def test_search_before_any_index_is_not_fooled_by_a_delete_meanwhile(
    system: MemorySystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no published index every stored chunk is queued. A document deleted while a
    search checks that (its count read, the queue not yet) is no index gone missing: the
    check reads the chunks and the queue at one instant, so it never sees one without the
    other. (The stress test's checker met this race once in a few hundred checks.)"""
    ids = [system.ingest_text(f"note {n} about rank fusion", f"n{n}").doc_id for n in range(3)]
    doomed = ids[0]
    store = type(system.store)
    # Whichever read the check makes first, the delete commits right after it.
    for name in ("counts", "unqueued_chunks"):
        original = getattr(store, name, None)

        def then_delete(self: Any, *args: Any, _original: Any = original) -> Any:
            seen = _original(self, *args)
            if self.get_document(doomed) is not None:
                self.delete_document(doomed)  # another process, committed meanwhile
            return seen

        monkeypatch.setattr(store, name, then_delete, raising=False)
    result = system.query(
        "rank fusion", system.settings.search_request(top_k=5, record_access=False)
    )
    assert system.store.get_document(doomed) is None  # the delete did happen meanwhile
    assert {h.title for h in result.hits} == {"n1", "n2"}
