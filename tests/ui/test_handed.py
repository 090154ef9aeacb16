"""What the memory handed the agent: kept per space, bounded, the query redacted, and
listed by the viewer — a real MCP client's search over stdio, then the page."""

from __future__ import annotations

import re
import secrets
import string
from pathlib import Path

import pytest
from mcp import Client
from starlette.testclient import TestClient

from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.spaces import Spaces
from memory_pipeline.store import Store
from memory_pipeline.store.handed import HandedHit
from memory_pipeline.system import MemorySystem
from memory_pipeline.ui.app import build_app, cookie_name
from serving.harness import StoreLayout, stdio_params, structured

pytestmark = pytest.mark.anyio
TOKEN = "t0ken-for-the-tests"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_a_space_keeps_its_latest_records_only(db_url: str) -> None:
    store = Store(db_url, spaces=Spaces.bound("ours"))
    theirs = store.bound(Spaces.bound("theirs"))
    try:
        theirs.record_handed("search", query="their question")
        for n in range(7):
            hit = HandedHit("doc", n, 0.5, "title")
            store.record_handed("search", query=f"question {n}", hits=[hit], keep=5)
        kept = store.handed(100)
        assert [r.query for r in kept] == [f"question {n}" for n in (6, 5, 4, 3, 2)]
        assert kept[0].hits == (HandedHit("doc", 6, 0.5, "title"),)
        assert [r.query for r in theirs.handed(100)] == ["their question"]
    finally:
        store.close()


async def test_an_agents_search_is_listed_with_its_hits_and_its_query_redacted(
    tmp_path: Path,
) -> None:
    layout = StoreLayout(tmp_path)
    key = "ghp_" + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(36))
    query = f"why did we drop Redis (the token {key} leaked)?"
    async with Client(stdio_params(layout.env(), layout.docs)) as client:
        stored = await client.call_tool(
            "ingest_text",
            {
                "text": "We dropped Redis for the session cache: SQLite was enough.",
                "title": "cache",
            },
        )
        assert not stored.is_error
        found = structured(await client.call_tool("hybrid_search", {"query": query}))["chunks"]
    assert found
    settings = Settings(
        db_path=layout.db, index_path=layout.index, archive_path=layout.archive, model="hashing"
    )
    memory = MemorySystem(settings, embedder=HashingEmbedder())
    try:
        [record] = memory.store.handed(10)
        assert record.kind == "search" and key not in (record.query or "")
        assert "why did we drop Redis" in (record.query or "")
        assert [(h.doc_id, h.chunk_index) for h in record.hits] == [
            (c["doc_id"], c["chunk_index"]) for c in found
        ]
        client = TestClient(
            build_app(memory, token=TOKEN, host="127.0.0.1", port=8765),
            base_url="http://127.0.0.1:8765",
        )
        client.cookies.set(cookie_name(8765), TOKEN)
        page = client.get("/handed").text
        assert "why did we drop Redis" in page and key not in page
        assert re.search(rf'href="documents/{found[0]["doc_id"]}\?chunk=', page)
        assert f"{record.hits[0].score:.4f}" in page
    finally:
        memory.close()


def test_the_page_says_what_appears_there_before_anything_did(tmp_path: Path) -> None:
    settings = Settings(
        db_path=tmp_path / "m.db", index_path=tmp_path / "i", archive_path=tmp_path / "a"
    )
    memory = MemorySystem(settings, embedder=HashingEmbedder())
    try:
        client = TestClient(
            build_app(memory, token=TOKEN, host="127.0.0.1", port=8765),
            base_url="http://127.0.0.1:8765",
        )
        client.cookies.set(cookie_name(8765), TOKEN)
        assert "Nothing handed to an agent yet" in client.get("/handed").text
    finally:
        memory.close()
