"""Bounded stress: a writer ingesting and deleting beside an update loop and a rebuild loop.

Every run must succeed, every published version must be healthy, and at the end
every live note is found by its own text and no deleted note is ever returned.
``MEMORY_PIPELINE_STRESS_SECONDS`` sets the length (60 s in CI).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.system import MemorySystem
from tests.workers import go, spawn_ready

WORKER = Path(__file__).with_name("stress_worker.py")
SECONDS = os.environ.get("MEMORY_PIPELINE_STRESS_SECONDS", "60")


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

    procs = [
        spawn_ready(WORKER, role, url, str(index), SECONDS)
        for role in ("writer", "update", "rebuild")
    ]
    for proc in procs:
        go(proc)
    summaries = {}
    for proc in procs:
        out, _ = proc.communicate(timeout=float(SECONDS) + 300)
        assert proc.returncode == 0
        summary = json.loads(out.strip().splitlines()[-1])
        summaries[summary["role"]] = summary
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
        hits = system.query(text, top_k=5, record_access=False).hits
        assert not deleted & {h.doc_id for h in hits}
        if doc_id not in deleted:
            assert hits and hits[0].doc_id == doc_id, text
    print(
        f"{backend}: {len(live)} live notes found by their text; {len(deleted)} deleted, never returned"
    )
    system.close()
