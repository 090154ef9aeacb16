"""A memory never silently throws away what it was given: this project's own docs and git
log, which write ``<private>`` and ``<memory-recall>`` as code to explain them, pass the
redaction step as documents with every character kept that is not a secret; a document
that opens a tag it never closes is stored whole, with a warning naming its file and line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from memory_pipeline.hygiene.redactor import Redactor
from memory_pipeline.hygiene.secrets import MARKER_RE
from memory_pipeline.system import MemorySystem

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted(
    str(p.relative_to(ROOT))
    for p in [*(ROOT / "docs").rglob("*"), ROOT / "README.md", ROOT / "README.ja.md"]
    if p.is_file() and p.suffix == ".md" and "_build" not in p.parts
)


def _git_log() -> str:
    try:
        done = subprocess.run(
            ["git", "log"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        pytest.skip("no git history here")
    return done.stdout


def _assert_kept(text: str) -> None:
    """``text`` through the redaction step as a document: no span dropped, and every
    character kept but the secrets, each replaced by its marker in place."""
    done = Redactor().redact(text, document=True)
    assert "private" not in done.counts and "memory-recall" not in done.counts
    if not done.counts:
        assert done.text == text
        return
    # the docs write markers too, to explain them: each secret adds one
    pieces = MARKER_RE.split(done.text)
    assert len(pieces) == len(MARKER_RE.findall(text)) + done.counts.total() + 1
    # the text between markers is the original's, in order, from its first character to
    # its last: only the secrets' own characters are gone
    assert text.startswith(pieces[0]) and text.endswith(pieces[-1])
    at = len(pieces[0])
    for piece in pieces[1:]:
        found = text.find(piece, at + 1)
        assert found > at, piece[:80]
        at = found + len(piece)
    assert at == len(text)


def test_the_docs_are_found() -> None:
    assert {"README.md", "README.ja.md", "docs/hygiene.md", "docs/architecture.md"} <= set(DOCS)


@pytest.mark.parametrize("name", DOCS)
def test_every_doc_of_this_project_is_kept_whole(name: str) -> None:
    _assert_kept((ROOT / name).read_text(encoding="utf-8"))


def test_this_project_s_git_log_is_kept_whole() -> None:
    log = _git_log()
    assert len(log) > 10_000
    _assert_kept(log)


NOTE = """---
title: Tags
---
# How to mark a span

Wrap it in <private> and the memory keeps none of it.

The fence is closed by a tag of its own; the rest of this note is about cellos.
"""


def test_an_unclosed_tag_in_a_file_keeps_it_whole_and_names_its_line(
    system: MemorySystem, tmp_path: Path
) -> None:
    path = tmp_path / "tags.md"
    path.write_text(NOTE, encoding="utf-8")
    [result] = system.ingest([path])
    assert result.status == "ingested" and result.redactions == {}
    [warning] = result.warnings
    assert warning.startswith(f"{path.resolve()}:6: <private> is never closed")
    stored = "\n".join(c.content for c in system.store.document_chunks(result.doc_id))
    assert "Wrap it in <private> and the memory" in stored and "about cellos" in stored
    system.update_index()
    request = system.settings.search_request(top_k=3, record_access=False)
    hits = system.query("cellos", request).hits
    assert hits and "about cellos" in hits[0].content
    stats = system.system_stats()
    assert stats.unclosed_tags == 1 and stats.redactions == {}
    assert "documents stored whole after a <private> never closed: 1" in stats.render()


def test_an_unclosed_tag_in_a_conversation_s_message_still_ends_that_message(
    system: MemorySystem,
) -> None:
    from dataclasses import replace

    from memory_pipeline.ingest.loaders import load_text
    from memory_pipeline.ingest.turns import TurnText

    said = ["keep this <private>the damson plan", "an answer about violas, kept"]
    turns = tuple(
        TurnText(f"t{n}", who, None, text)
        for n, (who, text) in enumerate(zip(("user", "assistant"), said, strict=True))
    )
    session = replace(load_text("\n\n".join(said), "session"), turns=turns)
    [result] = system.ingest_loaded([session])
    assert result.redactions == {"private": 1} and result.warnings == ()
    stored = "\n".join(c.content for c in system.store.document_chunks(result.doc_id))
    assert "keep this" in stored and "violas, kept" in stored and "damson" not in stored


def test_a_stored_document_kept_whole_is_left_whole_by_scrub(
    system: MemorySystem, tmp_path: Path
) -> None:
    path = tmp_path / "tags.md"
    path.write_text(NOTE, encoding="utf-8")
    system.ingest([path])
    outcome = system.scrub()
    assert outcome.plan.findings == []
