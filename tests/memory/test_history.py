"""Every change made to the memory is recorded — what, from what to what, by whom, when —
in the change's own transaction, per space; ``memory-pipeline history`` prints it, a
chunk's page shows it, and it survives a restart. An agent's change over a real stdio MCP
client is recorded as the agent's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client
from starlette.testclient import TestClient

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.system import MemorySystem
from memory_pipeline.ui.app import build_app, cookie_name
from serving.harness import StoreLayout, stdio_params, structured
from tests.capture.helpers import cli
from tests.conftest import make_settings

TOKEN = "t0ken-for-the-tests"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def memory(root: Path, space: str = "default") -> MemorySystem:
    return MemorySystem(make_settings(root, space=space), embedder=HashingEmbedder())


def test_each_change_is_recorded_from_what_to_what_by_whom(tmp_path: Path) -> None:
    system = memory(tmp_path)
    try:
        doc = system.ingest_text("Redis was dropped for SQLite with a TTL.", "cache").doc_id
        system.set_chunk_tags(doc, 0, importance=0.9, actor="page")
        system.set_chunk_tags(doc, 0, importance=0.9, tags=["decision"], actor="mcp")
        [tags, importance] = system.history()  # newest first; what did not change: nothing
        assert (tags.field, tags.before, tags.after, tags.actor) == (
            "tags",
            [],
            ["decision"],
            "mcp",
        )
        assert (importance.before, importance.after, importance.actor) == (None, 0.9, "page")
        assert importance.what == "importance unset → 0.9"
        assert importance.at.tzinfo is not None and importance.at <= tags.at
        system.set_chunk_tags(doc, 0, knowledge_type="principle", tags=["decision"])
    finally:
        system.close()
    again = memory(tmp_path)  # a restart
    try:
        history = again.history()
        assert [c.field for c in history] == ["knowledge_type", "tags", "importance"]
        assert history[0].actor == "api" and history[0].after == "principle"
        assert again.delete_document(doc, actor="cli") == 1
        gone = again.history(doc_id=doc)[0]
        assert (gone.chunk_index, gone.field, gone.actor) == (None, "document", "cli")
        assert gone.what == "deleted: 'cache' (1 chunks)"
        with pytest.raises(ValueError, match="actor must be one of"):
            again.set_chunk_tags(
                again.ingest_text("another note", "n").doc_id, 0, importance=0.1, actor="x"
            )
    finally:
        again.close()


def test_a_space_reads_its_own_history_only(tmp_path: Path) -> None:
    ours = memory(tmp_path, "ours")
    theirs = ours.bound(ours.spaces.bound("theirs"))
    try:
        mine = ours.ingest_text("Our note.", "ours").doc_id
        other = theirs.ingest_text("Their note.", "theirs").doc_id
        ours.set_chunk_tags(mine, 0, importance=0.5)
        theirs.set_chunk_tags(other, 0, importance=0.7)
        assert [c.doc_id for c in ours.history()] == [mine]
        assert [c.doc_id for c in theirs.history()] == [other]
        assert ours.history(doc_id=other) == []
    finally:
        ours.close()


@pytest.mark.anyio
async def test_an_agents_change_over_mcp_is_recorded_as_the_agents(tmp_path: Path) -> None:
    layout = StoreLayout(tmp_path / "memory")
    env = layout.env()
    async with Client(stdio_params(env, layout.docs)) as client:
        stored = structured(
            await client.call_tool(
                "ingest_text", {"text": "Deploys go out on Tuesdays.", "title": "deploys"}
            )
        )
        doc = stored["results"][0]["doc_id"]
        structured(
            await client.call_tool(
                "set_chunk_tags", {"doc_id": doc, "chunk_index": 0, "importance": 0.8}
            )
        )
    done = cli("history", "--json", env=env)
    assert done.returncode == 0, done.stderr
    [change] = json.loads(done.stdout)
    assert (change["actor"], change["field"], change["after"]) == ("mcp", "importance", 0.8)
    text = cli("history", env=env).stdout
    assert f"mcp       document {doc} chunk 0: importance unset → 0.8" in text


def test_a_chunks_page_shows_its_history(tmp_path: Path) -> None:
    system = memory(tmp_path)
    try:
        doc = system.ingest_text("Deploys go out on Tuesdays.", "deploys").doc_id
        system.set_chunk_tags(doc, 0, importance=0.8, actor="mcp")
        app = build_app(system, token=TOKEN, host="127.0.0.1", port=8765)
        client = TestClient(app, base_url="http://127.0.0.1:8765")
        client.cookies.set(cookie_name(8765), TOKEN)
        page = client.get(f"/documents/{doc}").text
        assert "History (1)" in page and "mcp · importance unset → 0.8" in page
    finally:
        system.close()
