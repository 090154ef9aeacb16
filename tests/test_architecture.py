"""Which way imports point (docs/architecture.md): a table of layers, checked on the source.

A module may import its own layer and the ones below; only the adapters at the
top (CLI, Dagster, evaluation harness) may import argparse or Dagster, and no
module of the library imports the MCP server package or the MCP SDK.
Imports under ``if TYPE_CHECKING:`` are annotations only and are not counted.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "memory_pipeline"

LAYERS: dict[str, int] = {
    # 0: vocabulary shared by everyone
    "__init__": 0, "errors": 0, "types": 0, "metadata": 0, "durable": 0, "spaces": 0,
    "runtimes": 0,
    # 1: storage, loading, indices
    "store": 1, "ingest": 1, "index": 1,
    # 2: models, the memory axis, search
    "embedding": 2, "memory": 2, "search": 2,
    # 3: configuration, sources, the front door
    "config": 3, "sources": 3, "system": 3,
    # 4: adapters and the evaluation harness
    "cli": 4, "pipeline": 4, "evaluation": 4, "alerts": 3,
}  # fmt: skip
ADAPTER_ONLY = {"argparse", "dagster"}
NEVER = {"serving", "mcp"}


def _part(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    return rel.parts[0]


def _runtime_imports(tree: ast.Module) -> list[str]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    names: list[str] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return names


def _violations() -> list[str]:
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        part = _part(path)
        layer = LAYERS.get(part)
        if layer is None:
            found.append(f"{path.relative_to(PACKAGE)}: '{part}' has no layer in this test")
            continue
        for name in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            top = name.split(".")[0]
            where = f"{path.relative_to(PACKAGE)} imports {name}"
            if top in NEVER:
                found.append(f"{where}: the library never imports the MCP side")
            elif top in ADAPTER_ONLY and layer < LAYERS["cli"]:
                found.append(f"{where}: only the adapters (layer 4) may")
            elif top == "memory_pipeline" and "." in name:
                target = name.split(".")[1]
                if LAYERS.get(target, -1) > layer:
                    found.append(f"{where}: upward, layer {layer} -> {LAYERS[target]}")
    return found


def test_imports_point_down_and_frameworks_stay_at_the_edge() -> None:
    assert _violations() == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from memory_pipeline.system import MemorySystem\n", "upward, layer 1 -> 3"),
        ("import dagster\n", "only the adapters"),
        ("from mcp.server import x\n", "never imports the MCP side"),
    ],
)
def test_the_check_catches_a_violation(tmp_path: Path, source: str, expected: str) -> None:
    probe = PACKAGE / "store" / "_architecture_probe.py"
    probe.write_text(source, encoding="utf-8")
    try:
        assert any(expected in v for v in _violations())
    finally:
        probe.unlink()
