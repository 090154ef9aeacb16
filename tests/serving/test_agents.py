"""The subagents in .claude/agents call only tools that exist and that they are given."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from serving.harness import REPO
from serving.schemas import DocumentLabel, TaggedChunks
from serving.server import CORE_TOOLS, TOOLS

AGENTS = sorted((REPO / ".claude" / "agents").glob("*.md"))
SERVER_TOOLS = {spec.name for spec in TOOLS}
CORE = {spec.name for spec in CORE_TOOLS}


def front_matter_tools(text: str) -> set[str]:
    match = re.search(r"^tools:\s*(.+)$", text, flags=re.M)
    assert match, "no tools: line in the front matter"
    return {t.strip() for t in match.group(1).split(",")}


@pytest.mark.parametrize("agent", AGENTS, ids=lambda p: p.stem)
def test_an_agent_is_given_every_tool_it_is_told_to_call(agent: Path) -> None:
    text = agent.read_text()
    given = {
        t.removeprefix("mcp__hybrid-rag__")
        for t in front_matter_tools(text)
        if t.startswith("mcp__hybrid-rag__")
    }
    assert given <= SERVER_TOOLS, f"no such tools: {given - SERVER_TOOLS}"
    called = set(re.findall(r"`(\w+)\(", text)) & SERVER_TOOLS
    assert called <= given, f"{agent.name} calls {called - given} without having them"


@pytest.mark.parametrize("agent", AGENTS, ids=lambda p: p.stem)
def test_an_agent_given_maintenance_tools_says_how_to_get_them(agent: Path) -> None:
    """A server lists only the core tools unless started with HYBRID_RAG_TOOLS=all."""
    text = agent.read_text()
    given = {t.removeprefix("mcp__hybrid-rag__") for t in front_matter_tools(text)}
    if given & (SERVER_TOOLS - CORE):
        unlisted = sorted(given & (SERVER_TOOLS - CORE))
        assert "HYBRID_RAG_TOOLS=all" in text, f"{agent.name} is given {unlisted}"


def test_there_are_agents() -> None:
    assert {p.stem for p in AGENTS} >= {"rag-memory", "doc-to-memory", "session-to-memory"}


def test_doc_to_memory_checks_what_is_stored_by_fields_find_by_tag_returns() -> None:
    """Its "only new or changed files" step names only what the tool's answer carries."""
    text = (REPO / ".claude" / "agents" / "doc-to-memory.md").read_text()
    step = text.split("2. **Check what is already stored**", 1)[1].split("3. **", 1)[0]
    named = set(re.findall(r"`(\w+)`", step))
    returned = set(TaggedChunks.model_fields) | set(DocumentLabel.model_fields)
    assert {"documents", "source", "documents_total"} <= named
    assert named - {"ingest", "unchanged", "replaced"} <= returned, named - returned
