"""The wire contract: what ``tools/list`` advertises and what each result carries.

The whole ``tools/list`` of the ``all`` set is compared with a checked-in snapshot,
so a description or schema that drifts fails here (``UPDATE_SNAPSHOTS=1`` rewrites
it); the default ``core`` set lists the same definitions of fewer tools. Every
tool is called once and its ``structuredContent`` validated against the output
schema it advertises; the text content is the same JSON, compact.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent, Tool

from memory_pipeline.system import MemorySystem
from serving.harness import structured
from serving.schemas import ChunkIn, Hit
from serving.server import CORE_TOOLS, build_server

pytestmark = pytest.mark.anyio

SNAPSHOT = Path(__file__).parents[1] / "fixtures" / "mcp_tools_list.json"
NOTE = """# Fusion

Convex fusion adds min-max normalised dense and BM25 scores; reciprocal rank fusion
adds reciprocal ranks. Both need the two retrievers to agree on nothing else.
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def client(system_without_grace: MemorySystem, tmp_path: Path) -> AsyncIterator[Client]:
    # No grace period, so the forgetting run below archives the old news it just stored.
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "fusion.md").write_text(NOTE)
    server = build_server(system_without_grace, roots=[docs], cwd=docs, tool_set="all")
    async with Client(server) as c:
        yield c


def wire(tools: list[Tool]) -> list[dict[str, Any]]:
    return [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools]


async def test_list_tools_matches_wire_snapshot(client: Client) -> None:
    listed = wire((await client.list_tools()).tools)
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(json.dumps(listed, indent=1, ensure_ascii=False) + "\n")
    assert SNAPSHOT.exists(), "no snapshot yet: run with UPDATE_SNAPSHOTS=1"
    assert listed == json.loads(SNAPSHOT.read_text()), (
        "tools/list changed; if on purpose, rerun with UPDATE_SNAPSHOTS=1 and review the diff"
    )


async def test_core_lists_the_snapshot_s_definitions_of_the_core_tools_in_a_budget(
    system: MemorySystem, tmp_path: Path
) -> None:
    """An agent pays for the default list on every turn: at most a quarter of what all
    tools cost before the lists were split (31 226 characters)."""
    async with Client(build_server(system, roots=[tmp_path], cwd=tmp_path)) as client:
        listed = await client.list_tools()
    core = wire(listed.tools)
    snapshot = {t["name"]: t for t in json.loads(SNAPSHOT.read_text())}
    assert [t["name"] for t in core] == [s.name for s in CORE_TOOLS]
    assert core == [snapshot[t["name"]] for t in core]
    assert len(listed.model_dump_json(by_alias=True, exclude_none=True)) <= 31_226 // 4


