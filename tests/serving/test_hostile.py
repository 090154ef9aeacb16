"""Every tool, hostile arguments: each refusal names its reason; none is a bare crash.

The tools are taken from the server's own ``tools/list``, and each one's arguments
are built from its advertised input schema, so a tool added later is swept too.
One argument at a time is replaced by something hostile (wrong types, huge and
NUL-laden strings, negative and huge numbers, ids that do not exist, path tricks,
empty lists, nested junk). A call may succeed or be refused; a refusal must say
why, in terms of what an MCP client can do. "Error executing tool X" with nothing
after it, the server's fallback for an exception nobody anticipated, or a CLI
hint (a --flag, a CLI command) fails the test.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.types import Tool

from memory_pipeline.system import MemorySystem
from serving.errors import UNEXPECTED
from serving.harness import error_text
from serving.server import build_server
from tests.serving.test_hints import CLI

pytestmark = pytest.mark.anyio

GENERIC = re.compile(r"Error executing tool [\w-]+:?")
HOSTILE: list[Any] = [
    None,
    True,
    -1,
    -(10**30),
    10**30,
    1e308,
    -0.5,
    "",
    "x" * 200_000,
    "a\x00b",
    "💥" * 3000,
    "y" * 300,
    "d/" * 2000,
    "../../../etc/passwd",
    "/etc/shadow",
    "~root/.ssh/id_rsa",
    "loop-a",
    "hard.md",
    "fifo",
    "sub",
    "0" * 32,
    [],
    [None],
    ["", "a\x00b"],
    [-1, 10**30],
    [[[[[[{}]]]]]],
    {},
    {"$ref": "#", "a": {"b": [None, {"c": 10**30}]}},
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Allowed root with a note, a hard link to a file outside, a symlink loop, a FIFO, a folder."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "note.md").write_text("# Note\n\nA note about rank fusion and decay.\n")
    (outside / "secret.md").write_text("# Secret\n\noutside\n")
    os.link(outside / "secret.md", root / "hard.md")
    (root / "loop-a").symlink_to(root / "loop-b")
    (root / "loop-b").symlink_to(root / "loop-a")
    os.mkfifo(root / "fifo")
    return root


def resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def sample(schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    """A value the schema accepts: its default, else the smallest one of its type."""
    schema = resolve(schema, defs)
    if "default" in schema:
        return schema["default"]
    if "anyOf" in schema:
        arms = [a for a in schema["anyOf"] if a.get("type") != "null"]
        return sample(arms[0], defs)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "string":
        fmt = schema.get("format")
        if fmt == "date-time":
            return "2026-01-01T00:00:00Z"
        if fmt == "date":
            return "2026-01-01"
        return "x" * max(1, schema.get("minLength", 1))
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    if kind == "array":
        items = schema.get("items") or (schema.get("prefixItems") or [{}])[0]
        return [sample(items, defs)] * schema.get("minItems", 0)
    if kind == "object":
        props = schema.get("properties", {})
        return {name: sample(props[name], defs) for name in schema.get("required", [])}
    return None


def calls(tool: Tool) -> Iterator[dict[str, Any]]:
    """The tool's required arguments with one argument (or one field of one) made hostile."""
    schema = tool.input_schema
    defs = schema.get("$defs", {})
    props: dict[str, Any] = schema.get("properties", {})
    base = {name: sample(props[name], defs) for name in schema.get("required", [])}
    yield {}
    yield {**base, "not_an_argument": HOSTILE[-1]}
    for name, prop in props.items():
        for value in HOSTILE:
            yield {**base, name: value}
        inner = resolve(
            next((a for a in prop.get("anyOf", [prop]) if a.get("type") != "null"), prop), defs
        )
        wrap = inner.get("type") == "array"
        if wrap:
            for value in HOSTILE:
                yield {**base, name: [value]}
            inner = resolve(inner.get("items", {}), defs)
        for field in inner.get("properties", {}):
            nested = sample(inner, defs)
            for value in HOSTILE[::3]:
                item = {**nested, field: value}
                yield {**base, name: [item] if wrap else item}


def unexplained(text: str) -> bool:
    reason = GENERIC.sub("", text, count=1).strip()
    return len(reason) < 10 or UNEXPECTED in text


async def test_every_tool_explains_every_refusal(system: MemorySystem, root: Path) -> None:
    system.ingest_text("Rank fusion and memory decay, a note.", "seed", {"tags": ["t"]})
    system.update_index()
    bad: list[str] = []
    swept: set[str] = set()
    async with Client(build_server(system, roots=[root], cwd=root, tool_set="all")) as client:
        tools = (await client.list_tools()).tools
        for tool in tools:
            for args in calls(tool):
                result = await client.call_tool(tool.name, args)
                swept.add(tool.name)
                text = error_text(result)
                if result.is_error and (unexplained(text) or CLI.search(text)):
                    shown = {k: (repr(v)[:60]) for k, v in args.items()}
                    bad.append(f"{tool.name}({shown}) -> {text[:300]!r}")
    assert swept == {t.name for t in tools} and len(swept) >= 15
    assert not bad, "\n".join(bad[:40])
