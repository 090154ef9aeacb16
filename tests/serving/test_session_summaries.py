"""The session-to-memory agent's summaries and the sources' transcripts of the same session
live side by side: the agent's lookup finds only summaries, its check-and-replace never
touches a transcript, and a sync never touches a summary.

The agent's procedure is performed step by step through a real MCP client, with the tags
and title read from the agent file itself, so this test follows the document.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.sources.conversations import parse_claude_code_session
from memory_pipeline.sources.ledger import open_ledger
from memory_pipeline.sources.sources_file import load_sources
from memory_pipeline.sources.status import conversation_source
from memory_pipeline.sources.sync import SyncReport, apply_sync, plan_sync
from memory_pipeline.system import MemorySystem
from serving.harness import REPO, StoreLayout, stdio_params, structured
from tests.conftest import make_settings

pytestmark = pytest.mark.anyio

AGENT = (REPO / ".claude" / "agents" / "session-to-memory.md").read_text(encoding="utf-8")
SESSION_ID = "7d0c3e52-9a41-4f6b-8c2e-1b5a9e3f0d64"
FIRST_ACTIVITY = "2026-11-20T10:03:02.442Z"
LATER_ACTIVITY = "2026-11-21T08:00:00.000Z"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# ------------------------------------------------------------- the agent, as written
def _section(title: str) -> str:
    return AGENT.split(f"## {title}", 1)[1]


LOOKUP = re.search(r'`find_by_tag\("([^"]+)"\)`', _section("For each session")).group(1)  # type: ignore[union-attr]
STORED_TAGS: list[str] = json.loads(re.search(r'"tags": (\[.*?\])', AGENT, re.S).group(1))  # type: ignore[union-attr]
TITLE = re.search(r'title="([^"]+)"', AGENT).group(1)  # type: ignore[union-attr]
[ACTIVITY] = [t for t in STORED_TAGS if "<timestamp>" in t]


def fill(template: str, last_activity: str) -> str:
    values = {"<id>": SESSION_ID, "<timestamp>": last_activity, "<project folder name>": "demo"}
    for placeholder, value in values.items():
        template = template.replace(placeholder, value)
    assert "<" not in template, f"unfilled placeholder in {template!r}"
    return template


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    return structured(await client.call_tool(tool, args))


async def agent_run(client: Client, last_activity: str) -> tuple[str, str | None]:
    """Steps 2-4 of the agent for one session: what it decided, and its summary's doc_id."""
    found = (await call(client, "find_by_tag", tag=fill(LOOKUP, last_activity)))["chunks"]
    if found and any(fill(ACTIVITY, last_activity) in c["tags"] for c in found):
        return "skipped", None
    summary = f"Goal: fix the flaky index test. Outcome as of {last_activity}: fsync before rename."
    out = await call(
        client,
        "ingest_text",
        title=fill(TITLE, last_activity),
        text=summary,
        metadata={
            "knowledge_type": "experiment",
            "source_date": last_activity[:10],
            "tags": [fill(t, last_activity) for t in STORED_TAGS],
        },
        rebuild_index=False,
    )
    [result] = out["results"]
    for doc_id in {c["doc_id"] for c in found} - {result["doc_id"], result.get("replaced_doc_id")}:
        await call(client, "delete_document", doc_id=doc_id, rebuild_index=False)
    return ("replaced" if found else "stored"), result["doc_id"]


# ------------------------------------------------------------- the sources side
def record(kind: str, uuid: str, at: str, text: str) -> str:
    return json.dumps(
        {
            "type": kind,
            "uuid": uuid,
            "sessionId": SESSION_ID,
            "timestamp": at,
            "cwd": "/home/dev/demo",
            "message": {"role": kind, "content": text},
        }
    )


