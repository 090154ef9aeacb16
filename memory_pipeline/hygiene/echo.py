"""The memory's own answers are not stored again (docs/hygiene.md, "No echo").

A session that searched the memory holds the search's result; storing that result as part
of the transcript would store the same chunks a second time, quoted, and every session that
searches would grow the echo. So a transcript parser asks ``own_tool`` for each tool call and,
for ours, keeps the call but replaces its result by ``echo_line``.

A tool is ours by its base name, whatever the client calls the server: Claude Code names a
tool ``mcp__<server>__<tool>``, Codex ``<server>__<tool>`` or ``<server>.<tool>``, a chat
export the bare name.
"""

from __future__ import annotations

import json
import re
from typing import Any

# The MCP server's tools (memory_pipeline/serving; tests/fixtures/mcp_tools_list.json).
OWN_TOOLS = frozenset(
    {
        "hybrid_search",
        "get_document_chunks",
        "find_by_tag",
        "rerank",
        "embed",
        "index_health",
        "get_system_stats",
        "ingest",
        "ingest_text",
        "set_chunk_tags",
        "update_index",
        "rebuild_index",
        "restore_archived",
        "delete_document",
        "run_forgetting_batch",
    }
)

_PREFIXED = re.compile(r"^(?:mcp__)?[A-Za-z0-9_.-]+?(?:__|\.)(?P<tool>[a-z_]+)$")
# The argument that says what a call asked for, in the order a tool has them.
_QUERY_ARGS = ("query", "doc_id", "tag", "text", "title", "file_paths", "run_id")
QUERY_LIMIT = 200


def own_tool(name: str | None) -> str | None:
    """The memory's tool ``name`` calls (its base name), or None when it is someone else's."""
    if not name:
        return None
    if name in OWN_TOOLS:
        return name
    match = _PREFIXED.match(name)
    if match is not None and match["tool"] in OWN_TOOLS:
        return match["tool"]
    return None


def _query(args: Any) -> str:
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return args
    if not isinstance(args, dict):
        return ""
    for key in _QUERY_ARGS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and value:
            return ", ".join(str(v) for v in value)
    return ""


def echo_line(tool: str, args: Any = None) -> str:
    """The one line a result of the memory's ``tool`` is stored as: the tool and its query."""
    query = " ".join(_query(args).split())
    if len(query) > QUERY_LIMIT:
        query = query[:QUERY_LIMIT].rsplit(" ", 1)[0] + " …"
    asked = f' for "{query}"' if query else ""
    return f"[memory {tool}{asked}: its result came from this memory and is not stored again]"
