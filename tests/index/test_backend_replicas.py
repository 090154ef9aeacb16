"""Two MCP servers, as on two machines, sharing one memory through PostgreSQL + pgvector.

Each server runs in its own process with its own working folder (its own index folder
and archive, never written by the other): nothing is shared but the database. A write
through one is returned by the other's next search; a delete through one is never
returned by the other.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from serving.harness import StoreLayout, free_port, http_server, structured

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def call(client: Client, tool: str, **args: object) -> dict:  # type: ignore[type-arg]
    return structured(await client.call_tool(tool, args))


async def test_two_servers_on_one_database_see_each_other(
    tmp_path: Path, pgvector_url: str
) -> None:
    shared = {"HYBRID_RAG_DATABASE_URL": pgvector_url, "HYBRID_RAG_INDEX_BACKEND": "pgvector"}
    a, b = StoreLayout(tmp_path / "a"), StoreLayout(tmp_path / "b")
    with (
        http_server(a.env(**shared), a.docs, free_port()) as url_a,
        http_server(b.env(**shared), b.docs, free_port()) as url_b,
    ):
        async with Client(url_a) as one, Client(url_b) as other:
            for n in range(5):
                written = await call(
                    one,
                    "ingest_text",
                    text=f"Replica note {n}: the lighthouse keeper logs storm number {n}.",
                    title=f"storm-{n}",
                )
                doc = written["results"][0]["doc_id"]
                found = await call(other, "hybrid_search", query=f"storm number {n}", top_k=3)
                assert found["chunks"][0]["doc_id"] == doc
                await call(one, "delete_document", doc_id=doc)
                gone = await call(other, "hybrid_search", query=f"storm number {n}", top_k=10)
                assert doc not in {c["doc_id"] for c in gone["chunks"]}
            # The other way round, and neither ever ran an index update.
            written = await call(
                other, "ingest_text", text="The ferry leaves at dawn.", title="ferry"
            )
            found = await call(one, "hybrid_search", query="ferry dawn", top_k=1)
            assert found["chunks"][0]["doc_id"] == written["results"][0]["doc_id"]
            stats = await call(one, "get_system_stats")
            assert stats["index"]["backend"] == "pgvector"
    for layout in (a, b):  # no index files: the index lives in the database
        assert not any(layout.index.rglob("*.faiss")) and not (layout.index / "CURRENT").exists()
