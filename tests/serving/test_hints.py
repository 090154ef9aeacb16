"""Every hint an MCP client sees names what it can do over MCP, not a CLI command.

The library's messages are written for both the CLI and the server ("run
rebuild-index", "pass force=True (--force)"); the serving layer says it in
tool names and arguments.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from memory_pipeline.system import MemorySystem
from serving.harness import error_text, structured
from serving.hints import to_mcp
from serving.server import build_server

pytestmark = pytest.mark.anyio

# What only a shell user can act on: flags, CLI commands, "entry points", Python keywords.
CLI = re.compile(
    r"(?<![\w-])--[a-z]|`(forget|restore|memory-pipeline)[ `]|entry point|force=True|"
    r"update-index|rebuild-index|memory-pipeline "
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize(
    ("core", "mcp"),
    [
        (
            "this run would archive 3 of 4 live chunks (75.0%), more than max_fraction 20% "
            "allows (0); check the dry-run report, then pass force=True (--force), raise "
            "max_fraction (--max-fraction) or lower score_threshold",
            "call run_forgetting_batch again",
        ),
        (
            "nothing to restore for run x: there is no such forgetting run (run ids are printed "
            "by `forget --apply`)",
            "run_forgetting_batch(dry_run=false) returns",
        ),
        (
            "/r/sub is a directory, not a file; pass the files inside, or ingest the folder "
            "with the directory (batch) ingest entry point",
            "list the folder's files in file_paths",
        ),
        (
            "3 live chunks are neither in the index nor queued; run rebuild-index",
            "call rebuild_index",
        ),
        ("no published index but 3 live chunks; run update-index", "call update_index"),
        ("2 live chunks queued for the next update-index (searched directly)", "next update_index"),
        (
            "2 chunks ... scored directly; an index update (update-index / update_index) makes "
            "this cheap again",
            "(update_index) makes",
        ),
        ("cannot read x: bad; run rebuild-index", "call rebuild_index"),
        ("2 vectors hold NaN or infinity; re-embed those chunks", "no tool here re-embeds"),
        (
            "cross-encoder skipped: no cross-encoder configured (set HYBRID_RAG_RERANKER_MODEL)",
            "whoever runs the server",
        ),
        (
            "broken (x). Rebuild the index or restore the directory from a published copy.",
            "Call rebuild_index",
        ),
    ],
)
def test_core_hints_are_said_in_mcp_terms(core: str, mcp: str) -> None:
    said = to_mcp(core)
    assert mcp in said, said
    assert not CLI.search(said), said


def test_text_without_hints_is_left_alone() -> None:
    text = "a note about --flags and `forget --apply` in someone's content"
    assert to_mcp("no document with doc_id 'x'; find ids with search or find_by_tag") == (
        "no document with doc_id 'x'; find ids with search or find_by_tag"
    )
    assert to_mcp(text).startswith("a note about --flags")


async def test_hints_reaching_a_client_speak_mcp(
    system_without_grace: MemorySystem, tmp_path: Path
) -> None:
    system = system_without_grace  # the old news is a candidate at once
    (tmp_path / "sub").mkdir()
    system.ingest_text("Old news.", "old", {"knowledge_type": "news", "source_date": "2001-01-01"})
    system.update_index()
    system.ingest_text("Fresh, not yet indexed.", "new")
    seen: list[str] = []
    async with Client(
        build_server(system, roots=[tmp_path], cwd=tmp_path, tool_set="all")
    ) as client:

        async def refused(tool: str, args: dict[str, Any], needle: str) -> None:
            result = await client.call_tool(tool, args)
            assert result.is_error and needle in error_text(result), error_text(result)
            seen.append(error_text(result))

        await refused("restore_archived", {"run_id": "nope"}, "run_forgetting_batch")
        await refused("ingest", {"file_paths": ["sub"]}, "file_paths")
        await refused(
            "run_forgetting_batch", {"dry_run": False, "max_fraction": 0.01}, "max_fraction"
        )
        health = structured(await client.call_tool("index_health", {}))
        seen += [f["message"] for f in health["findings"]]
        assert any("update_index" in f["message"] for f in health["findings"])
        found = structured(
            await client.call_tool("hybrid_search", {"query": "fresh", "include_stats": True})
        )
        seen += found["stats"]["notes"]
    assert not [s for s in seen if CLI.search(s)], seen
