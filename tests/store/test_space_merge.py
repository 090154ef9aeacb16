"""Merging one space into another (``MemorySystem.merge_spaces``), on every index backend.

Real memories (a SQLite file, or a database on the pgvector server) with the hashing
embedder: a dry run changes nothing; applied, every document and chunk of the old space
is in the new one with its fields, tags and the very vectors it had; the new space's
search finds them and the old one's finds nothing; a document both held is not doubled;
forgotten chunks and redaction counts follow; a second run changes nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.memory.scoring import MemoryParams
from memory_pipeline.spaces import Spaces
from memory_pipeline.store.redactions import add_redactions
from memory_pipeline.store.schema import Chunk, ChunkTag, Document, Embedding
from memory_pipeline.system import MemorySystem
from tests.conftest import make_settings

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
OLD, NEW = "api", "one-api"
BACKENDS = ["local", "pgvector", "qdrant", "chroma"]
NOTES = {
    "auth": ("The gateway checks bearer tokens before routing requests.", ["auth"]),
    "rate": ("Rate limits: ninety requests per minute for each key.", ["limits", "ops"]),
    "retry": ("Clients retry idempotent calls with exponential backoff.", []),
    "pager": ("Pagination uses opaque cursors, never page numbers.", ["design"]),
    "shared": ("Both teams agreed on snake_case field names everywhere.", ["style"]),
}
#: A chunk as a user relies on it: (space, source, position) -> its columns, tags, vectors.
Snapshot = dict[tuple[str, str, int], tuple[Any, ...]]


@pytest.fixture
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemorySystem]:
    backend = request.param
    url = str(request.getfixturevalue("pgvector_url")) if backend == "pgvector" else None
    settings = make_settings(tmp_path, backend=backend, database_url=url, max_chunk_size=256)
    opened = MemorySystem(settings, embedder=HashingEmbedder())
    yield opened
    opened.close()


def fill(memory: MemorySystem) -> dict[str, str]:
    """The notes in ``api`` (the last one in ``one-api`` too) and one of ``one-api``'s own;
    title -> doc id in ``api``."""
    old, new = memory.bound(Spaces.bound(OLD)), memory.bound(Spaces.bound(NEW))
    ids = {}
    for i, (title, (text, tags)) in enumerate(NOTES.items()):
        meta = {"tags": tags, "importance": 0.2 + 0.1 * i, "knowledge_type": "principle"}
        ids[title] = old.ingest_text(text, title, meta).doc_id
    new.ingest_text(*NOTES["shared"][:1], "shared", {"tags": ["style"]})
    new.ingest_text("Deploys happen on Tuesdays after the freeze.", "deploys")
    with memory.store.write() as s:  # memory fields a merge must carry as they are
        s.execute(
            sa.update(Chunk)
            .where(Chunk.space == OLD)
            .values(access_count=7, last_accessed_at=NOW, source_date=NOW.date())
        )
        add_redactions(s, {"aws_key": 2, "private": 1}, OLD)
        add_redactions(s, {"aws_key": 5}, NEW)
    memory.update_index()
    return ids


def snapshot(memory: MemorySystem) -> Snapshot:
    """Every chunk of every space with what a merge must keep (not its id)."""
    columns = [c for c in Chunk.__table__.c if c.name not in {"id", "doc_id", "space"}]
    out: Snapshot = {}
    with memory.store.conn() as c:
        tags: dict[int, list[str]] = {}
        for cid, tag in c.execute(sa.select(ChunkTag.chunk_id, ChunkTag.tag)):
            tags.setdefault(int(cid), []).append(tag)
        vectors: dict[int, list[tuple[str, bytes]]] = {}
        for cid, model, blob in c.execute(
            sa.select(Embedding.chunk_id, Embedding.model_id, Embedding.vector)
        ):
            vectors.setdefault(int(cid), []).append((model, bytes(blob)))
        rows = c.execute(
            sa.select(Chunk.id, Chunk.space, Document.source, *columns).join(
                Document, Document.doc_id == Chunk.doc_id
            )
        )
        for cid, space, source, *values in rows:
            key = (str(space), str(source), int(values[0]))
            out[key] = (*values, sorted(tags.get(cid, [])), sorted(vectors.get(cid, [])))
    return out


def in_space(snap: Snapshot, space: str) -> dict[tuple[str, int], tuple[Any, ...]]:
    return {(source, i): v for (s, source, i), v in snap.items() if s == space}


def titles(memory: MemorySystem, space: str, query: str) -> list[str]:
    bound = memory.bound(Spaces.bound(space))
    request = bound.settings.search_request(record_access=False, top_k=3)
    return [h.title or "" for h in bound.query(query, request).hits]


def documents(memory: MemorySystem) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    with memory.store.conn() as c:
        for source, space in c.execute(sa.select(Document.source, Document.space)):
            out.setdefault(str(space), set()).add(str(source))
    return out


@pytest.mark.parametrize("memory", BACKENDS, indirect=True)
def test_a_merge_moves_a_space_whole_once(memory: MemorySystem) -> None:
    fill(memory)
    before = snapshot(memory)
    assert titles(memory, NEW, "bearer tokens gateway") != ["auth"]

    dry = memory.merge_spaces(OLD, NEW)
    assert snapshot(memory) == before
    assert (dry.applied, dry.documents, dry.already_there, dry.redactions) == (False, 5, 1, 3)
    assert dry.chunks == len(in_space(before, OLD)) and "dry run" in dry.describe()

    done = memory.merge_spaces(OLD, NEW, apply=True)
    after = snapshot(memory)
    assert in_space(after, OLD) == {}
    # Every chunk as it was (columns, tags, the same vectors: nothing re-embedded); the
    # document both spaces held kept the new space's copy and is there once.
    assert in_space(after, NEW) == in_space(before, OLD) | in_space(before, NEW)
    assert documents(memory) == {NEW: {f"text:{t}" for t in NOTES} | {"text:deploys"}}
    assert done.chunks_removed == done.chunks == len(in_space(before, OLD))
    assert done.chunks_added == done.chunks - 1 and done.index_version is not None
    assert titles(memory, NEW, "bearer tokens gateway")[0] == "auth"
    assert titles(memory, NEW, "exponential backoff retry")[0] == "retry"
    assert titles(memory, OLD, "bearer tokens gateway") == []
    everything = memory.bound(Spaces.everything()).store
    assert everything.redactions_of(OLD) == {}
    assert everything.redactions_of(NEW) == {"aws_key": 7, "private": 1}
    health = memory.index_health()
    assert health.healthy, [f.message for f in health.findings if f.severity != "ok"]

    again = memory.merge_spaces(OLD, NEW, apply=True)  # idempotent: done is done
    assert (again.documents, again.chunks_added, again.chunks_removed) == (0, 0, 0)
    assert "holds nothing to move" in again.describe() and "merged already" in again.describe()
    assert snapshot(memory) == after


@pytest.mark.parametrize("memory", ["local", "pgvector"], indirect=True)
def test_the_history_and_what_was_handed_follow_the_documents(memory: MemorySystem) -> None:
    """A chunk's changes (one of them the agent's, waiting for a verdict), a document
    deleted before, and a search handed to an agent: after the merge each is in the new
    space, naming the documents by their new ids, and the agent's change can be judged
    there."""
    from memory_pipeline.store.handed import HandedHit

    ids = fill(memory)
    old = memory.bound(Spaces.bound(OLD))
    old.set_chunk_tags(ids["auth"], 0, importance=0.9, actor="mcp")
    old.set_chunk_tags(ids["rate"], 0, tags=["limits"], actor="page")
    old.delete_document(ids["pager"], actor="cli")
    old.store.record_handed(
        "search", query="gateway auth", hits=[HandedHit(ids["auth"], 0, 0.5, "auth")]
    )
    memory.merge_spaces(OLD, NEW, apply=True)
    new = memory.bound(Spaces.bound(NEW))
    moved = {t: new.store.documents_by_source(f"text:{t}")[0].doc_id for t in ("auth", "rate")}
    assert moved["auth"] != ids["auth"]  # an id derived from the space: it changed
    assert old.history() == [] and old.proposals() == [] and old.store.handed(10) == []
    changes = {(c.field, c.actor): c for c in new.history()}
    assert changes[("importance", "mcp")].doc_id == moved["auth"]
    assert changes[("tags", "page")].doc_id == moved["rate"]
    assert changes[("document", "cli")].doc_id == ids["pager"]  # deleted before: its old id
    [handed] = new.store.handed(10)
    assert [(h.doc_id, h.chunk_index) for h in handed.hits] == [(moved["auth"], 0)]
    [proposal] = new.proposals()
    new.review_change(proposal.id, "revert", actor="page")
    assert new.store.document_chunks(moved["auth"])[0].importance == pytest.approx(0.2)


@pytest.mark.parametrize("memory", ["local"], indirect=True)
@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        ("api", "api", "into itself"),
        ("API", "one-api", "not valid"),
        ("api", "one api", "not valid"),
        ("nothing-here", "nor-here", "neither space"),
    ],
)
def test_a_merge_refuses_what_it_cannot_do(
    memory: MemorySystem, old: str, new: str, says: str
) -> None:
    fill(memory)
    before = snapshot(memory)
    for apply in (False, True):
        with pytest.raises(InvalidInputError, match=says):
            memory.merge_spaces(old, new, apply=apply)
    assert snapshot(memory) == before


@pytest.mark.parametrize("memory", ["local"], indirect=True)
def test_a_merge_works_whatever_the_memory_is_bound_to(memory: MemorySystem) -> None:
    fill(memory)
    bound = memory.bound(Spaces.bound("elsewhere"))
    bound.merge_spaces(OLD, NEW, apply=True)
    assert set(documents(memory)) == {NEW}
    assert not (Path(memory.settings.archive_path) / "chunks_archive.jsonl").exists()
    with pytest.raises(InvalidInputError, match="may not change"):
        memory.store.bound(Spaces.bound(NEW)).move_document("x", OLD, NEW)


def forget_one(memory: MemorySystem, title: str) -> str:
    """Archive the chunks of one document of ``api`` (its importance cut), returning the run."""
    old = memory.bound(Spaces.bound(OLD))
    with memory.store.write() as s:
        s.execute(sa.update(Chunk).where(Chunk.space == OLD).values(importance=0.9))
        s.execute(
            sa.update(Chunk)
            .where(Chunk.doc_id == old.store.documents_by_source(f"text:{title}")[0].doc_id)
            .values(importance=0.01)
        )
    cut = MemoryParams(importance_threshold=0.05)
    run = old.run_forgetting_batch(
        memory=cut, dry_run=False, max_fraction=1.0, now=NOW, grace_days=0
    )
    assert run.archived >= 1 and run.run_id is not None
    return run.run_id


@pytest.mark.parametrize("memory", ["local"], indirect=True)
def test_forgotten_chunks_are_restored_into_the_new_space(memory: MemorySystem) -> None:
    """A chunk forgotten from the old space comes back, after the merge, beside the rest
    of its document in the new one; the old space has nothing left to restore."""
    old_ids = fill(memory)
    forget_one(memory, "rate")
    before = in_space(snapshot(memory), OLD)
    assert ("text:rate", 0) not in before

    report = memory.merge_spaces(OLD, NEW, apply=True)
    assert report.archived >= 1 and str(report.archived) in report.describe()
    old, new = memory.bound(Spaces.bound(OLD)), memory.bound(Spaces.bound(NEW))
    with pytest.raises(Exception, match="nothing to restore"):
        old.restore_archived(doc_id=old_ids["rate"])
    doc_id = new.store.documents_by_source("text:rate")[0].doc_id
    restored = new.restore_archived(doc_id=doc_id)
    assert restored.restored == report.archived and restored.documents_recreated == 0
    assert ("text:rate", 0) in in_space(snapshot(memory), NEW)
    assert titles(memory, NEW, "ninety requests per minute")[0] == "rate"
    assert set(documents(memory)) == {NEW}
    with pytest.raises(Exception, match="nothing to restore"):
        new.restore_archived(doc_id=doc_id)
