"""One policy for caller text at every entry point: control characters refused, limits shared.

Run on SQLite and PostgreSQL (which cannot store NUL at all): each refusal is an
InvalidInputError naming the field, and the memory is exactly as before.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from memory_pipeline.cli.main import main
from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.metadata import MAX_TAG_CHARS, check_text
from memory_pipeline.sources.ledger import open_ledger
from memory_pipeline.sources.sources_file import load_sources
from memory_pipeline.sources.sync import apply_sync, plan_sync
from memory_pipeline.system import MemorySystem
from memory_pipeline.types import SearchFilters
from tests.conftest import make_settings


@pytest.fixture
def memory(db_url: str, tmp_path: Path) -> Iterator[tuple[MemorySystem, str]]:
    settings = make_settings(tmp_path).replace(database_url=db_url)
    system = MemorySystem(settings, embedder=HashingEmbedder())
    doc_id = system.ingest_text("A note about lanterns.", "Lanterns", {"tags": ["light"]}).doc_id
    system.update_index()
    yield system, doc_id
    system.close()


def _state(system: MemorySystem) -> tuple[Any, ...]:
    chunks = system.store.get_chunks(system.store.all_ids().tolist())
    return (
        system.store.counts(),
        sorted(
            (c.doc_id, c.content, c.tags, c.importance, c.access_count) for c in chunks.values()
        ),
        system.store.pending_changes().seqs.tolist(),
    )


Call = Callable[[MemorySystem, str], object]
CASES: list[tuple[str, Call, str]] = [
    (
        "NUL in text",
        lambda m, d: m.ingest_text("bad\x00text", "T"),
        "text: control character U+0000",
    ),
    ("bell in text", lambda m, d: m.ingest_text("ring\x07", "T"), "U+0007"),
    ("NUL in title", lambda m, d: m.ingest_text("fine", "Ti\x00tle"), "title: control character"),
    ("newline in title", lambda m, d: m.ingest_text("fine", "two\nlines"), "title: control"),
    ("NUL in tag", lambda m, d: m.ingest_text("fine", "T", {"tags": ["a\x00b"]}), "tag: control"),
    (
        "NUL in metadata title",
        lambda m, d: m.ingest_text("fine", "T", {"title": "x\x00"}),
        "title: control",
    ),
    (
        "long tag",
        lambda m, d: m.ingest_text("fine", "T", {"tags": ["x" * (MAX_TAG_CHARS + 1)]}),
        f"at most {MAX_TAG_CHARS}",
    ),
    (
        "importance nan",
        lambda m, d: m.ingest_text("fine", "T", {"importance": float("nan")}),
        "not a number",
    ),
    (
        "importance inf",
        lambda m, d: m.ingest_text("fine", "T", {"importance": float("inf")}),
        "not a number",
    ),
    ("set tags NUL", lambda m, d: m.set_chunk_tags(d, 0, tags=["ok", "b\x00"]), "tag: control"),
    (
        "set importance nan",
        lambda m, d: m.set_chunk_tags(d, 0, importance=float("nan")),
        "not a number",
    ),
    ("NUL doc id (set)", lambda m, d: m.set_chunk_tags("d\x00", 0, tags=["x"]), "doc_id: control"),
    ("NUL doc id (delete)", lambda m, d: m.delete_document("d\x00"), "doc_id: control"),
    ("NUL doc id (read)", lambda m, d: m.get_document_chunks("d\x00"), "doc_id: control"),
    ("NUL tag (find)", lambda m, d: m.find_by_tag("li\x00ght"), "tag: control"),
    ("NUL in query", lambda m, d: m.query("lan\x00tern"), "query: control"),
    (
        "NUL filter tag",
        lambda m, d: m.query("lantern", filters=SearchFilters(tags=("l\x00",))),
        "tags: control",
    ),
    (
        "NUL filter doc id",
        lambda m, d: m.query("lantern", filters=SearchFilters(doc_ids=("x\x00",))),
        "doc_ids: control",
    ),
    ("NUL run id (restore)", lambda m, d: m.restore_archived(run_id="r\x00"), "run_id: control"),
]


@pytest.mark.parametrize(("name", "call", "message"), CASES, ids=[c[0] for c in CASES])
def test_refused_with_the_field_named_and_nothing_changed(
    memory: tuple[MemorySystem, str], name: str, call: Call, message: str
) -> None:
    system, doc_id = memory
    before = _state(system)
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        call(system, doc_id)
    assert _state(system) == before


def test_tab_newline_and_carriage_return_stay_allowed_in_text(
    memory: tuple[MemorySystem, str],
) -> None:
    system, _ = memory
    result = system.ingest_text("col\tumn\r\nnext line\n", "Tabs and lines")
    assert result.status == "ingested"
    assert check_text("text", "a\tb\n", multiline=True) == "a\tb\n"


# ------------------------------------------------- files and what the CLI prints
ESCAPES = "Deploy \x1b[31mfailed\x1b[0m at step 3\x07, see the\x9b log.\n"


def test_a_file_with_terminal_escapes_is_stored_without_them_through_the_sync(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "deploy.md").write_text(f"# Deploy \x1b[1mlog\x1b[0m\n\n{ESCAPES}", encoding="utf-8")
    sources = tmp_path / "sources.yaml"
    sources.write_text(
        f"state: {tmp_path / 'state.json'}\nroots:\n  - name: notes\n    path: {notes}\n"
        "    kind: files\n",
        encoding="utf-8",
    )
    cfg = load_sources(sources)
    system = MemorySystem(make_settings(tmp_path), embedder=HashingEmbedder())
    try:
        with open_ledger(cfg.state_path) as ledger:
            report = apply_sync(system, cfg, plan_sync(system.store, cfg, ledger), ledger)
        assert not report.failed and report.documents_added == 1
        chunks = system.store.get_chunks(system.store.all_ids().tolist()).values()
        stored = " ".join(c.content for c in chunks)
        assert "Deploy [31mfailed[0m at step 3, see the log." in stored
        assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", stored)
        [doc] = system.store.documents_by_source(str((notes / "deploy.md").resolve()))
        assert doc.title == "Deploy [1mlog[0m"
    finally:
        system.close()


def test_search_never_prints_control_characters_a_stored_chunk_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "memory.db"
    flags = ["--db", str(db), "--index", str(tmp_path / "indices"), "--model", "hashing"]
    note = tmp_path / "deploy.md"
    note.write_text("# Deploy\n\nDeploy failed at step three.\n", encoding="utf-8")
    assert main(["ingest", *flags, str(note)]) == 0
    # An old memory, stored before files were cleaned: the escapes are in the database.
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE chunks SET content = :c"), {"c": ESCAPES})
    engine.dispose()
    capsys.readouterr()
    for extra in ([], ["--json"]):
        assert main(["search", *flags, "deploy failed", *extra]) == 0
        out = capsys.readouterr().out
        assert "failed" in out
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", out), repr(out)
        assert "\\u001b[31m" in out  # shown, visibly
        if extra:
            [hit] = json.loads(out)["hits"]
            assert hit["content"] == ESCAPES  # JSON readers still get the stored text
