"""Streamable HTTP: four clients, fifty mixed calls each, against one server process.

Afterwards nothing is lost or duplicated: every client's live documents have exactly
the chunks their ingest reported, deleted ones have none, the shared document was
stored once, and index_health is clean.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from serving.harness import StoreLayout, error_text, free_port, http_server, structured

CLIENTS = 4
CALLS = 50
SHARED = "shared.md"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Ledger:
    """What one client believes the memory holds for it."""

    tag: str
    live: dict[str, int] = field(default_factory=dict)  # doc_id -> chunks
    deleted: set[str] = field(default_factory=set)
    shared_status: str = ""
    calls: int = 0


def body(client: int, k: int) -> str:
    words = " ".join(f"w{client}x{k}x{j}" for j in range(90))
    return f"# Client {client} note {k}\n\nTopic {client} about retrieval. {words}\n"


async def call(client: Client, ledger: Ledger, tool: str, **args: Any) -> dict[str, Any]:
    ledger.calls += 1
    result = await client.call_tool(tool, args)
    assert not result.is_error, f"{ledger.tag} {tool}: {error_text(result)}"
    return structured(result)


async def run_client(url: str, n: int, ledger: Ledger) -> None:
    meta = {"tags": [ledger.tag]}
    async with Client(url) as client:
        shared = await call(client, ledger, "ingest", file_paths=[SHARED])
        ledger.shared_status = shared["results"][0]["status"]
        k = 0
        while ledger.calls < CALLS:
            k += 1
            step = k % 5
            if step in (0, 3):
                if step == 0:
                    out = await call(
                        client,
                        ledger,
                        "ingest",
                        file_paths=[f"c{n}_{k}.md"],
                        metadata=meta,
                        rebuild_index=k % 10 == 0,
                    )
                else:
                    out = await call(
                        client,
                        ledger,
                        "ingest_text",
                        text=body(n, k),
                        title=f"{n}-{k}",
                        metadata=meta,
                    )
                result = out["results"][0]
                assert result["status"] == "ingested"
                ledger.live[result["doc_id"]] = result["chunks"]
            elif step == 1:
                hits = await call(
                    client,
                    ledger,
                    "hybrid_search",
                    query=f"topic {n} retrieval",
                    tags=[ledger.tag],
                    top_k=10,
                )
                for hit in hits["chunks"]:
                    assert ledger.tag in hit["tags"] and hit["doc_id"] not in ledger.deleted
            elif step == 2 and ledger.live:
                doc = next(reversed(ledger.live))
                chunk = await call(
                    client,
                    ledger,
                    "set_chunk_tags",
                    doc_id=doc,
                    chunk_index=0,
                    tags=[ledger.tag, "touched"],
                    importance=0.5,
                )
                assert chunk["importance"] == 0.5
            elif step == 4 and ledger.live:
                doc = next(iter(ledger.live))
                out = await call(
                    client, ledger, "delete_document", doc_id=doc, rebuild_index=k % 2 == 0
                )
                assert out["chunks_removed"] == ledger.live.pop(doc)
                ledger.deleted.add(doc)


@pytest.mark.slow
@pytest.mark.anyio
async def test_four_clients_fifty_mixed_calls(tmp_path: Path) -> None:
    layout = StoreLayout(tmp_path)
    env = layout.env()
    (layout.docs / SHARED).write_text("# Shared\n\nEvery client ingests this same file at once.\n")
    for n in range(CLIENTS):
        for k in range(1, 3 * CALLS):
            (layout.docs / f"c{n}_{k}.md").write_text(body(n, k) + "From a file.\n")
    ledgers = [Ledger(f"client:{n}") for n in range(CLIENTS)]

    with http_server(env, layout.docs, free_port()) as url:
        async with anyio.create_task_group() as tg:
            for n, ledger in enumerate(ledgers):
                tg.start_soon(run_client, url, n, ledger)
        async with Client(url) as client:
            check = Ledger("checker")
            await call(client, check, "update_index")
            for ledger in ledgers:
                assert ledger.calls == CALLS
                tagged = await call(client, check, "find_by_tag", tag=ledger.tag, limit=1000)
                seen = Counter((c["doc_id"], c["chunk_index"]) for c in tagged["chunks"])
                assert max(seen.values()) == 1, "a chunk is listed twice"
                expected = {(d, i) for d, n in ledger.live.items() for i in range(n)}
                assert set(seen) == expected, "chunks lost or left over"
                for doc in ledger.deleted:
                    gone = await client.call_tool("get_document_chunks", {"doc_id": doc})
                    assert gone.is_error and "no document" in error_text(gone)
            statuses = Counter(ledger.shared_status for ledger in ledgers)
            assert statuses == {"ingested": 1, "unchanged": CLIENTS - 1}

            stats = await call(client, check, "get_system_stats")
            assert stats["documents"] == sum(len(ledger.live) for ledger in ledgers) + 1
            health = await call(client, check, "index_health")
            assert health["healthy"], health["findings"]
            problems = [f for f in health["findings"] if f["severity"] not in ("ok", "info")]
            assert not problems, problems
            pending = [
                f for f in health["findings"] if f["check"] in ("pending", "pending_removal")
            ]
            assert all(f.get("count", 0) == 0 for f in pending), pending  # 0: left out
            assert stats["unindexed_chunks"] == 0
            total = sum(sum(ledger.live.values()) for ledger in ledgers)
            assert stats["chunks"] == total + (await shared_chunk_count(client, check))


async def shared_chunk_count(client: Client, check: Ledger) -> int:
    hits = await call(client, check, "hybrid_search", query="every client ingests this same file")
    doc = hits["chunks"][0]["doc_id"]
    return len((await call(client, check, "get_document_chunks", doc_id=doc))["chunks"])