async def test_descriptions_and_schemas_are_clean(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    search = tools["hybrid_search"].description or ""
    # Fusion is the server's choice (HYBRID_RAG_FUSION), not the caller's: the description
    # says only that the two are fused, never how wrongly ("by rank" for a convex default).
    assert "by rank" not in search and "fused" in search
    for name, tool in tools.items():
        description = tool.description or ""
        assert "\n " not in description and description == description.strip(), name
        assert tool.input_schema.get("additionalProperties") is False, name
        for schema in (tool.input_schema, tool.output_schema or {}):
            assert not list(keywords(schema, "title")), name


async def test_every_type_is_one_type(client: Client) -> None:
    """No ``type: [a, b]``: strict clients (the MCP Inspector's ``--strict``) warn on it;
    several types are an ``anyOf`` of one type each."""
    for tool in (await client.list_tools()).tools:
        for schema in (tool.input_schema, tool.output_schema or {}):
            lists = [t for t in keywords(schema, "type") if not isinstance(t, str)]
            assert not lists, f"{tool.name}: type {lists}"


async def test_no_switch_asks_for_its_own_default(client: Client) -> None:
    """A boolean's description never says to pass the value it already defaults to."""
    for tool in (await client.list_tools()).tools:
        for name, prop in tool.input_schema["properties"].items():
            if prop.get("type") == "boolean" and "default" in prop:
                own = f"pass {json.dumps(prop['default'])}"
                assert own not in prop.get("description", ""), f"{tool.name}.{name}"


def keywords(schema: Any, word: str, in_names: bool = False) -> Any:
    """Every use of a JSON-schema keyword (not a property that happens to carry its name)."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == word and not in_names:
                yield value
            yield from keywords(
                value, word, in_names=key in ("properties", "$defs") and not in_names
            )
    elif isinstance(schema, list):
        for item in schema:
            yield from keywords(item, word)


def text_of(result: CallToolResult) -> str:
    [block] = result.content
    assert isinstance(block, TextContent)
    return block.text


async def every_tool_once(client: Client) -> dict[str, CallToolResult]:
    """One successful call of every tool (a tool missing here fails the caller's check)."""
    out: dict[str, CallToolResult] = {}

    async def call(tool: str, **args: Any) -> dict[str, Any]:
        out[tool] = await client.call_tool(tool, args)
        return structured(out[tool])

    meta = {"knowledge_type": "news", "source_date": "2001-01-01", "tags": ["old"]}
    stored = await call("ingest", file_paths=["fusion.md"], metadata=meta)
    doc = stored["results"][0]["doc_id"]
    await call("ingest_text", text="Principles never fade.", title="rule", rebuild_index=True)
    hits = (await call("hybrid_search", query="convex fusion", include_stats=True))["chunks"]
    await call("rerank", chunks=hits, time_weight=0.3)
    await call("embed", text="convex fusion")
    await call("find_by_tag", tag="old")
    await call("get_document_chunks", doc_id=doc, chunk_index=0)
    await call("set_chunk_tags", doc_id=doc, chunk_index=0, tags=["old", "seen"])
    await call("index_health")
    await call("get_system_stats")
    await call("update_index")
    await call("rebuild_index")
    run = await call("run_forgetting_batch", dry_run=False, max_fraction=1.0)
    await call("restore_archived", run_id=run["run_id"])
    await call("delete_document", doc_id=doc)
    return out


async def test_structured_content_validates_and_text_is_the_same_compact_json(
    client: Client,
) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    results = await every_tool_once(client)
    assert set(results) == set(tools), "every tool must be called once here"
    for name, result in results.items():
        schema = tools[name].output_schema
        assert schema is not None, name
        jsonschema.validate(result.structured_content, schema)
        compact = json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
        assert text_of(result) == compact, name


async def test_hits_carry_title_and_source_and_omit_what_is_unset(client: Client) -> None:
    await client.call_tool("ingest", {"file_paths": ["fusion.md"]})
    found = structured(await client.call_tool("hybrid_search", {"query": "convex fusion"}))
    hit = found["chunks"][0]
    assert hit["title"] == "Fusion" and hit["source"].endswith("fusion.md")
    assert "importance" not in hit and "stats" not in found  # unset: left out, not null
    assert None not in hit["stage_scores"].values()
    for value in [hit["score"], *hit["stage_scores"].values()]:
        assert len(repr(value).lstrip("-0.").replace(".", "")) <= 4, value
    ranked = structured(await client.call_tool("rerank", {"chunks": found["chunks"]}))
    assert ranked["chunks"][0]["title"] == "Fusion"


def test_a_hit_sent_back_for_rerank_is_the_hit_it_was(system: MemorySystem) -> None:
    """``ChunkIn.hit``: a hit as sent, read back as ``rerank`` takes it, is the same hit."""
    system.ingest_text(NOTE, "Fusion", {"knowledge_type": "principle", "importance": 0.5})
    [hit] = system.query("convex fusion", system.settings.search_request(top_k=1)).hits
    sent = Hit.model_validate(hit, from_attributes=True).model_dump(exclude_defaults=True)
    exact = {"score": hit.score, "stage_scores": hit.stage_scores}  # the wire rounds them
    back = ChunkIn.model_validate({**sent, **exact}).hit()
    assert back == replace(hit, turns=())


async def test_embed_is_compact_and_exact_to_float32(client: Client, system: MemorySystem) -> None:
    result = await client.call_tool("embed", {"text": "convex fusion"})
    vector = structured(result)["vector"]
    expected = system.embed("convex fusion").astype(np.float32)
    assert np.array_equal(np.asarray(vector, dtype=np.float32), expected)
    assert all(len(repr(v)) <= 16 for v in vector)
    assert len(text_of(result)) < 12 * len(vector)
