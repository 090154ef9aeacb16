"""Every tool through a real MCP client over stdio: ``python -m serving`` against a temp store.

Each tool is called with valid arguments and its effect checked, and with at least
one invalid argument: the call must be a tool error that names what was wrong, and
the store (every table, the published index pointer, the archive) must be unchanged.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from serving.harness import StoreLayout, error_text, snapshot, stdio_params, structured

pytestmark = pytest.mark.anyio

READ_ONLY = {
    "embed",
    "hybrid_search",
    "rerank",
    "find_by_tag",
    "get_document_chunks",
    "index_health",
    "get_system_stats",
}
DESTRUCTIVE = {"delete_document", "run_forgetting_batch"}
WRITES = {
    "ingest",
    "ingest_text",
    "set_chunk_tags",
    "update_index",
    "rebuild_index",
    "restore_archived",
}

FUSION = """# Rank fusion

Reciprocal rank fusion combines the dense retriever and the BM25 retriever by rank.
It needs no score calibration between the two lists.

## Why it works

A document ranked well by both retrievers rises to the top; one ranked well by only
one of them still gets a fair place. The constant k dampens the head of each list.

## Where it falls short

When one retriever returns noise, fusion still lets some of it through; a cross-encoder
over the fused head repairs most of that, at the cost of one model pass per pair. MMR
then trades a little relevance for chunks that say different things.
"""
DECAY = """# Memory decay

News fades fast, papers slowly, principles never. The half-life depends on the
knowledge type and the age is counted from the source date.
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def layout(tmp_path: Path) -> StoreLayout:
    layout = StoreLayout(tmp_path)
    layout.docs.mkdir()
    (layout.docs / "fusion.md").write_text(FUSION)
    (layout.docs / "decay.md").write_text(DECAY)
    return layout


@asynccontextmanager
async def serve(layout: StoreLayout, **env: str) -> AsyncIterator[Client]:
    async with Client(stdio_params(layout.env(**env), layout.docs)) as client:
        yield client


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    return structured(await client.call_tool(tool, args))


async def refused(
    client: Client, layout: StoreLayout, tool: str, args: dict[str, Any], *needles: str
) -> str:
    """The call is a tool error containing every needle, and nothing in the store changed."""
    before = snapshot(layout)
    result = await client.call_tool(tool, args)
    text = error_text(result)
    assert result.is_error, f"{tool}({args}) was accepted: {result.structured_content}"
    for needle in needles:
        assert needle in text, f"{needle!r} not in {text!r}"
    assert snapshot(layout) == before, f"{tool}({args}) changed the store"
    return text


async def ingest_both(client: Client, **metadata: Any) -> list[dict[str, Any]]:
    out = await call(client, "ingest", file_paths=["fusion.md", "decay.md"], metadata=metadata)
    return list(out["results"])


def positions(chunks: Iterable[dict[str, Any]]) -> set[tuple[str, int]]:
    return {(c["doc_id"], c["chunk_index"]) for c in chunks}


# ------------------------------------------------------------------------ listing
async def test_initialize_names_the_package_version(layout: StoreLayout) -> None:
    async with serve(layout) as client:
        info = client.server_info
    assert info is not None and info.name == "hybrid-rag"
    assert info.version == version("memory-pipeline")


async def test_tools_have_annotations_and_schemas(layout: StoreLayout) -> None:
    async with serve(layout) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == READ_ONLY | DESTRUCTIVE | WRITES
    for name, tool in tools.items():
        ann = tool.annotations
        assert ann is not None and tool.title, name
        assert bool(ann.read_only_hint) is (name in READ_ONLY), name  # absent = false
        if name not in READ_ONLY:
            assert ann.destructive_hint is (name in DESTRUCTIVE), name
        assert tool.output_schema is not None and tool.output_schema["type"] == "object", name
        assert tool.description, name
    top_k = tools["hybrid_search"].input_schema["properties"]["top_k"]
    assert (top_k["minimum"], top_k["maximum"]) == (1, 50)


