"""Clients on either protocol revision list and call the tools, over stdio and HTTP.

The SDK's client picks the revision with ``mode``: ``"auto"`` (its default) asks
``server/discover`` first and adopts the newest revision both sides speak
(2026-07-28, stateless: no ``initialize`` handshake); ``"legacy"`` runs the
``initialize`` handshake, which negotiates 2025-11-25. Each client stores a note
with ``ingest_text`` and finds it with ``hybrid_search`` on a server started with
the default (``core``) tool set.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client

from serving.harness import StoreLayout, free_port, http_server, stdio_params, structured

pytestmark = pytest.mark.anyio

CORE = {"hybrid_search", "get_document_chunks", "ingest_text", "delete_document"}
#: The client's ``mode`` -> the revision it must end up speaking.
MODES = {"auto": "2026-07-28", "legacy": "2025-11-25"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def connected(transport: str, layout: StoreLayout, mode: str) -> AsyncIterator[Client]:
    env = layout.env(HYBRID_RAG_TOOLS="core")
    if transport == "stdio":
        async with Client(stdio_params(env, layout.docs), mode=mode) as client:
            yield client
    else:
        with http_server(env, layout.docs, free_port()) as url:
            async with Client(url, mode=mode) as client:
                yield client


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("mode", list(MODES))
async def test_a_client_on_either_revision_lists_and_calls_the_tools(
    transport: str, mode: str, tmp_path: Path
) -> None:
    layout = StoreLayout(tmp_path)
    async with connected(transport, layout, mode) as client:
        assert client.protocol_version == MODES[mode]
        listed = {t.name for t in (await client.list_tools()).tools}
        stored = structured(
            await client.call_tool(
                "ingest_text",
                {"text": "Lanterns light the harbour of Hydra at dusk.", "title": "harbour"},
            )
        )
        found = structured(
            await client.call_tool("hybrid_search", {"query": "Hydra harbour", "top_k": 1})
        )
    assert listed == CORE
    [result] = stored["results"]
    assert result["status"] == "ingested"
    assert [(h["doc_id"], h["title"]) for h in found["chunks"]] == [(result["doc_id"], "harbour")]
