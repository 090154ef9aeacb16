"""Which way imports point (docs/architecture.md): tables of layers, checked on the source.

In the library (``memory_pipeline/``) a module may import its own layer and the ones
below; only the adapters at the top (CLI, Dagster, evaluation harness) may import
argparse or Dagster, and no module of the library imports the MCP server package
(``serving/``) or the MCP SDK. The server is an adapter beside them: it imports the
library's core (layers 0-3), not its adapters, and has layers of its own, lowest first:
the parts (schemas, hints, errors, the wire form, tool kinds...), the tools, the
server, the entry points (the only ones that may import argparse).
Imports under ``if TYPE_CHECKING:`` are annotations only and are not counted, with one
exception: no module below the configuration (``config``, layer 3) names it even there —
an index backend, the embedder registry or the ingestor is handed its own section of the
settings (``index/settings.py``, ``embedding/settings.py``, ``ingest/settings.py``), never
the whole ``Settings``. The index backends (``index/backends/<name>``) are peers: none
imports another's modules, and the code they share imports none of them (table below).
Relative imports are resolved to the module they name.
One exception, narrow: the CLI's ``serve`` command hands the process over to the server's
entry point, so a module of ``memory_pipeline/cli/`` may import ``serving.__main__`` inside a
function (deferred, never at module level) and nothing else of ``serving``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "memory_pipeline"
SERVER = ROOT / "serving"

LAYERS: dict[str, int] = {
    # 0: vocabulary shared by everyone
    "__init__": 0, "errors": 0, "types": 0, "metadata": 0, "durable": 0, "spaces": 0,
    "runtimes": 0, "sections": 0, "locations": 0, "spool": 0, "hygiene": 0, "extras": 0,
    "listening": 0,
    # 1: storage, loading, indices
    "store": 1, "ingest": 1, "index": 1,
    # 2: models, the memory axis, search
    "embedding": 2, "memory": 2, "search": 2,
    # 3: configuration, sources, the front door
    "config": 3, "sources": 3, "system": 3,
    # 4: adapters and the evaluation harness
    "cli": 4, "pipeline": 4, "evaluation": 4, "alerts": 3,
    # the viewer's pages: served by memory-pipeline ui and by the MCP server at /ui
    "ui": 3,
}  # fmt: skip
ADAPTERS = LAYERS["cli"]
SERVING_LAYERS: dict[str, int] = {
    # 0: parts: input and output models, hints, errors, the wire form, tool kinds,
    #    paths, loading, HTTP, the test harness
    "__init__": 0, "schemas": 0, "hints": 0, "errors": 0, "wire": 0, "toolspec": 0,
    "paths": 0, "loading": 0, "http": 0, "harness": 0,
    # 1: the tools
    "read_tools": 1, "write_tools": 1,
    # 2: the server
    "server": 2,
    # 3: entry points
    "__main__": 3, "bench": 3, "wire_size": 3,
}  # fmt: skip
ENTRY_POINTS = SERVING_LAYERS["__main__"]
#: The index backends under ``index/backends/``: peers, none imports another's modules,
#: nor does the code they share (``index/``, ``index/backends/queued.py``...) import them,
BACKENDS = {"local", "pgvector", "qdrant", "chroma"}
#: except the opener (``open_backend``) and the index section, which takes its defaults
#: from the backend that uses them,
OPENERS = {("index", "backends", "__init__"), ("index", "settings")}
#: and Chroma, which keeps its BM25 in the local backend's tantivy partitions.
BORROWED = {("chroma", "local")}
ADAPTER_ONLY = {"argparse", "dagster"}
NEVER = {"serving", "mcp"}
#: What the CLI may import of the server, and only inside a function (``memory-pipeline serve``).
CLI_HANDS_OVER_TO = "serving.__main__"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(
    tree: ast.Module, package: list[str], *, annotations: bool = False
) -> list[tuple[str, bool]]:
    """Dotted names imported at run time (``annotations``: those under ``if TYPE_CHECKING:``
    instead), each with whether the import is deferred (inside a function); ``from a
    import b`` counts as ``a.b``.

    ``package`` is the importing module's package, to resolve relative imports.
    """
    typing_only: set[int] = set()
    deferred: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            typing_only.update(id(n) for child in node.body for n in ast.walk(child))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            deferred.update(id(n) for child in node.body for n in ast.walk(child))
    names: list[tuple[str, bool]] = []
    for node in ast.walk(tree):
        if (id(node) in typing_only) != annotations:
            continue
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names.extend((f"{module}.{alias.name}", id(node) in deferred) for alias in node.names)
        elif isinstance(node, ast.Import):
            names.extend((alias.name, id(node) in deferred) for alias in node.names)
    return names


def _library_rule(part: str, name: str, deferred: bool) -> str | None:
    layer = LAYERS[part]
    top, _, rest = name.partition(".")
    hands_over = part == "cli" and deferred and f"{name}.".startswith(f"{CLI_HANDS_OVER_TO}.")
    if top in NEVER and not hands_over:
        return "the library never imports the MCP side"
    if top in ADAPTER_ONLY and layer < ADAPTERS:
        return f"only the adapters (layer {ADAPTERS}) may"
    target = LAYERS.get(rest.split(".")[0], -1) if top == "memory_pipeline" else -1
    if target > layer:
        return f"upward, layer {layer} -> {target}"
    return None


def _annotation_rule(part: str, name: str) -> str | None:
    top, _, rest = name.partition(".")
    below_config = LAYERS[part] < LAYERS["config"]
    if top == "memory_pipeline" and rest.split(".")[0] == "config" and below_config:
        return "below the configuration a module is handed its own section, not Settings"
    return None


def _backend_of(parts: list[str] | tuple[str, ...]) -> str | None:
    """The backend a module of ``memory_pipeline/index/...`` belongs to (None: shared)."""
    if len(parts) > 2 and parts[:2] == ("index", "backends") and parts[2] in BACKENDS:
        return parts[2]
    return None


def _peer_rule(rel: tuple[str, ...], name: str) -> str | None:
    top, _, rest = name.partition(".")
    target = _backend_of(tuple(rest.split("."))) if top == "memory_pipeline" else None
    if rel[0] != "index" or target is None or rel in OPENERS:
        return None
    own = _backend_of(rel)
    if own is None:
        return f"code the backends share imports the {target} backend"
    if own != target and (own, target) not in BORROWED:
        return f"the {own} backend imports its peer {target}"
    return None


def _serving_rule(part: str, name: str, deferred: bool) -> str | None:
    layer = SERVING_LAYERS[part]
    top, _, rest = name.partition(".")
    if top in ADAPTER_ONLY and layer < ENTRY_POINTS:
        return f"only the server's entry points (serving layer {ENTRY_POINTS}) may"
    if top == "memory_pipeline" and LAYERS.get(rest.split(".")[0], -1) >= ADAPTERS:
        return "the server imports the library's core, not its adapters"
    target = SERVING_LAYERS.get(rest.split(".")[0], -1) if top == "serving" else -1
    if target > layer:
        return f"upward, serving layer {layer} -> {target}"
    return None


def _violations_in(path: Path, source: str) -> list[str]:
    """What is wrong with the imports of one file of ``memory_pipeline/`` or ``serving/``."""
    root, layers, rule = (
        (PACKAGE, LAYERS, _library_rule)
        if path.is_relative_to(PACKAGE)
        else (SERVER, SERVING_LAYERS, _serving_rule)
    )
    rel = path.relative_to(root).with_suffix("")
    part = rel.parts[0]
    if part not in layers:
        return [f"{root.name}/{rel}: '{part}' has no layer in this test"]
    package = [root.name, *rel.parts[:-1]]  # the package of a module or of an __init__
    found = []
    tree = ast.parse(source)
    for name, deferred in _imports(tree, package):
        why = rule(part, name, deferred)
        if why is not None:
            found.append(f"{root.name}/{rel} imports {name}: {why}")
    if root == PACKAGE:
        for name, _ in _imports(tree, package):
            why = _peer_rule(rel.parts, name)
            if why is not None:
                found.append(f"{root.name}/{rel} imports {name}: {why}")
        for name, _ in _imports(tree, package, annotations=True):
            why = _annotation_rule(part, name)
            if why is not None:
                found.append(f"{root.name}/{rel} names {name}: {why}")
    return found


def _violations() -> list[str]:
    return [
        v
        for root in (PACKAGE, SERVER)
        for path in sorted(root.rglob("*.py"))
        for v in _violations_in(path, path.read_text(encoding="utf-8"))
    ]


def test_imports_point_down_and_frameworks_stay_at_the_edge() -> None:
    assert _violations() == []


_SECTION = "handed its own section, not Settings"


@pytest.mark.parametrize(
    ("where", "source", "expected"),
    [
        ("store", "from memory_pipeline.system import MemorySystem\n", "upward, layer 1 -> 3"),
        ("store", "from memory_pipeline import system\n", "upward, layer 1 -> 3"),
        ("store", "from ..system import MemorySystem\n", "upward, layer 1 -> 3"),
        ("store", "import dagster\n", "only the adapters"),
        ("store", "from mcp.server import x\n", "never imports the MCP side"),
        ("store", "from serving.server import build_server\n", "never imports the MCP side"),
        ("cli", "import serving.__main__\n", "never imports the MCP side"),
        ("cli", "from serving.__main__ import serve\n", "never imports the MCP side"),
        ("cli", "def f():\n    from serving.server import build_server\n", "never imports"),
        ("cli", "def f():\n    import mcp\n", "never imports the MCP side"),
        ("store", "def f():\n    from serving.__main__ import serve\n", "never imports"),
        ("system", "if not TYPE_CHECKING:\n    import serving\n", "never imports the MCP side"),
        ("index", "from memory_pipeline.config import Settings\n", "upward, layer 1 -> 3"),
        ("embedding", "from memory_pipeline.config import Settings\n", "upward, layer 2 -> 3"),
        ("index", "if TYPE_CHECKING:\n    from memory_pipeline.config import Settings\n", _SECTION),
        ("embedding", "if TYPE_CHECKING:\n    from ..config import IndexSettings\n", _SECTION),
        ("ingest", "if TYPE_CHECKING:\n    import memory_pipeline.config\n", _SECTION),
    ],
)
def test_the_check_catches_a_violation_in_the_library(
    where: str, source: str, expected: str
) -> None:
    probe = PACKAGE / where / "_architecture_probe.py"
    assert any(expected in v for v in _violations_in(probe, source))


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("backends/queued.py", "from .local.manager import x\n", "share imports the local"),
        ("bm25.py", "from memory_pipeline.index.backends import chroma\n", "share imports the"),
        ("backends/qdrant/search.py", "from ..chroma import x\n", "qdrant backend imports"),
        ("backends/chroma.py", "from .pgvector.schema import x\n", "its peer pgvector"),
        ("backends/local/reader.py", "from memory_pipeline.index.backends.names import x\n", ""),
        ("backends/chroma.py", "from .local.sparse import SparseIndex\n", ""),
        ("backends/__init__.py", "from .local.reader import IndexReader\n", ""),
    ],
)
def test_the_index_backends_are_peers(module: str, source: str, expected: str) -> None:
    found = _violations_in(PACKAGE / "index" / module, source)
    assert any(expected in v for v in found) if expected else found == []


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("hints", "from serving.server import build_server\n", "upward, serving layer 0 -> 2"),
        ("schemas", "from serving import read_tools\n", "upward, serving layer 0 -> 1"),
        ("read_tools", "from .server import TOOLS\n", "upward, serving layer 1 -> 2"),
        ("server", "import serving.__main__\n", "upward, serving layer 2 -> 3"),
        ("server", "import argparse\n", "only the server's entry points"),
        ("write_tools", "from memory_pipeline.cli.main import main\n", "not its adapters"),
        ("probe_without_layer", "", "has no layer in this test"),
    ],
)
def test_the_check_catches_a_violation_in_the_server(
    module: str, source: str, expected: str
) -> None:
    assert any(expected in v for v in _violations_in(SERVER / f"{module}.py", source))


def test_the_cli_may_hand_over_to_the_servers_entry_point_inside_a_function() -> None:
    source = "def serve():\n    from serving.__main__ import serve\n"
    assert _violations_in(PACKAGE / "cli" / "_architecture_probe.py", source) == []


def test_every_layer_names_a_module_that_exists() -> None:
    """A module missing from a table is a violation above; a row left behind is caught here."""
    assert set(LAYERS) == {
        p.relative_to(PACKAGE).parts[0].removesuffix(".py") for p in PACKAGE.rglob("*.py")
    }
    assert set(SERVING_LAYERS) == {p.stem for p in SERVER.glob("*.py")}


def _store_tables() -> set[str]:
    from memory_pipeline.store.schema import Base

    return set(Base.metadata.tables)


def _sql_on(tables: set[str], source: str) -> list[str]:
    """The store's tables that string literals in ``source`` read or write in SQL."""
    names = "|".join(sorted(tables))
    sql = re.compile(rf"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+({names})\b")  # SQL is upper case
    return sorted(
        {
            m.group(1)
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            for m in sql.finditer(node.value)
        }
    )


def test_only_the_store_writes_sql_on_its_tables() -> None:
    """docs/architecture.md, "Inside the store": the pgvector backend's SQL is on its own
    ``pgv_*`` tables; what it reads of the store's, it asks the store (``Reads``)."""
    tables = _store_tables()
    found = {
        str(path.relative_to(PACKAGE)): hits
        for path in sorted(PACKAGE.rglob("*.py"))
        if not path.is_relative_to(PACKAGE / "store")
        for hits in [_sql_on(tables, path.read_text(encoding="utf-8"))]
        if hits
    }
    assert found == {}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('q = "SELECT c.id FROM chunks c LEFT JOIN embeddings e ON 1"\n', ["chunks", "embeddings"]),
        ('q = f"DELETE FROM index_changes WHERE seq = {x}"\n', ["index_changes"]),
        ('q = "SELECT n FROM pgv_stats"  # chunks\n', []),
        ('"""Split the text into chunks."""\n', []),
        ('q = "chunk_id bigint REFERENCES chunks(id) ON DELETE CASCADE"\n', []),
    ],
)
def test_the_sql_check_finds_the_stores_tables(source: str, expected: list[str]) -> None:
    assert _sql_on(_store_tables(), source) == expected