@pytest.fixture
def session_file(tmp_path: Path) -> Path:
    folder = tmp_path / "roots" / "claude-code" / "-home-dev-demo"
    folder.mkdir(parents=True)
    path = folder / f"{SESSION_ID}.jsonl"
    lines = [
        record("user", "u1", "2026-11-20T10:00:00.000Z", "The index publication test is flaky."),
        record("assistant", "a1", FIRST_ACTIVITY, "The rename races the write; fsync first."),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "sources.yaml").write_text(
        "state: state/sources-state.json\nroots:\n"
        "  - name: claude-code\n    path: roots/claude-code\n    kind: claude_code\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def layout(tmp_path: Path) -> StoreLayout:
    return StoreLayout(tmp_path / "store")


def sync(tmp_path: Path, layout: StoreLayout) -> SyncReport:
    cfg = load_sources(tmp_path / "sources.yaml")
    memory = MemorySystem(make_settings(layout.root), embedder=HashingEmbedder())
    try:
        with open_ledger(cfg.state_path) as ledger:
            return apply_sync(memory, cfg, plan_sync(memory.store, cfg, ledger), ledger)
    finally:
        memory.close()


def documents(layout: StoreLayout, source: str) -> list[str]:
    memory = MemorySystem(make_settings(layout.root), embedder=HashingEmbedder())
    try:
        return [d.doc_id for d in memory.store.documents_by_source(source)]
    finally:
        memory.close()


def transcript_source(session_file: Path) -> str:
    [conv] = parse_claude_code_session(session_file)
    return conversation_source(conv)


def summary_source() -> str:
    return f"text:{fill(TITLE, FIRST_ACTIVITY)}"


# ------------------------------------------------------------------------ tests
def test_the_agent_file_names_only_summary_tags() -> None:
    """The lookup, the unchanged check and the stored tags say summary, never transcript."""
    assert LOOKUP == "summary_of:<id>" and ACTIVITY == "summary_last_activity:<timestamp>"
    assert "session_summary" in STORED_TAGS and LOOKUP in STORED_TAGS
    assert "session_id:" not in AGENT and "session_last_activity:" not in AGENT
    assert "transcript_of:<id>" not in STORED_TAGS


async def test_a_synced_transcript_and_the_agents_summary_never_touch_each_other(
    tmp_path: Path, session_file: Path, layout: StoreLayout
) -> None:
    assert sync(tmp_path, layout).documents_added == 1
    [transcript] = documents(layout, transcript_source(session_file))

    async with Client(stdio_params(layout.env(), layout.docs)) as client:
        # The transcript is not a summary: the agent neither skips nor deletes it.
        decision, summary = await agent_run(client, FIRST_ACTIVITY)
        assert decision == "stored", "the agent's lookup found the sources' transcript"
        assert (await call(client, "get_document_chunks", doc_id=transcript))["chunks"]
        assert await agent_run(client, FIRST_ACTIVITY) == ("skipped", None)

    # The session goes on: a sync replaces the transcript and leaves the summary alone.
    with session_file.open("a", encoding="utf-8") as fh:
        fh.write(record("user", "u2", LATER_ACTIVITY, "Thanks, the fsync fixed it.") + "\n")
    report = sync(tmp_path, layout)
    assert report.documents_replaced == 1 and report.documents_removed == 0
    assert documents(layout, summary_source()) == [summary]
    [transcript] = documents(layout, transcript_source(session_file))

    async with Client(stdio_params(layout.env(), layout.docs)) as client:
        decision, new_summary = await agent_run(client, LATER_ACTIVITY)
        assert decision == "replaced" and new_summary != summary
        assert (await call(client, "get_document_chunks", doc_id=transcript))["chunks"]
        found = await call(client, "find_by_tag", tag=fill(LOOKUP, LATER_ACTIVITY))
        assert {c["doc_id"] for c in found["chunks"]} == {new_summary}
    assert documents(layout, summary_source()) == [new_summary]
    assert sync(tmp_path, layout).documents_removed == 0
    assert documents(layout, summary_source()) == [new_summary]
