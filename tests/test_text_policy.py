"""One policy for caller text at every entry point: control characters refused, limits shared.

Run on SQLite and PostgreSQL (which cannot store NUL at all): each refusal is an
InvalidInputError naming the field, and the memory is exactly as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.metadata import MAX_TAG_CHARS, check_text
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
