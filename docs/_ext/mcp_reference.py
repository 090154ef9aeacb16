"""``mcp-tools``: the MCP server's tools, as its own ``tools/list`` gives them.

The server is built by ``serving.server.build_server`` around a throw-away memory in
a temporary folder, with the deterministic hashing embedder (no model is loaded), and
listed through an in-process MCP client: names, titles, annotations, descriptions and
the input and output JSON schemas are what a client receives.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import anyio
from docnodes import as_json, code, inline, paragraphs, section, table
from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective


async def _listed(root: Path) -> list[dict[str, Any]]:
    from mcp import Client

    from memory_pipeline.config import Settings
    from memory_pipeline.embedding.base import HashingEmbedder
    from memory_pipeline.system import MemorySystem
    from serving.server import build_server

    settings = Settings(
        db_path=root / "memory.db",
        index_path=root / "indices",
        archive_path=root / "archive",
        model_cache=root / "models",
    )
    system = MemorySystem(settings, embedder=HashingEmbedder())
    try:
        async with Client(build_server(system, roots=[root], cwd=root, tool_set="all")) as client:
            tools = (await client.list_tools()).tools
    finally:
        system.close()
    return [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools]


def list_tools() -> list[dict[str, Any]]:
    """The wire form of ``tools/list`` (what ``tests/serving/test_wire.py`` snapshots)."""
    with tempfile.TemporaryDirectory(prefix="memory-pipeline-docs-") as tmp:
        return anyio.run(_listed, Path(tmp))


def type_of(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " | ".join(type_of(s) for s in schema["anyOf"])
    if "enum" in schema:
        return " | ".join(repr(v) for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {type_of(schema.get('items', {}))}"
    if kind == "null":
        return "null"
    return str(kind)


def _bounds(schema: dict[str, Any]) -> str:
    words = {
        "minimum": "≥",
        "exclusiveMinimum": ">",
        "maximum": "≤",
        "exclusiveMaximum": "<",
        "minLength": "length ≥",
        "maxLength": "length ≤",
        "maxItems": "items ≤",
    }
    found = [f"{w} {schema[k]}" for k, w in words.items() if k in schema]
    for option in schema.get("anyOf", []):
        found += [f"{w} {option[k]}" for k, w in words.items() if k in option]
    return ", ".join(found)


def argument_rows(schema: dict[str, Any]) -> list[list[Any]]:
    required = set(schema.get("required", []))
    rows = []
    for name, prop in schema.get("properties", {}).items():
        default = "" if "default" in prop and name in required else prop.get("default", "")
        rows.append(
            [
                code(name),
                code(type_of(prop)),
                "yes" if name in required else "",
                code(json.dumps(default, ensure_ascii=False)) if "default" in prop else "",
                "; ".join(filter(None, [prop.get("description", ""), _bounds(prop)])),
            ]
        )
    return rows


def hints(annotations: dict[str, Any]) -> list[str]:
    """What the tool's annotations tell a client: read-only, writes or destructive; idempotent."""
    if annotations.get("readOnlyHint"):
        found = ["read-only"]
    else:
        found = ["destructive" if annotations.get("destructiveHint") else "writes"]
    if annotations.get("idempotentHint"):
        found.append("idempotent")
    if annotations.get("openWorldHint"):
        found.append("open world")
    return found


def details(summary: str, body: nodes.Node) -> list[nodes.Node]:
    return [
        nodes.raw("", f"<details><summary>{summary}</summary>", format="html"),
        body,
        nodes.raw("", "</details>", format="html"),
    ]


def tool_section(tool: dict[str, Any]) -> nodes.section:
    sec = section(tool["name"], f"tool-{tool['name']}", literal_title=True)
    facts: list[Any] = [tool.get("title", "")]
    facts += hints(tool.get("annotations", {}))
    sec += inline(nodes.strong("", facts[0]), *facts[1:], sep=" · ")
    sec += paragraphs(tool.get("description"))
    schema = tool.get("inputSchema", {})
    rows = argument_rows(schema)
    if rows:
        sec += table(["argument", "type", "required", "default", "meaning"], rows)
    else:
        sec += nodes.paragraph("", "No arguments.")
    sec += details("Input schema (JSON)", as_json(schema))
    if "outputSchema" in tool:
        sec += details("Output schema (JSON)", as_json(tool["outputSchema"]))
    return sec


class McpTools(SphinxDirective):
    def run(self) -> list[nodes.Node]:
        tools = list_tools()
        summary = table(
            ["tool", "title", "kind"],
            [
                [code(t["name"]), t.get("title", ""), ", ".join(hints(t.get("annotations", {})))]
                for t in tools
            ],
        )
        return [summary, *(tool_section(t) for t in tools)]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("mcp-tools", McpTools)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
