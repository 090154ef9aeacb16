"""The library's hints said in MCP terms: tool names and arguments, not CLI commands.

The library writes one message for the CLI and the server alike ("run
rebuild-index", "pass force=True (--force)"). An MCP client can only call tools,
so the serving layer rewrites those phrases in error messages and in the
message fields of results (health findings, search notes, index errors). It
rewrites known phrases only: chunk content and anything else a user wrote is
never passed through here.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

# (library phrase, what to tell an MCP client), applied in order.
_PHRASES: tuple[tuple[str, str], ...] = (
    (
        "then pass force=True (--force), raise max_fraction (--max-fraction) or lower "
        "score_threshold",
        "then show it to a person; only if they agree, call run_forgetting_batch again "
        "with dry_run=false and a max_fraction above that share, or with a lower "
        "score_threshold (there is no force over MCP)",
    ),
    (
        "(run ids are printed by `forget --apply`)",
        "(run_forgetting_batch(dry_run=false) returns a run's run_id; restore_archived also "
        "takes doc_id or chunk_ids)",
    ),
    (
        "or ingest the folder with the directory (batch) ingest entry point",
        "or list the folder's files in file_paths (up to 100 per call)",
    ),
    (
        "Rebuild the index or restore the directory from a published copy.",
        "Call rebuild_index (or whoever runs the server restores the folder from a "
        "published copy).",
    ),
    ("(update-index / update_index)", "(update_index)"),
    (
        "re-embed those chunks",
        "ask whoever runs the server to re-embed those chunks (no tool here re-embeds)",
    ),
    (
        "(set HYBRID_RAG_RERANKER_MODEL)",
        "(whoever runs the server can set HYBRID_RAG_RERANKER_MODEL)",
    ),
)
# CLI command names of tools the client has: "run rebuild-index" -> "call rebuild_index".
_COMMANDS = re.compile(r"\b(?:run )?(update|rebuild)-index\b")


def _command(match: re.Match[str]) -> str:
    tool = f"{match.group(1)}_index"
    return f"call {tool}" if match.group(0).startswith("run ") else tool


def to_mcp(text: str) -> str:
    """``text`` with the library's CLI hints replaced by what an MCP client can call."""
    for phrase, said in _PHRASES:
        text = text.replace(phrase, said)
    return _COMMANDS.sub(_command, text)


# A message field of a result: the library's text, its hints in MCP terms.
McpText = Annotated[str, AfterValidator(to_mcp)]
