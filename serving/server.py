"""The MCP server: the tools of ``read_tools``/``write_tools`` registered with their annotations.

Each tool's title and kind (hence its annotations) is declared beside it with
``serving.toolspec.tool``.

``build_server`` wires objects it is given; it reads no environment (that is
``serving.__main__``'s job), so tests can build it around any ``MemorySystem``.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any, Literal

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent

from memory_pipeline.system import MemorySystem
from serving.errors import WriteLock, tool_errors
from serving.read_tools import ReadTools
from serving.toolspec import ToolSet, ToolSpec, tool_specs
from serving.wire import as_result, compact_schema
from serving.write_tools import WriteTools

SERVER_NAME = "hybrid-rag"
#: The installed distribution whose version the server reports in ``serverInfo``.
DISTRIBUTION = "memory-pipeline"
_SEARCH = """\
Long-term memory: documents, notes and session summaries, searched by meaning and keywords.
Search with hybrid_search before answering from memory; widen with a larger top_k or fewer
filters, or pass rewrites (your own other phrasings: synonyms, the names the memory may use);
narrow with tags/filters; read around a hit with get_document_chunks."""
#: The server's instructions to the client, by tool set: they name only tools it lists.
INSTRUCTIONS: dict[ToolSet, str] = {
    "core": f"""{_SEARCH} Store text in hand with
ingest_text. Deleting needs a person's confirmation first.""",
    "all": f"""{_SEARCH} Store with
ingest (files) or ingest_text (text in hand). Changing importance or knowledge_type, deleting
and real forgetting runs (dry_run=false) need a person's confirmation first.""",
}


def listed(tool_set: ToolSet) -> tuple[ToolSpec, ...]:
    """The tools of ``tool_set``, in the order of ``tools/list``; each declares its kind and
    set beside it (``@tool``)."""
    return tool_specs(ReadTools, tool_set) + tool_specs(WriteTools, tool_set)


#: Every tool (the ``all`` set); ``CORE_TOOLS``, those an agent needs on every turn.
TOOLS: tuple[ToolSpec, ...] = listed("all")
CORE_TOOLS: tuple[ToolSpec, ...] = listed("core")


class RejectUnknownArguments:
    """A misspelt argument is a tool error naming it.

    The SDK drops arguments a tool does not declare; a search whose ``tag`` (for
    ``tags``) vanished would quietly return unfiltered results.
    """

    def __init__(self, known: dict[str, frozenset[str]]) -> None:
        self.known = known

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method == "tools/call" and ctx.params:
            name, args = ctx.params.get("name"), ctx.params.get("arguments")
            allowed = self.known.get(name) if isinstance(name, str) else None
            if allowed is not None and isinstance(args, dict):
                unknown = sorted(set(args) - allowed)
                if unknown:
                    text = (
                        f"Error executing tool {name}: unknown argument(s) {', '.join(unknown)}; "
                        f"this tool takes: {', '.join(sorted(allowed)) or 'no arguments'}"
                    )
                    return CallToolResult(is_error=True, content=[TextContent(text=text)])
        return await call_next(ctx)


class NameUnlistedTools:
    """A call to a tool of ``all`` on a server that lists only ``core`` says how to get it.

    The SDK would answer "Unknown tool", which reads like a typo or a missing feature.
    """

    def __init__(self, unlisted: frozenset[str]) -> None:
        self.unlisted = unlisted

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        name = ctx.params.get("name") if ctx.method == "tools/call" and ctx.params else None
        if name in self.unlisted:
            text = (
                f"Error executing tool {name}: {name} is a maintenance tool, not listed by this "
                "server; start it with HYBRID_RAG_TOOLS=all (or --tools all) to list every "
                "tool, or run the memory-pipeline command line"
            )
            return CallToolResult(is_error=True, content=[TextContent(text=text)])
        return await call_next(ctx)


def unwrapped(text: str) -> str:
    """``text`` with each paragraph on one line: a docstring's line breaks are the source's
    layout, not the description's."""
    return "\n\n".join(" ".join(p.split("\n")) for p in text.split("\n\n"))


def make_tool(spec: ToolSpec, fn: Callable[..., Any]) -> Tool:
    """``fn`` as a tool: compact results, its docstring as description, compact schemas."""
    tool = Tool.from_function(
        tool_errors(as_result(fn), read_only=spec.kind == "read"),
        name=spec.name,
        title=spec.title,
        description=unwrapped(inspect.cleandoc(fn.__doc__ or "")),
        annotations=spec.annotations(),
    )
    tool.parameters = compact_schema(tool.parameters, closed=True)
    if tool.fn_metadata.output_schema is not None:
        tool.fn_metadata.output_schema = compact_schema(
            tool.fn_metadata.output_schema, descriptions=False
        )
    return tool


def build_server(
    system: MemorySystem,
    *,
    roots: Sequence[Path],
    cwd: Path,
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "WARNING",
    on_start: Callable[[], None] | None = None,
    allow_hard_links: bool = False,
    tool_set: ToolSet = "core",
) -> MCPServer:
    """An ``MCPServer`` whose tools adapt ``system``; ``ingest`` reads only under ``roots``.

    ``tool_set``: ``core`` lists only the tools an agent needs on every turn, ``all``
    the maintenance tools too (``serving.toolspec``).
    ``on_start`` runs once the transport is up (stdio: after it took over stdout).
    ``allow_hard_links`` lets ``ingest`` read files with several hard links (see ``paths``).
    """

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[dict[str, Any]]:
        if on_start is not None:
            on_start()
        yield {}

    read = ReadTools(system, cwd)
    write = WriteTools(system, roots, cwd, WriteLock(), allow_hard_links=allow_hard_links)
    tools = [
        make_tool(spec, getattr(adapter, spec.name))
        for adapter in (read, write)
        for spec in tool_specs(type(adapter), tool_set)
    ]
    server: MCPServer = MCPServer(
        SERVER_NAME,
        version=version(DISTRIBUTION),
        instructions=INSTRUCTIONS[tool_set],
        log_level=log_level,
        lifespan=lifespan,
        tools=tools,
    )
    known = {t.name: frozenset(t.parameters.get("properties", {})) for t in tools}
    server.middleware.append(RejectUnknownArguments(known))
    server.middleware.append(NameUnlistedTools(frozenset(s.name for s in TOOLS) - set(known)))
    return server
