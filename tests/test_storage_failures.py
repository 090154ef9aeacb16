"""When storage lets a memory down: a deleted index folder, a full disk, a read-only file.

Each failure must reach the user as a message that says what happened, that nothing was
lost, and what to do (CLI: one ``error:`` line and a non-zero exit; MCP: a tool error
while the server keeps serving), never as a traceback or as an answer that looks fine.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from mcp import Client

from memory_pipeline.cli import main
from memory_pipeline.system import MemorySystem
from serving.harness import error_text, structured
from serving.server import build_server

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


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


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
    async with Client(build_server(system, roots=[tmp_path], cwd=tmp_path)) as client:
        missing = await client.call_tool("hybrid_search", {"query": "rank fusion"})
        rebuilt = await client.call_tool("rebuild_index", {})
        found = await client.call_tool("hybrid_search", {"query": "rank fusion"})
    assert missing.is_error
    assert "no published index" in error_text(missing)
    assert "call rebuild_index" in error_text(missing)
    assert not rebuilt.is_error
    assert [c["title"] for c in structured(found)["chunks"]] == ["fusion"]
