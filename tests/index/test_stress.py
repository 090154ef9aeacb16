"""Bounded stress: writers ingesting and deleting beside loops that publish versions.

Every run must succeed, every published version must be healthy, and at the end
every live note is found by its own text and no deleted note is ever returned.
With memory spaces, a checker searching all along must find every live note of
each space, and nothing of another, whenever a version is published.
``MEMORY_PIPELINE_STRESS_SECONDS`` sets the length (60 s in CI; at most
``SPACES_SECONDS`` for the spaces test).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.spaces import Spaces
from memory_pipeline.system import MemorySystem
from tests.workers import go, spawn_ready

WORKER = Path(__file__).with_name("stress_worker.py")
SECONDS = os.environ.get("MEMORY_PIPELINE_STRESS_SECONDS", "60")
SPACES_SECONDS = 30.0


def _race(url: str, index: Path, seconds: float, roles: Sequence[tuple[str, ...]]) -> list[dict]:
    """Start one worker per (role, *arguments), let them go at once, and return their
    summaries; every worker must exit cleanly."""
    procs = [
        spawn_ready(WORKER, role, url, str(index), str(seconds), *args) for role, *args in roles
    ]
    for proc in procs:
        go(proc)
    summaries = []
    for proc in procs:
        out, _ = proc.communicate(timeout=seconds + 300)
        assert proc.returncode == 0
        summaries.append(json.loads(out.strip().splitlines()[-1]))
    return summaries


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_writer_update_and_rebuild_loops_together(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = (
        f"sqlite:///{tmp_path / 'memory.db'}"
        if backend == "sqlite"
        else str(request.getfixturevalue("pg_url"))
    )
    index = tmp_path / "indices"
    settings = Settings(database_url=url, index_path=index, archive_path=tmp_path / "archive")
    MemorySystem(settings, embedder=HashingEmbedder()).close()  # schema made before the race

    by_role = _race(url, index, float(SECONDS), [("writer",), ("update",), ("rebuild",)])
    summaries = {summary["role"]: summary for summary in by_role}
    counts = {r: (s["runs"], len(s["failures"]), len(s["unhealthy"])) for r, s in summaries.items()}
    print(f"\n{backend}: role -> (runs, failed, unhealthy versions): {counts}")
    for role, summary in summaries.items():
        assert summary["runs"] > 1, role
        assert summary["failures"] == [], summary["failures"][:3]
        assert summary["unhealthy"] == [], summary["unhealthy"][:3]

    system = MemorySystem(settings, embedder=HashingEmbedder())
    system.update_index()
    assert system.index_health().healthy
    live = summaries["writer"]["live"]
    deleted = {doc_id for doc_id, _ in summaries["writer"]["deleted"]}
    assert len(live) > 10 and deleted
    assert len(system.store.all_ids()) == len(live)
    for doc_id, text in live + summaries["writer"]["deleted"]:
        hits = system.query(text, system.settings.search_request(top_k=5, record_access=False)).hits
        assert not deleted & {h.doc_id for h in hits}
        if doc_id not in deleted:
            assert hits and hits[0].doc_id == doc_id, text
    print(
        f"{backend}: {len(live)} live notes found by their text; {len(deleted)} deleted, never returned"
    )
    system.close()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", pytest.param("pgvector", marks=pytest.mark.postgres)])
def test_spaces_find_their_notes_while_versions_are_published(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A writer per space (alpha, beta), an update loop and a checker bound to each
    space in turn: at every check, each note of the space that is live before and
    after its search is found by its text, and no note of the other space appears.
    On local the loop publishes a version per change; pgvector takes writes in as
    they commit, so there the loop rebuilds, swapping a new set of tables in under
    the searches each time, and checks the index's health after each rebuild while
    the writers go on."""
    url = (
        f"sqlite:///{tmp_path / 'memory.db'}"
        if backend == "local"
        else str(request.getfixturevalue("pgvector_url"))
    )
    index = tmp_path / "indices"
    settings = Settings(
        database_url=url, index_path=index, archive_path=tmp_path / "archive", backend=backend
    )
    # The schema and a first index made before the race.
    first = MemorySystem(settings, embedder=HashingEmbedder())
    first.ingest_text("stress note default 0: the first note of the memory", "first")
    first.close()
    spaces = ["alpha", "beta"]
    seconds = min(float(SECONDS), SPACES_SECONDS)
    roles = [
        *(("writer", space, backend) for space in spaces),
        ("publish" if backend == "local" else "rebuild", ",".join(spaces), backend),
        ("checker", ",".join(spaces), backend),
    ]
    summaries = _race(url, index, seconds, roles)
    writers = [s for s in summaries if s["role"] == "writer"]
    [updater] = [s for s in summaries if s["role"] in ("publish", "rebuild")]
    [checker] = [s for s in summaries if s["role"] == "checker"]
    notes = sum(len(w["live"]) + len(w["deleted"]) for w in writers)
    searches = checker["searches"]
    versions = {v for v in searches if v is not None}
    print(
        f"\n{backend}: {checker['runs']} checks, {len(searches)} searches for live notes of "
        f"{spaces}; {notes} notes written ({sum(len(w['deleted']) for w in writers)} deleted); "
        f"{updater['publications']} publications in {updater['runs']} update runs; "
        f"{len(versions)} versions and {len(set(checker['newest']))} newest notes seen by the "
        f"checker; missed {len(checker['missed'])}, "
        f"leaked {len(checker['leaked'])}"
    )
    for summary in summaries:
        assert summary["failures"] == [], (summary["role"], summary["failures"][:3])
        assert summary["unhealthy"] == [], summary["unhealthy"][:3]
    assert checker["missed"] == [], checker["missed"][:5]
    assert checker["leaked"] == [], checker["leaked"][:5]
    # Enough happened at once that the race was real: checks went on while notes were
    # written and while versions were published.
    assert all(len(w["live"]) + len(w["deleted"]) >= 20 for w in writers), notes
    assert len(searches) >= 100 and len(set(checker["newest"])) >= 10, checker["newest"]
    assert updater["publications"] >= 5 and len(versions) >= 3, (updater["runs"], versions)

    system = MemorySystem(settings, embedder=HashingEmbedder())
    assert system.index_health().healthy
    system.close()
    for writer in writers:
        [space] = writer["spaces"]
        system = MemorySystem(settings, embedder=HashingEmbedder()).bound(Spaces.bound(space))
        live = {doc_id for doc_id, _ in writer["live"]}
        assert len(system.store.get_chunks(system.store.all_ids())) == len(live)  # one chunk each
        for doc_id, text in writer["live"] + writer["deleted"]:
            hits = system.query(
                text, system.settings.search_request(top_k=5, record_access=False)
            ).hits
            assert all(h.content.split()[2] == space for h in hits), text
            assert (doc_id in {h.doc_id for h in hits}) == (doc_id in live), text
        system.close()
