"""Syncing source roots into a real memory, and the status of every file."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_pipeline.cli.sources import register
from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.sources.ledger import open_ledger, read_ledger
from memory_pipeline.sources.sources_file import SourcesConfig, load_sources
from memory_pipeline.sources.status import FileState, scan, sources_status, survey
from memory_pipeline.sources.sync import SyncReport, apply_sync, plan_sync
from memory_pipeline.system import MemorySystem, doc_id_for
from tests.conftest import make_settings
from tests.test_pipeline_support import Corpus, make_corpus


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    return make_corpus(tmp_path)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    mem = MemorySystem(make_settings(tmp_path), embedder=HashingEmbedder())
    yield mem
    mem.close()


def sync(
    memory: MemorySystem, cfg: SourcesConfig, paths: list[str] | None = None, deleted=None
) -> SyncReport:
    with open_ledger(cfg.state_path) as ledger:
        plan = plan_sync(memory.store, cfg, ledger, paths=paths, deleted=deleted)
        return apply_sync(memory, cfg, plan, ledger)


def states(memory: MemorySystem, cfg: SourcesConfig) -> dict[str, tuple[FileState, str]]:
    return {
        s.path.name: (s.state, s.reason)
        for s in sources_status(memory.store, cfg, read_ledger(cfg.state_path))
    }


def test_first_sync_ingests_everything_with_the_roots_rules(
    memory: MemorySystem, corpus: Corpus
) -> None:
    cfg = load_sources(corpus.sources_file)
    assert {s for s, _ in states(memory, cfg).values()} == {FileState.NEW}
    report = sync(memory, cfg)
    # 2 notes + 1 paper + 1 Claude Code session + 1 Claude.ai conversation (1 empty skipped)
    assert report.documents_added == 5 and not report.failed
    assert {s for s, _ in states(memory, cfg).values()} == {FileState.INGESTED}

    [fusion] = memory.store.documents_by_source(str((corpus.notes / "fusion.md").resolve()))
    assert fusion.knowledge_type == "principle" and fusion.importance == 0.8
    chunk = memory.store.document_chunks(fusion.doc_id)[0]
    assert set(chunk.tags) == {"ranking", "team"}  # the file's own tags plus the root's
    [paper] = memory.store.documents_by_source(str((corpus.papers / "bm25.md").resolve()))
    assert paper.knowledge_type == "paper" and paper.importance is None

    hits = memory.find_by_tag("transcript_of:4f35e220-c435-4cf7-b9b9-f40426042847")
    assert hits and hits[0].knowledge_type == "experiment"
    assert "transcript_last_activity:2026-11-20T10:03:02.442Z" in hits[0].tags
    doc = memory.store.get_document(hits[0].doc_id)
    assert doc is not None and doc.title == "Fix flaky index publication test"
    assert str(doc.source_date) == "2026-11-20"


def test_a_second_sync_skips_what_is_stored(memory: MemorySystem, corpus: Corpus) -> None:
    cfg = load_sources(corpus.sources_file)
    sync(memory, cfg)
    again = sync(memory, cfg)  # a full scan plans nothing
    assert again.documents_added == again.documents_replaced == 0
    explicit = sync(memory, cfg, paths=[str(corpus.session_file), str(corpus.export_file)])
    assert explicit.sessions_skipped == 2 and explicit.documents_added == 0
    assert explicit.documents_replaced == 0


def test_a_transcript_stored_under_the_old_tags_is_left_as_it_is_until_it_changes(
    memory: MemorySystem, corpus: Corpus
) -> None:
    """Transcripts were once tagged session_id:/session_last_activity:, the tags the
    session-to-memory agent's summaries used. A re-sync of such an unchanged session is a
    no-op (sessions are compared by their bytes, not their tags); the session's next
    change stores it under the transcript tags."""
    cfg = load_sources(corpus.sources_file)
    sync(memory, cfg)
    session = "4f35e220-c435-4cf7-b9b9-f40426042847"
    old = {
        f"transcript_of:{session}": f"session_id:{session}",
        "transcript_last_activity:2026-11-20T10:03:02.442Z": (
            "session_last_activity:2026-11-20T10:03:02.442Z"
        ),
    }
    chunks = memory.find_by_tag(f"transcript_of:{session}")
    for c in chunks:
        memory.set_chunk_tags(c.doc_id, c.chunk_index, tags=[old.get(t, t) for t in c.tags])
    assert not memory.find_by_tag(f"transcript_of:{session}")

    again = sync(memory, cfg, paths=[str(corpus.session_file)])
    assert again.sessions_skipped == 1 and again.documents_replaced == 0
    assert len(memory.find_by_tag(f"session_id:{session}")) == len(chunks)

    with corpus.session_file.open("a") as fh:
        fh.write(
            json.dumps(
                {
                    "type": "user",
                    "uuid": "u5",
                    "parentUuid": "u4",
                    "sessionId": session,
                    "timestamp": "2026-11-21T08:00:00.000Z",
                    "message": {"role": "user", "content": "Thanks, the fsync fixed it."},
                }
            )
            + "\n"
        )
    assert sync(memory, cfg).documents_replaced == 1
    assert not memory.find_by_tag(f"session_id:{session}")
    [chunk, *_] = memory.find_by_tag(f"transcript_of:{session}")
    assert "transcript_last_activity:2026-11-21T08:00:00.000Z" in chunk.tags


def test_a_changed_file_and_a_changed_session_replace_their_documents(
    memory: MemorySystem, corpus: Corpus
) -> None:
    cfg = load_sources(corpus.sources_file)
    sync(memory, cfg)
    before = memory.store.counts()
    note = corpus.notes / "decay.md"
    note.write_text(note.read_text() + "\n\nExperiments decay over a project's length.")
    with corpus.session_file.open("a") as fh:
        fh.write(
            json.dumps(
                {
                    "type": "user",
                    "uuid": "u5",
                    "parentUuid": "u4",
                    "sessionId": "4f35e220-c435-4cf7-b9b9-f40426042847",
                    "timestamp": "2026-11-21T08:00:00.000Z",
                    "message": {"role": "user", "content": "Thanks, the fsync fixed it."},
                }
            )
            + "\n"
        )
    st = states(memory, cfg)
    assert st["decay.md"][0] is FileState.CHANGED
    assert st[corpus.session_file.name][0] is FileState.CHANGED
    report = sync(memory, cfg)
    assert report.documents_replaced == 2 and report.documents_added == 0
    assert memory.store.counts()["documents"] == before["documents"]
    [chunk, *_] = memory.find_by_tag("transcript_last_activity:2026-11-21T08:00:00.000Z")
    assert "Thanks, the fsync fixed it." in "".join(
        c.content for c in memory.store.document_chunks(chunk.doc_id)
    )
    assert not memory.find_by_tag("transcript_last_activity:2026-11-20T10:03:02.442Z")


def test_deleted_files_delete_their_documents(memory: MemorySystem, corpus: Corpus) -> None:
    cfg = load_sources(corpus.sources_file)
    sync(memory, cfg)
    note, export = corpus.notes / "fusion.md", corpus.export_file
    note.unlink()
    export.unlink()
    st = states(memory, cfg)
    assert (
        st["fusion.md"][0] is FileState.DELETED and st["conversations.json"][0] is FileState.DELETED
    )
    report = sync(memory, cfg, deleted=[str(note), str(export)])
    assert report.documents_removed == 2 and report.chunks_removed > 0
    assert not memory.store.documents_by_source(str(note.resolve()))
    assert not memory.find_by_tag("transcript_of:5f1c2a9e-0b7d-4e43-9a57-2d1f3c9b7a10")
    assert "fusion.md" not in states(memory, cfg)


def test_a_conversation_leaving_an_export_is_deleted(memory: MemorySystem, corpus: Corpus) -> None:
    cfg = load_sources(corpus.sources_file)
    sync(memory, cfg)
    data = json.loads(corpus.export_file.read_text())
    corpus.export_file.write_text(json.dumps([c for c in data if not c["chat_messages"]]))
    assert states(memory, cfg)["conversations.json"][0] is FileState.CHANGED
    report = sync(memory, cfg)
    assert report.documents_removed == 1
    assert not memory.find_by_tag("transcript_of:5f1c2a9e-0b7d-4e43-9a57-2d1f3c9b7a10")
    [deleted] = memory.history()  # recorded, as the sync's caller's (here a program's)
    assert (deleted.field, deleted.actor) == ("document", "api")


def test_failed_files_are_recorded_with_the_reason_and_the_rest_goes_on(
    memory: MemorySystem, corpus: Corpus
) -> None:
    cfg = load_sources(corpus.sources_file)
    (corpus.notes / "empty.md").write_text("   \n")
    (corpus.notes / "bad-front.md").write_text("---\nimportance: [1\n---\n\n# x\n\nbody\n")
    corpus.export_file.write_text("{not json")
    report = sync(memory, cfg)
    assert set(map(os.path.basename, report.failed)) == {
        "empty.md",
        "bad-front.md",
        "conversations.json",
    }
    assert report.documents_added == 4  # 2 notes... 1 paper, 1 session
    st = states(memory, cfg)
    assert st["empty.md"][0] is FileState.FAILED and "empty" in st["empty.md"][1]
    assert st["conversations.json"][0] is FileState.FAILED
    assert "not valid JSON" in st["conversations.json"][1]
    # Fixing a file makes it pending again, and the next sync takes it.
    (corpus.notes / "empty.md").write_text("# Now\n\nIt has a body about FAISS segments.")
    assert states(memory, cfg)["empty.md"][0] is FileState.NEW
    assert sync(memory, cfg).documents_added == 1


def test_explicit_paths_outside_the_roots_are_ignored(memory: MemorySystem, corpus: Corpus) -> None:
    cfg = load_sources(corpus.sources_file)
    stray = corpus.base / "stray.md"
    stray.write_text("# Stray\n\nnot under a root")
    with open_ledger(cfg.state_path) as ledger:
        plan = plan_sync(memory.store, cfg, ledger, paths=[str(stray), str(corpus.base / "x.md")])
    assert plan.ingest == [] and plan.delete == [] and len(plan.ignored) == 2


def test_identical_files_count_as_ingested(memory: MemorySystem, corpus: Corpus) -> None:
    cfg = load_sources(corpus.sources_file)
    sync(memory, cfg)
    twin = corpus.papers / "copy-of-fusion.md"
    raw = (corpus.notes / "fusion.md").read_bytes()
    twin.write_bytes(raw)
    assert memory.store.get_document(doc_id_for(raw)) is not None  # the status relies on this
    state, reason = states(memory, cfg)["copy-of-fusion.md"]
    assert state is FileState.INGESTED and "identical to" in reason


def _cli(memory: MemorySystem) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub, [], lambda _args: memory)
    return parser


def test_cli_status_lists_every_file_with_its_state(
    memory: MemorySystem, corpus: Corpus, capsys: pytest.CaptureFixture[str]
) -> None:
    (corpus.notes / "empty.md").write_text("")
    parser = _cli(memory)
    args = parser.parse_args(["sources", "sync", "--sources", str(corpus.sources_file)])
    assert args.func(args) == 1  # one file failed
    (corpus.papers / "new.md").write_text("# New\n\nnot yet ingested")
    capsys.readouterr()
    args = parser.parse_args(["sources", "status", "--sources", str(corpus.sources_file)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "7 files under 4 roots (1 failed, 5 ingested, 1 new)" in out
    assert "notes/empty.md" in out and "papers/new.md" in out
    args = parser.parse_args(["sources", "status", "--json", "--sources", str(corpus.sources_file)])
    args.func(args)
    rows = json.loads(capsys.readouterr().out)
    assert {r["state"] for r in rows} == {"failed", "ingested", "new"}


def test_every_file_under_a_root_is_picked_or_listed_as_unsupported(
    memory: MemorySystem, corpus: Corpus
) -> None:
    (corpus.notes / "photo.PNG").write_bytes(b"\x89PNG")
    (corpus.papers / "blob.bin").write_bytes(b"\x00")
    (corpus.papers / "Makefile").write_text("all:\n")
    (corpus.papers / ".hidden.bin").write_bytes(b"\x00")  # hidden: skipped, as before
    cfg = load_sources(corpus.sources_file)
    found = survey(cfg)
    assert [p.name for p in found.unsupported] == ["photo.PNG", "Makefile", "blob.bin"]
    assert found.unsupported_by_extension() == {"(none)": 1, ".bin": 1, ".png": 1}
    assert scan(cfg) == found.files
    for plan in (
        plan_sync(memory.store, cfg, read_ledger(cfg.state_path)),
        plan_sync(memory.store, cfg, read_ledger(cfg.state_path), paths=[]),
    ):
        assert plan.files_under_roots == len(found.files) + 3
        assert plan.unsupported_by_extension == {"(none)": 1, ".bin": 1, ".png": 1}
