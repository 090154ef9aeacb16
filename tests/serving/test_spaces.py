"""An MCP server bound to space A, over a memory whose space B holds other notes.

Every tool is called with B's doc ids, chunk ids, tags and texts, and with filters that
name B: nothing of B comes back or changes, and each error reads exactly like the one
for an id that was never stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.spaces import Spaces
from memory_pipeline.system import MemorySystem
from serving.harness import error_text, structured
from serving.server import build_server
from tests.conftest import make_settings

MISSING = "f" * 32
B_TEXT = "Project B's confidential lantern budget for the harbour survey."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[tuple[MemorySystem, MemorySystem, str]]:
    settings = make_settings(tmp_path)
    a = MemorySystem(settings, embedder=HashingEmbedder()).bound(Spaces.bound("project-a"))
    b = MemorySystem(settings, embedder=HashingEmbedder()).bound(Spaces.bound("project-b"))
    a.ingest_text("Project A lights the harbour lanterns at dusk.", "a-note", {"tags": ["a"]})
    secret = b.ingest_text(B_TEXT, "b-secret", {"tags": ["team-b"]}).doc_id
    a.update_index()
    yield a, b, secret
    a.close()
    b.close()


def _b_state(b: MemorySystem, secret: str) -> Any:
    chunks = b.get_document_chunks(secret)
    return [(c.id, c.content, c.importance, c.knowledge_type, c.tags) for c in chunks]


def _text(result: Any) -> str:
    return json.dumps(structured(result), ensure_ascii=False) if not result.is_error else ""


@pytest.mark.anyio
async def test_every_tool_bound_to_a_sees_nothing_of_b(
    memory: tuple[MemorySystem, MemorySystem, str], tmp_path: Path
) -> None:
    a, b, secret = memory
    before = _b_state(b, secret)
    [b_chunk] = b.get_document_chunks(secret)

    async def same_error(tool: str, args_for: Any) -> None:
        seen = []
        for doc_id in (secret, MISSING):
            result = await client.call_tool(tool, args_for(doc_id))
            assert result.is_error, (tool, doc_id)
            seen.append(error_text(result).replace(doc_id, "<id>"))
        assert seen[0] == seen[1], tool

    async with Client(build_server(a, roots=[tmp_path], cwd=tmp_path, tool_set="all")) as client:
        searches = [
            {"query": B_TEXT},
            {"query": "confidential budget", "tags": ["team-b"]},
            {"query": "lantern", "filters": {"doc_ids": [secret]}},
            {"query": "lantern", "memory_rerank": True, "diversify": True, "top_k": 50},
        ]
        for args in searches:
            out = structured(await client.call_tool("hybrid_search", args))
            assert all(h["doc_id"] != secret for h in out["chunks"]), args
            assert "confidential" not in json.dumps(out)
        await same_error("get_document_chunks", lambda d: {"doc_id": d})
        await same_error("get_document_chunks", lambda d: {"doc_id": d, "chunk_index": 0})
        await same_error("set_chunk_tags", lambda d: {"doc_id": d, "chunk_index": 0, "tags": []})
        await same_error("delete_document", lambda d: {"doc_id": d})
        await same_error("restore_archived", lambda d: {"doc_id": d})
        found = structured(await client.call_tool("find_by_tag", {"tag": "team-b"}))
        assert found["total"] == 0
        stats = _text(await client.call_tool("get_system_stats", {}))
        assert json.loads(stats)["spaces"] == "space 'project-a'"  # the agent sees its binding
        assert "team-b" not in stats and '"documents": 1' in stats.replace(" ", " ")
        forget = structured(
            await client.call_tool("run_forgetting_batch", {"score_threshold": 1.0})
        )
        assert forget["live_chunks"] == 1 and secret not in json.dumps(forget)
        health = _text(await client.call_tool("index_health", {}))
        assert "confidential" not in health
        # Writes land in A: a text with B's exact words is A's own document.
        copy = structured(
            await client.call_tool("ingest_text", {"text": B_TEXT, "title": "a-copy"})
        )
        assert copy["results"][0]["doc_id"] != secret
        # … embedded, as far as A can tell: B's vector is reused without saying so.
        assert (copy["results"][0]["embedded"], copy["results"][0]["reused_vectors"]) == (1, 0)
    assert _b_state(b, secret) == before
    assert b_chunk.id in {c.id for c in b.get_document_chunks(secret)}
    assert {c.doc_id for c in b.find_by_tag("team-b")} == {secret}


@pytest.mark.anyio
async def test_a_run_of_b_is_no_such_run_to_a(
    memory: tuple[MemorySystem, MemorySystem, str], tmp_path: Path
) -> None:
    a, b, secret = memory
    archived = b.run_forgetting_batch(
        dry_run=False, score_threshold=1.0, max_fraction=1.0, grace_days=0
    )
    empty = b.run_forgetting_batch(dry_run=False, score_threshold=0.0)
    assert (archived.archived, empty.archived) == (1, 0)
    seen = []
    async with Client(build_server(a, roots=[tmp_path], cwd=tmp_path, tool_set="all")) as client:
        for run_id in (archived.run_id, empty.run_id, "20261202T000000Z-0123abcd"):
            assert run_id is not None
            result = await client.call_tool("restore_archived", {"run_id": run_id})
            assert result.is_error, run_id
            seen.append(error_text(result).replace(run_id, "<id>"))
    assert seen[0] == seen[1] == seen[2] and "no such forgetting run" in seen[0]
    assert b.restore_archived(run_id=archived.run_id).restored == 1
    assert [c.doc_id for c in b.get_document_chunks(secret)] == [secret]


@pytest.mark.anyio
async def test_two_real_servers_share_one_memory_each_in_its_space(tmp_path: Path) -> None:
    """``python -m serving`` per project over one store: bound by variable or by flag."""
    from serving.harness import StoreLayout, stdio_params

    layout = StoreLayout(tmp_path / "memory")
    cwd = layout.docs
    a_env = layout.env(HYBRID_RAG_SPACE="project-a", HYBRID_RAG_READ_SPACES="shared")
    shared_env = layout.env(HYBRID_RAG_SPACE="shared")
    async with Client(stdio_params(shared_env, cwd)) as shared:
        await shared.call_tool(
            "ingest_text", {"text": "Shared principle: publish atomically.", "title": "p"}
        )
    async with Client(stdio_params(layout.env(), cwd, "--space", "project-b")) as b:
        await b.call_tool("ingest_text", {"text": B_TEXT, "title": "b-secret"})
        hits = structured(await b.call_tool("hybrid_search", {"query": "publish atomically"}))
        assert [h["title"] for h in hits["chunks"]] == ["b-secret"]  # B does not read shared
    async with Client(stdio_params(a_env, cwd)) as a:
        out = structured(await a.call_tool("hybrid_search", {"query": "publish atomically"}))
        assert [h["title"] for h in out["chunks"]] == ["p"]  # A reads shared, not B
        out = structured(await a.call_tool("hybrid_search", {"query": B_TEXT}))
        assert all(h["title"] != "b-secret" for h in out["chunks"])
        result = await a.call_tool("delete_document", {"doc_id": "0" * 32})
        assert result.is_error
