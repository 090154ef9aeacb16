"""A version published by another process is served on the server's next call, no restart."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from serving.harness import StoreLayout, stdio_params, structured

pytestmark = pytest.mark.anyio

# What the Dagster pipeline does, in its own process: store a document, publish the index.
PUBLISHER = """
import json, sys
from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.system import MemorySystem

memory = MemorySystem(Settings.from_env(), embedder=HashingEmbedder())
result = memory.ingest_text(sys.argv[1], sys.argv[2])
published = memory.update_index()
print(json.dumps({"doc_id": result.doc_id, "version": published.version}))
memory.close()
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def publish_from_another_process(env: dict[str, str], text: str, title: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PUBLISHER, text, title],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


async def test_next_search_uses_a_version_published_elsewhere(tmp_path: Path) -> None:
    layout = StoreLayout(tmp_path)
    env = layout.env()
    async with Client(stdio_params(env, layout.docs)) as client:
        first = structured(
            await client.call_tool(
                "ingest_text",
                {"text": "Principles outlive news.", "title": "mine", "rebuild_index": True},
            )
        )
        assert first["index"]["version"] == 1
        before = structured(
            await client.call_tool("hybrid_search", {"query": "zebra", "include_stats": True})
        )
        assert before["stats"]["index_version"] == 1

        other = publish_from_another_process(env, "A zebra crossed the quantum field.", "theirs")
        assert other["version"] == 2

        after = structured(
            await client.call_tool("hybrid_search", {"query": "zebra", "include_stats": True})
        )
        stats = after["stats"]
        assert stats["index_version"] == 2
        assert stats["unindexed_searched"] == 0, "found through the new index, not the fallback"
        assert after["chunks"][0]["doc_id"] == other["doc_id"]
        assert after["chunks"][0]["stage_scores"]["dense_rank"] == 1

        # Its own update_index publishes the same way, and is served on the next call too.
        structured(await client.call_tool("ingest_text", {"text": "Okapi BM25.", "title": "bm25"}))
        mine = structured(await client.call_tool("update_index", {}))
        assert mine["version"] == 3
        last = structured(
            await client.call_tool("hybrid_search", {"query": "okapi", "include_stats": True})
        )
        assert last["stats"]["index_version"] == 3 and last["stats"]["unindexed_searched"] == 0
