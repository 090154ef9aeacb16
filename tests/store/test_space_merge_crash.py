"""SIGKILL a real space merge at random points: every document stays whole in one space.

Whatever instant a kill lands on (a document's transaction, between two, while the
archive lines of forgotten chunks are carried, during the index update), each document
is afterwards whole in exactly one of the two spaces (both only for the one the new
space held already), under the id it has there; each forgotten chunk counts as archived
exactly once; and the next run finishes the merge.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
import sqlalchemy as sa

from memory_pipeline.ingest.loaders import load_text
from memory_pipeline.memory.archive import archived_records
from memory_pipeline.memory.scoring import MemoryParams
from memory_pipeline.spaces import Spaces, doc_id_in_space
from memory_pipeline.store.schema import Chunk, Document
from memory_pipeline.system import MemorySystem
from tests.workers import go, spawn_ready

WORKER = Path(__file__).with_name("merge_worker.py")
OLD, NEW = "api", "one-api"
DOCS = 300
KILLS = 8
FORGOTTEN = "text:note 7"  # a document of OLD with chunks in the archive
SHARED = "text:note 11"  # a document the new space holds too


def note(i: int) -> str:
    return " ".join(
        f"Note {i} point {k}: w{(i * 31 + k * 7) % 997} w{(i + k) % 991}." for k in range(12)
    )


def fill(system: MemorySystem) -> dict[str, set[int]]:
    """The notes in ``api``, one of them in ``one-api`` too, one partly forgotten;
    source -> the chunk positions it was stored with."""
    old, new = system.bound(Spaces.bound(OLD)), system.bound(Spaces.bound(NEW))
    old.ingest_loaded([load_text(note(i), f"note {i}") for i in range(DOCS)], update_index=False)
    new.ingest_text(note(11), "note 11")
    new.ingest_text("Deploys happen on Tuesdays.", "deploys")
    with system.store.write() as s:
        s.execute(sa.update(Chunk).where(Chunk.space == OLD).values(importance=0.9))
        doc_id = old.store.documents_by_source(FORGOTTEN)[0].doc_id
        s.execute(
            sa.update(Chunk)
            .where(Chunk.doc_id == doc_id, Chunk.chunk_index % 2 == 0)
            .values(importance=0.01)
        )
    cut = MemoryParams(importance_threshold=0.05)
    assert old.run_forgetting_batch(
        memory=cut, dry_run=False, max_fraction=1.0, grace_days=0
    ).archived
    system.update_index()
    whole: dict[str, set[int]] = {}
    for source, index in positions(system) | archived(system):
        whole.setdefault(source, set()).add(index)
    return whole


def documents(system: MemorySystem) -> dict[str, list[tuple[str, str, str]]]:
    """source -> its documents (space, doc_id, content hash), in every space."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    with system.store.conn() as c:
        rows = c.execute(
            sa.select(Document.source, Document.space, Document.doc_id, Document.content_hash)
        )
        for source, space, doc_id, sha in rows:
            out.setdefault(source, []).append((space, doc_id, sha))
    return out


def positions(system: MemorySystem, space: str = OLD) -> set[tuple[str, int]]:
    """(source, chunk position) of every live chunk of ``space``."""
    with system.store.conn() as c:
        rows = c.execute(
            sa.select(Document.source, Chunk.chunk_index)
            .join(Document, Document.doc_id == Chunk.doc_id)
            .where(Chunk.space == space)
        )
        return {(str(s), int(i)) for s, i in rows}


def archived(system: MemorySystem) -> set[tuple[str, int]]:
    """(source, chunk position) of every chunk that counts as archived, checked to count
    once whichever space its line names."""
    records = list(archived_records(system.store, system.archive_file))
    counted = Counter((r["document"]["content_hash"], int(r["chunk_index"])) for r in records)
    assert max(counted.values(), default=1) == 1, "a forgotten chunk counts twice"
    return {(str(r["document"]["source"]), int(r["chunk_index"])) for r in records}


def check_whole(system: MemorySystem, whole: dict[str, set[int]]) -> Counter[str]:
    """Every document whole in one space (SHARED: the new space's copy, and maybe the old
    one's), under its id there; returns how many documents each space holds."""
    docs = documents(system)
    gone = archived(system)
    spaces: Counter[str] = Counter()
    for source, expected in whole.items():
        copies = docs.get(source, [])
        assert len(copies) == (2 if source == SHARED and copies[0][0] != copies[-1][0] else 1), (
            source,
            copies,
        )
        for space, doc_id, sha in copies:
            assert doc_id == doc_id_in_space(sha, space)
            live = {i for s, i in positions(system, space) if s == source}
            lost = {i for s, i in gone if s == source}
            assert live | lost == expected and not live & lost, (source, space, live, lost)
            spaces[space] += 1
    return spaces


def spawn(system: MemorySystem) -> subprocess.Popen[str]:
    s = system.settings
    return spawn_ready(WORKER, str(s.db_path), str(s.index_path), str(s.archive_path), OLD, NEW)


@pytest.mark.slow
def test_sigkill_during_a_merge_leaves_every_document_whole_in_one_space(
    system: MemorySystem,
) -> None:
    whole = fill(system)
    assert check_whole(system, whole) == {OLD: DOCS, NEW: 1}
    rng = random.Random(20261201)
    outcomes: Counter[str] = Counter()
    window = 1.0  # seconds: a full merge of DOCS documents takes about this here
    for k in range(KILLS):  # early kills land among the documents, later ones past them
        proc = spawn(system)
        go(proc)
        time.sleep(rng.uniform(0.0, window * (k + 1) / KILLS))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.stdout is not None
        said = proc.stdout.read().split()
        outcomes[said[0] if said else "killed"] += 1
        counts = check_whole(system, whole)
        assert counts[OLD] + counts[NEW] in (DOCS, DOCS + 1)
    print(f"space merge crash test: {dict(outcomes)}, left in {OLD!r}: {counts[OLD]}")

    system.merge_spaces(OLD, NEW, apply=True)  # the run after the kills finishes what they left
    assert check_whole(system, whole) == {NEW: DOCS}
    again = system.merge_spaces(OLD, NEW, apply=True)
    assert (again.documents, again.archived, again.chunks_added) == (0, 0, 0)
    new = system.bound(Spaces.bound(NEW))
    hits = new.query(note(42), new.settings.search_request(record_access=False, top_k=1)).hits
    assert hits and hits[0].title == "note 42"
    restored = new.restore_archived(doc_id=new.store.documents_by_source(FORGOTTEN)[0].doc_id)
    assert restored.restored > 0
    assert {i for s, i in positions(system, NEW) if s == FORGOTTEN} == whole[FORGOTTEN]
