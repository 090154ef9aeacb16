"""Figures and names the docs quote are the code's: measured or looked up here, so they cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from serving.toolspec import TOOL_SETS
from serving.wire_size import MODEL_VIEW, OUTPUT_SCHEMAS, TOOLS_LIST, measure, sizes_of

DOCS = Path(__file__).resolve().parents[2] / "docs"
#: A docs/mcp.md table row's first cell -> the ``python -m serving.wire_size`` row it quotes.
WIRE_ROWS = {
    "`tools/list`": TOOLS_LIST,
    "… the part a model sees": MODEL_VIEW,
    "… its output schemas": OUTPUT_SCHEMAS,
}
#: The last cells of those rows: one per tool set, in this order.
QUOTED_SETS = ("all", "core")
#: "31 166 (7 791; 13 667)": characters (chars/4; WordPiece tokens).
FIGURES = re.compile(r"(\d[\d ]*) \((\d[\d ]*); (\d[\d ]*)\)")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def quoted_sizes(doc: Path) -> dict[tuple[str, str], tuple[int, int, int]]:
    """The figures of the table rows ``WIRE_ROWS`` names, by (tool set, row): the last
    cells of each, one per set of ``QUOTED_SETS``."""
    found = {}
    for line in doc.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        row = next((r for label, r in WIRE_ROWS.items() if cells[0].startswith(label)), None)
        if row is not None:
            for tool_set, cell in zip(QUOTED_SETS, cells[-len(QUOTED_SETS) :], strict=True):
                match = FIGURES.fullmatch(cell)
                assert match, f"{doc.name}: no figures in {cell!r}"
                chars, quarter, pieces = (int(g.replace(" ", "")) for g in match.groups())
                found[tool_set, row] = (chars, quarter, pieces)
    return found


@pytest.mark.anyio
async def test_mcp_doc_quotes_the_measured_tools_list_sizes(tmp_path: Path) -> None:
    # tools/list does not depend on the model: the fast hashing embedder measures it.
    texts = await measure(tmp_path, "hashing")
    sizes = {tool_set: sizes_of(texts[tool_set]) for tool_set in TOOL_SETS}
    measured = {
        (tool_set, row): (size.chars, size.quarter, size.wordpiece)
        for tool_set in QUOTED_SETS
        for row in WIRE_ROWS.values()
        for size in [sizes[tool_set][row]]
    }
    assert quoted_sizes(DOCS / "mcp.md") == measured, "rerun python -m serving.wire_size"


#: A module or folder named in backticks: ``index/bm25.py``, ``store/``, ``chroma.py``.
MODULE_PATH = re.compile(r"`([\w./-]+(?:\.py|/))`")


def missing_paths(doc: Path) -> list[str]:
    """Paths ``doc`` names that are not in the repository.

    A folder, or a path with one, resolves from the repository root or from
    ``memory_pipeline/``; a bare file name (a row of a table under its package's heading) must exist somewhere
    in the code."""
    repo = DOCS.parent
    code = [*(repo / "memory_pipeline").rglob("*.py"), *(repo / "serving").rglob("*.py")]
    names = {p.name for p in code}
    missing = []
    for path in sorted(set(MODULE_PATH.findall(doc.read_text(encoding="utf-8")))):
        if "/" in path:
            found = (repo / path).exists() or (repo / "memory_pipeline" / path).exists()
        else:
            found = path in names
        if not found:
            missing.append(path)
    return missing


def test_architecture_doc_names_only_modules_that_exist() -> None:
    assert missing_paths(DOCS / "architecture.md") == []


#: A call that opens a database connection: SQLAlchemy's ``connect()``/``begin()`` on an
#: engine, a new engine, or the standard library's ``sqlite3.connect``.
OPENS_CONNECTION = re.compile(r"\.connect\(|\.begin\(\)|\bcreate_engine\(|\bsqlite3\.connect\(")
#: The sentence in docs/architecture.md whose list names the code outside ``store/`` that
#: opens connections.
CONNECTIONS_LIST = "open database connections:"


def connection_openers_named(doc: Path) -> set[str]:
    """The code paths outside ``store/``, relative to the repository, that ``doc`` names
    from ``CONNECTIONS_LIST`` to the next heading (the list, and the test harness after it)."""
    text = doc.read_text(encoding="utf-8")
    assert CONNECTIONS_LIST in text, f"{doc.name} does not say which code opens connections"
    start = text.index(CONNECTIONS_LIST)
    section = text[start : text.index("\n###", start)]
    named = set()
    for path in MODULE_PATH.findall(section):
        for root in (DOCS.parent, DOCS.parent / "memory_pipeline"):
            rel = Path(root / path).relative_to(DOCS.parent)
            code = rel.parts[0] in ("memory_pipeline", "serving")
            if code and rel.parts[:2] != ("memory_pipeline", "store") and (root / path).exists():
                named.add(str(rel))
    return named


def connection_openers() -> set[str]:
    """The modules outside ``memory_pipeline/store/`` that open a connection, each as its
    own path or, inside an index backend's package, as the package's folder."""
    repo = DOCS.parent
    found = set()
    for path in [*(repo / "memory_pipeline").rglob("*.py"), *(repo / "serving").rglob("*.py")]:
        rel = path.relative_to(repo)
        if rel.parts[:2] == ("memory_pipeline", "store"):
            continue
        if OPENS_CONNECTION.search(path.read_text(encoding="utf-8")):
            backend = rel.parts[:4] if rel.parts[1:3] == ("index", "backends") else ()
            found.add(str(Path(*backend)) if len(rel.parts) > 4 else str(rel))
    return found


def test_architecture_doc_names_the_code_outside_the_store_that_opens_connections() -> None:
    """docs/architecture.md, "Inside the store": the places outside ``store/`` that still
    open database connections are named, and no other place does."""
    assert connection_openers() == connection_openers_named(DOCS / "architecture.md")


def test_the_blend_weight_the_docs_quote_is_the_code_s() -> None:
    """A turn's vector is its own + NEIGHBOUR_BLEND × its neighbours'; every doc that
    says so quotes the weight the code uses."""
    from memory_pipeline.ingest.turns import NEIGHBOUR_BLEND

    root = DOCS.parent
    for doc in (root / "README.md", root / "README.ja.md", DOCS / "conversations.md"):
        text = doc.read_text(encoding="utf-8")
        quoted = set(re.findall(r"(?:own|embedding|埋め込み) (?:\+|plus) (\d\.\d+) ×", text))
        assert quoted == {str(NEIGHBOUR_BLEND)}, doc.name


def test_the_rebuild_memory_the_pgvector_docs_quote_is_the_code_s() -> None:
    """docs/backends.md says how much ``maintenance_work_mem`` a pgvector rebuild takes
    at least; the statement the rebuild runs says the same."""
    from memory_pipeline.index.backends.pgvector import BUILD_MEMORY

    text = (DOCS / "backends.md").read_text(encoding="utf-8")
    quoted = set(re.findall(r"takes (\d+) MB of `maintenance_work_mem`", text))
    in_code = set(re.findall(r"THEN '(\d+)MB'", str(BUILD_MEMORY)))
    assert quoted and quoted == in_code
