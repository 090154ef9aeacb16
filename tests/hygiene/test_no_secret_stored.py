"""No secret reaches the memory's files, whichever way a text comes in.

The hostile corpus (tests/hygiene/corpus.py: 52 secrets of 21 kinds in every message and
tool-result shape of the four transcript formats, a markdown file and notes) goes in by
every way there is — ``import`` of each format, ``ingest`` of a file, ``sources sync`` (the
Dagster sensor's path), ``ingest_text`` over a real stdio MCP client and the Python API —
and then the memory's files themselves are read: the database, its WAL while a writer holds
it open, the index files and the BM25 term dictionaries. No piece of any secret, nor any
word of a ``<private>`` span, is anywhere; the words around them are still found.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pytest
import sqlalchemy as sa
import tantivy
from mcp import Client

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.index.backends.local.sparse_files import BODY_FIELD
from memory_pipeline.ingest.loaders import load_file
from memory_pipeline.sources.chatgpt import parse_chatgpt_export
from memory_pipeline.sources.codex import parse_codex_session
from memory_pipeline.sources.conversations import (
    parse_claude_ai_export,
    parse_claude_code_session,
)
from memory_pipeline.spaces import Spaces
from memory_pipeline.system import MemorySystem
from serving.harness import StoreLayout, stdio_params, structured
from tests.capture.helpers import cli
from tests.conftest import make_settings
from tests.hygiene.corpus import AROUND, PRIVATE_WORDS, Corpus, build

IMPORTS = (
    ("claude_code", "claude_code"),
    ("codex", "codex"),
    ("chatgpt", "chatgpt"),
    ("claude_ai", "claude_ai"),
)
# the kinds every way in must count (the corpus holds each)
SOME_KINDS = {"github-token", "anthropic-key", "jwt", "private-key", "url-password", "private"}


def needles(corpus: Corpus) -> dict[bytes, str]:
    """Byte strings no file may hold, each with what it is a piece of (never the value)."""
    found: dict[bytes, str] = {}
    for n, secret in enumerate(corpus.secrets):
        for piece in secret.pieces(12):
            found[piece.encode()] = f"secret {n} ({secret.kind})"
            found[piece.lower().encode()] = f"secret {n} ({secret.kind}), lowercased"
    for word in PRIVATE_WORDS:
        found[word.encode()] = f"the private word {word}"
    return found


def leaks_in_files(root: Path, corpus: Corpus) -> list[str]:
    wanted = needles(corpus)
    out = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        out += [f"{path.relative_to(root)}: {what}" for n, what in wanted.items() if n in data]
    return out


def leaks_in_terms(root: Path, corpus: Corpus) -> list[str]:
    """The BM25 term dictionaries, read term by term (they are stored compressed)."""
    cores = [s.core.lower() for s in corpus.secrets]
    out: list[str] = []
    folders = {p.parent for p in root.rglob("*.term")}
    assert folders, f"no BM25 index under {root}"
    for folder in sorted(folders):
        terms = tantivy.Index.open(str(folder)).searcher().terms_with_prefix(BODY_FIELD, "")
        assert terms, f"{folder}: an empty term dictionary"
        for term, _ in terms:
            long_words = (w for w in [term] if len(w) >= 10)
            out += [f"{folder.name}: a term of secret {n}" for w in long_words for n, c in enumerate(cores) if w in c]  # fmt: skip
            out += [f"{folder.name}: {term}" for w in PRIVATE_WORDS if w in term]
    return out


def found(system: MemorySystem, words: str) -> bool:
    request = system.settings.search_request(top_k=5, record_access=False)
    return any(AROUND in hit.content for hit in system.query(words, request).hits)


def run_ok(*args: str, env: dict[str, str]) -> str:
    done = cli(*args, env=env)
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done.stdout


def sources_file(folder: Path, corpus: Corpus) -> Path:
    """A sources file whose roots hold a copy of each shape, as the sensor would sync them."""
    roots = [
        {"name": "notes", "path": str(corpus.files["markdown"].parent)},
        {"name": "cc", "path": str(corpus.files["claude_code"].parents[1]), "kind": "claude_code"},
        {"name": "codex", "path": str(folder / "codex"), "kind": "codex"},
        {"name": "gpt", "path": str(corpus.files["chatgpt"].parent), "kind": "chatgpt"},
        {"name": "cai", "path": str(corpus.files["claude_ai"].parent), "kind": "claude_ai"},
    ]
    path = folder / "sources.yaml"
    path.write_text(json.dumps({"state": "sources-state.json", "roots": roots}))
    return path


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_no_secret_reaches_the_memory_s_files_by_any_way_in(tmp_path: Path) -> None:
    corpus = build(tmp_path / "in")
    layout = StoreLayout(tmp_path / "memory")
    env = layout.env()
    texts = json.loads(corpus.files["texts"].read_text())

    # import, every format, each into a space of its own
    for kind, shape in IMPORTS:
        run_ok("import", kind, str(corpus.files[shape]), "--space", kind, env=env)
    # a file, by the CLI
    run_ok("ingest", str(corpus.files["markdown"]), "--space", "files", env=env)
    # the sources sync (the Dagster sensor runs the same apply_sync)
    synced = sources_file(tmp_path / "in", corpus)
    run_ok("sources", "sync", "--sources", str(synced), "--space", "synced", env=env)
    # ingest_text over a real stdio MCP client
    async with Client(stdio_params({**env, "HYBRID_RAG_SPACE": "mcp"}, layout.docs)) as client:
        for text in texts:
            result = structured(await client.call_tool("ingest_text", text))
            assert result["results"][0]["status"] == "ingested", result
    run_ok("update-index", env=env)

    # the Python API, the files read while it holds the database open (its WAL included)
    settings = make_settings(layout.root, max_chunk_size=64).replace(model="hashing")
    system = MemorySystem(settings, embedder=HashingEmbedder()).bound(Spaces.bound("api"))
    try:
        for text in texts:
            system.ingest_text(text["text"], text["title"])
        assert list(layout.root.glob("*-wal")), "the test means to read a live WAL"
        assert leaks_in_files(layout.root, corpus) == []
    finally:
        system.close()

    assert leaks_in_files(layout.root, corpus) == []
    assert leaks_in_terms(layout.index, corpus) == []
    for space in ("claude_code", "codex", "chatgpt", "claude_ai", "files", "synced", "mcp"):
        bound = MemorySystem(settings, embedder=HashingEmbedder()).bound(Spaces.bound(space))
        try:
            assert found(bound, f"{AROUND} rollout config vault"), space
            stats = bound.system_stats()
            assert set(stats.redactions) >= SOME_KINDS, (space, stats.redactions)
        finally:
            bound.close()
    imported = json.loads(run_ok("stats", "--json", "--space", "claude_code", env=env))
    assert len(imported["redactions"]) >= 15 and imported["redactions"]["private"] >= 3


def _stored_rows(url: str) -> Iterable[tuple[str, str]]:
    """Every row of every table of the database, as PostgreSQL prints it."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as c:
            tables = c.execute(
                sa.text(
                    "SELECT table_schema, table_name FROM information_schema.tables "
                    "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') "
                    "AND table_type = 'BASE TABLE'"
                )
            ).all()
            assert len(tables) > 5
            for schema, table in tables:
                for (row,) in c.execute(sa.text(f'SELECT t::text FROM "{schema}"."{table}" t')):
                    yield f"{schema}.{table}", row
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_no_secret_reaches_postgresql_with_pgvector(tmp_path: Path, pgvector_url: str) -> None:
    corpus = build(tmp_path / "in")
    settings = make_settings(
        tmp_path / "memory", database_url=pgvector_url, backend="pgvector", max_chunk_size=64
    )
    system = MemorySystem(settings, embedder=HashingEmbedder())
    try:
        conversations = [
            *parse_claude_code_session(corpus.files["claude_code"]),
            *parse_codex_session(corpus.files["codex"]),
            *parse_chatgpt_export(corpus.files["chatgpt"]),
            *parse_claude_ai_export(corpus.files["claude_ai"]),
        ]
        assert len(conversations) == 4
        for conv in conversations:
            system.ingest_loaded([conv.to_loaded()], conv.metadata(), update_index=False)
        system.ingest_loaded([load_file(corpus.files["markdown"])], update_index=False)
        for text in json.loads(corpus.files["texts"].read_text()):
            system.ingest_text(text["text"], text["title"])
        system.update_index()
        assert found(system, f"{AROUND} rollout config vault")
        assert set(system.system_stats().redactions) >= SOME_KINDS
    finally:
        system.close()
    wanted = {n.decode(): what for n, what in needles(corpus).items()}
    rows = 0
    leaks = []
    for table, row in _stored_rows(pgvector_url):
        rows += 1
        leaks += [f"{table}: {what}" for n, what in wanted.items() if n in row]
    assert rows > 100 and leaks == []
    assert leaks_in_files(tmp_path / "memory", corpus) == []