# ------------------------------------------------------------------------- ingest
async def test_ingest(layout: StoreLayout) -> None:
    async with serve(layout) as client:
        results = await ingest_both(client, knowledge_type="principle", tags=["design"])
        assert [r["status"] for r in results] == ["ingested", "ingested"]
        total = sum(r["chunks"] for r in results)
        tagged = await call(client, "find_by_tag", tag="design")
        assert tagged["total"] == total
        assert {c["knowledge_type"] for c in tagged["chunks"]} == {"principle"}
        again = await call(client, "ingest", file_paths=["fusion.md"])
        assert again["results"][0]["status"] == "unchanged" and "index" not in again

        (layout.docs / "new.md").write_text("# New\n\nA fresh note about tantivy.\n")
        text = await refused(
            client, layout, "ingest", {"file_paths": ["new.md", "missing.md"]}, "missing.md"
        )
        assert "no such file" in text  # ... and new.md was not stored either
        await refused(
            client,
            layout,
            "ingest",
            {"file_paths": ["new.md"], "metadata": {"knowledge_type": "rumor"}},
            "knowledge_type",
        )
        await refused(
            client,
            layout,
            "ingest",
            {"file_paths": ["new.md"], "metadata": {"tag": ["x"]}},
            "tag",
            "Extra inputs",
        )
        await refused(client, layout, "ingest", {"file_paths": []}, "file_paths")


async def test_ingest_refuses_oversized_and_non_text_files(layout: StoreLayout) -> None:
    (layout.docs / "big.md").write_text("word " * 1000)
    (layout.docs / "blob.txt").write_bytes(b"text\x00\x01\x02binary")
    (layout.docs / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (layout.docs / "tool.exe").write_bytes(b"MZ")
    async with serve(layout, HYBRID_RAG_MAX_FILE_BYTES="2000") as client:
        await refused(client, layout, "ingest", {"file_paths": ["big.md"]}, "limit", "split")
        await refused(client, layout, "ingest", {"file_paths": ["blob.txt"]}, "NUL bytes")
        await refused(client, layout, "ingest", {"file_paths": ["latin1.txt"]}, "UTF-8")
        await refused(client, layout, "ingest", {"file_paths": ["tool.exe"]}, "unsupported")
        await refused(client, layout, "ingest", {"file_paths": ["."]}, "directory")


async def test_ingest_text(layout: StoreLayout) -> None:
    async with serve(layout) as client:
        first = (await call(client, "ingest_text", text=DECAY, title="session 42"))["results"][0]
        assert first["status"] == "ingested"
        found = await call(client, "hybrid_search", query="half-life", include_stats=True)
        assert found["chunks"][0]["doc_id"] == first["doc_id"]
        assert found["stats"]["unindexed_searched"] >= 1  # searchable before any index update
        second = await call(
            client, "ingest_text", text=DECAY + "\nUpdated.", title="session 42", rebuild_index=True
        )
        assert second["results"][0]["status"] == "replaced"
        assert second["results"][0]["replaced_doc_id"] == first["doc_id"]
        assert second["index"]["version"] == 1

        await refused(
            client, layout, "get_document_chunks", {"doc_id": first["doc_id"]}, "no document"
        )
        await refused(client, layout, "ingest_text", {"text": "x", "title": ""}, "title")
        await refused(
            client,
            layout,
            "ingest_text",
            {"text": "x", "title": "t", "metadata": {"importance": 2}},
            "importance",
        )


# ------------------------------------------------------------------------- search
async def test_hybrid_search(layout: StoreLayout) -> None:
    async with serve(layout) as client:
        await call(client, "ingest", file_paths=["fusion.md"], metadata={"tags": ["ir"]})
        await call(
            client, "ingest", file_paths=["decay.md"], metadata={"knowledge_type": "principle"}
        )
        plain = await call(client, "hybrid_search", query="reciprocal rank fusion", top_k=2)
        assert "stats" not in plain and len(plain["chunks"]) == 2
        assert "fusion" in plain["chunks"][0]["content"].lower()

        tagged = await call(client, "hybrid_search", query="knowledge", tags=["ir"], top_k=10)
        assert tagged["chunks"] and all("ir" in c["tags"] for c in tagged["chunks"])
        typed = await call(
            client,
            "hybrid_search",
            query="rank",
            filters={"knowledge_types": ["principle"]},
            include_stats=True,
        )
        assert {c["knowledge_type"] for c in typed["chunks"]} == {"principle"}
        stats = typed["stats"]
        assert stats["orphan_index_entries"] == 0 and stats["duplicate_contents"] == 0
        assert stats["index_version"] == 2

        await refused(client, layout, "hybrid_search", {"query": "x", "top_k": 0}, "top_k")
        await refused(client, layout, "hybrid_search", {"query": ""}, "query")
        await refused(
            client,
            layout,
            "hybrid_search",
            {"query": "x", "filters": {"knowledge_type": "paper"}},
            "knowledge_type",
        )
        await refused(
            client,
            layout,
            "hybrid_search",
            {"query": "x", "tag": ["ir"]},
            "unknown argument",
            "tag",
        )


async def test_embed(layout: StoreLayout) -> None:
    async with serve(layout) as client:
        out = await call(client, "embed", text="reciprocal rank fusion")
        assert out["model_id"] == "hashing-bow-384" and out["dim"] == len(out["vector"]) == 384
        assert math.isclose(math.hypot(*out["vector"]), 1.0, rel_tol=1e-5)
        assert (await call(client, "embed", text="reciprocal rank fusion")) == out
        await refused(client, layout, "embed", {"text": ""}, "text")
        await refused(client, layout, "embed", {"text": "x" * 20_001}, "text")


async def test_rerank(layout: StoreLayout) -> None:
    async with serve(layout) as client:
        await ingest_both(client)
        hits = (await call(client, "hybrid_search", query="rank fusion decay", top_k=5))["chunks"]
        assert len(hits) >= 2
        low = hits[-1]
        await call(
            client,
            "set_chunk_tags",
            doc_id=low["doc_id"],
            chunk_index=low["chunk_index"],
            importance=0.1,
        )
        hits[-1] = {**low, "importance": 0.1}
        ranked = (await call(client, "rerank", chunks=hits, time_weight=0.5, freq_weight=0.2))[
            "chunks"
        ]
        assert positions(ranked) == positions(hits)
        assert [c["score"] for c in ranked] == sorted((c["score"] for c in ranked), reverse=True)
        assert all("memory" in c["stage_scores"] for c in ranked)
        kept = (await call(client, "rerank", chunks=hits, importance_threshold=0.5))["chunks"]
        assert positions(kept) == positions(hits[:-1])

        await refused(
            client,
            layout,
            "rerank",
            {"chunks": hits, "time_weight": 0.8, "freq_weight": 0.5},
            "time_weight + freq_weight",
        )
        await refused(client, layout, "rerank", {"chunks": []}, "chunks")
        await refused(client, layout, "rerank", {"chunks": hits, "time_weight": 1.5}, "time_weight")


async def test_rerank_takes_conversation_hits_back_with_their_turns(layout: StoreLayout) -> None:
    async with serve(layout) as client:
        await ingest_both(client)
        hits = (await call(client, "hybrid_search", query="rank fusion decay", top_k=2))["chunks"]
        turns = [{"turn_id": "D1:3", "speaker": "Caroline", "said_at": "2023-05-08T13:56:00Z"}]
        sent = [{**hits[0], "turns": turns}, *hits[1:]]
        ranked = (await call(client, "rerank", chunks=sent))["chunks"]
        back = next(c for c in ranked if c["chunk_id"] == hits[0]["chunk_id"])
        assert [(t["turn_id"], t["speaker"]) for t in back["turns"]] == [("D1:3", "Caroline")]
        await refused(
            client,
            layout,
            "rerank",
            {"chunks": [{**hits[0], "turns": [{"speaker": "Caroline"}]}]},
            "turn_id",
        )


# ---------------------------------------------------------------- chunks and tags
async def test_set_chunk_tags_and_find_by_tag(layout: StoreLayout) -> None:
    async with serve(layout) as client:
        doc = (await ingest_both(client, tags=["orig"]))[0]["doc_id"]
        changed = await call(
            client,
            "set_chunk_tags",
            doc_id=doc,
            chunk_index=0,
            importance=0.9,
            knowledge_type="paper",
            tags=["reviewed"],
        )
        assert (changed["importance"], changed["knowledge_type"]) == (0.9, "paper")
        reviewed = await call(client, "find_by_tag", tag="reviewed")
        assert positions(reviewed["chunks"]) == {(doc, 0)} and reviewed["total"] == 1
        assert (doc, 0) not in positions((await call(client, "find_by_tag", tag="orig"))["chunks"])
        cleared = await call(
            client, "set_chunk_tags", doc_id=doc, chunk_index=0, clear=["importance"]
        )
        assert "importance" not in cleared and cleared["knowledge_type"] == "paper"
        limited = await call(client, "find_by_tag", tag="orig", limit=1)
        assert len(limited["chunks"]) == 1 and limited["total"] > 1

        bad = {"doc_id": doc, "chunk_index": 0}
        await refused(
            client, layout, "set_chunk_tags", {**bad, "knowledge_type": "rumor"}, "knowledge_type"
        )
        await refused(client, layout, "set_chunk_tags", {**bad, "importance": 1.5}, "importance")
        await refused(
            client,
            layout,
            "set_chunk_tags",
            {**bad, "chunk_index": 999, "tags": []},
            "no chunk 999",
        )
        await refused(client, layout, "set_chunk_tags", bad, "nothing to change")
        await refused(client, layout, "find_by_tag", {"tag": ""}, "tag")


async def test_find_by_tag_and_get_document_chunks_name_each_document(
    layout: StoreLayout,
) -> None:
    """What doc-to-memory's "only new or changed files" step needs: which files a tag
    already covers, by the path ingest takes, even beyond the chunks listed."""
    async with serve(layout) as client:
        results = await ingest_both(client, tags=["collection:notes"])
        # ingest names the files it stored absolutely; listed, they are the paths it takes
        stored = {r["doc_id"]: Path(r["source"]).name for r in results}
        assert {Path(r["source"]).parent for r in results} == {layout.docs.resolve()}
        tagged = await call(client, "find_by_tag", tag="collection:notes", limit=2)
        assert len(tagged["chunks"]) == 2 and tagged["total"] > 2
        assert {d["doc_id"]: d["source"] for d in tagged["documents"]} == stored
        assert set(stored.values()) == {"fusion.md", "decay.md"}
        assert tagged["documents_total"] == 2
        titles = {d["source"]: d["title"] for d in tagged["documents"]}
        assert titles["fusion.md"] == "Rank fusion"
        one = await call(client, "find_by_tag", tag="collection:notes", limit=1)
        assert len(one["documents"]) == 1 and one["documents_total"] == 2
        doc = results[0]["doc_id"]
        read = await call(client, "get_document_chunks", doc_id=doc, chunk_index=0, window=0)
        assert (read["title"], read["source"]) == (titles[stored[doc]], stored[doc])


async def test_get_document_chunks(layout: StoreLayout) -> None:
    async with serve(layout) as client:
        doc = (await ingest_both(client))[0]
        whole = await call(client, "get_document_chunks", doc_id=doc["doc_id"])
        assert [c["chunk_index"] for c in whole["chunks"]] == list(range(doc["chunks"]))
        assert doc["chunks"] >= 3, "the fixture should span several chunks"
        around = await call(client, "get_document_chunks", doc_id=doc["doc_id"], chunk_index=1)
        assert [c["chunk_index"] for c in around["chunks"]] == [0, 1, 2]

        await refused(client, layout, "get_document_chunks", {"doc_id": "0" * 32}, "no document")
        await refused(
            client,
            layout,
            "get_document_chunks",
            {"doc_id": doc["doc_id"], "chunk_index": 99},
            "has chunks 0..",
        )
        await refused(
            client,
            layout,
            "get_document_chunks",
            {"doc_id": doc["doc_id"], "chunk_index": 0, "window": -1},
            "window",
        )


async def test_delete_document(layout: StoreLayout) -> None:
    async with serve(layout) as client:
        fusion, decay = await ingest_both(client)
        out = await call(client, "delete_document", doc_id=fusion["doc_id"])
        assert out["chunks_removed"] == fusion["chunks"]
        assert out["index"]["removed"] == fusion["chunks"] and out["index"]["version"] == 2
        hits = await call(client, "hybrid_search", query="reciprocal rank fusion", top_k=20)
        assert {c["doc_id"] for c in hits["chunks"]} == {decay["doc_id"]}

        await refused(
            client, layout, "delete_document", {"doc_id": fusion["doc_id"]}, "no document"
        )
        await refused(client, layout, "delete_document", {"doc_id": ""}, "doc_id")


# -------------------------------------------------------------------------- index
async def test_update_and_rebuild_index(layout: StoreLayout) -> None:
    async with serve(layout) as client:
        first = await call(client, "ingest_text", text=FUSION, title="fusion")
        chunks = first["results"][0]["chunks"]
        assert "index" not in first
        published = await call(client, "update_index")
        assert (published["version"], published["added"]) == (1, chunks)
        assert (await call(client, "update_index"))["kind"] == "noop"
        rebuilt = await call(client, "rebuild_index")
        assert (rebuilt["kind"], rebuilt["version"], rebuilt["n_dense"]) == ("rebuild", 2, chunks)

        await refused(client, layout, "update_index", {"force": True}, "unknown argument", "force")
        await refused(client, layout, "rebuild_index", {"full": True}, "unknown argument", "full")


async def test_index_health_and_system_stats(layout: StoreLayout) -> None:
    async with serve(layout) as client:
        results = await ingest_both(client, knowledge_type="paper", tags=["a"])
        health = await call(client, "index_health")
        assert health["healthy"] and health["index_version"] == 1
        assert {f["severity"] for f in health["findings"]} <= {"ok", "info"}
        stats = await call(client, "get_system_stats")
        assert stats["documents"] == 2
        assert stats["chunks"] == sum(r["chunks"] for r in results)
        assert stats["index"]["version"] == 1 and stats["unindexed_chunks"] == 0
        assert stats["top_tags"] == [{"tag": "a", "chunks": stats["chunks"]}]

        await refused(client, layout, "index_health", {"verbose": True}, "unknown argument")
        await refused(client, layout, "get_system_stats", {"x": 1}, "unknown argument")


# --------------------------------------------------------------------- forgetting
async def test_forgetting_and_restore(layout: StoreLayout) -> None:
    # No grace period: the old news is a candidate the moment it arrives.
    async with serve(layout, HYBRID_RAG_FORGET_GRACE_DAYS="0") as client:
        old = (
            await call(
                client,
                "ingest_text",
                text=DECAY,
                title="old news",
                metadata={"knowledge_type": "news", "source_date": "2001-01-01", "tags": ["old"]},
                rebuild_index=True,
            )
        )["results"][0]
        await call(
            client,
            "ingest_text",
            text=FUSION,
            title="rule",
            metadata={"knowledge_type": "principle"},
        )

        before = snapshot(layout)
        dry = await call(client, "run_forgetting_batch")
        assert dry["dry_run"] and dry["candidates"] == old["chunks"] and "run_id" not in dry
        assert snapshot(layout) == before, "a dry run changed the store"
        await refused(
            client,
            layout,
            "run_forgetting_batch",
            {"dry_run": False, "max_fraction": 0.01},
            "max_fraction",
            "no force",
        )

        run = await call(client, "run_forgetting_batch", dry_run=False, max_fraction=1.0)
        assert run["archived"] == old["chunks"] and run["run_id"]
        assert (await call(client, "find_by_tag", tag="old"))["total"] == 0

        restored = await call(client, "restore_archived", run_id=run["run_id"])
        assert restored["restored"] == old["chunks"]
        assert (await call(client, "find_by_tag", tag="old"))["total"] == old["chunks"]

        await refused(
            client, layout, "run_forgetting_batch", {"score_threshold": 2}, "score_threshold"
        )
        await refused(
            client,
            layout,
            "restore_archived",
            {"run_id": run["run_id"], "doc_id": old["doc_id"]},
            "exactly one",
        )
        await refused(
            client, layout, "restore_archived", {"run_id": run["run_id"]}, "nothing to restore"
        )
