"""A writer killed with SIGKILL in the middle of its work leaves every backend serving.

A child process ingests, deletes and updates the index in a loop; it is killed at a
random moment after its first note is committed, ten times per backend. After each kill a fresh memory opens the same
store: searches answer, every hit is live, health reports no error, and what the
store holds is what is found (on pgvector at once, with no index update at all).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.system import MemorySystem
from tests.conftest import make_settings

TRIALS = 10

WRITER = """
import itertools, sys
from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.system import MemorySystem

memory = MemorySystem(Settings.from_env(), embedder=HashingEmbedder())
print("ready", flush=True)
for n in itertools.count():
    text = " ".join(f"word{(n * 7 + i) % 50} note{n}" for i in range(60))
    result = memory.ingest_text(text, f"note-{sys.argv[1]}-{n}")
    if n == 0:
        print("committed", flush=True)
    if n % 3 == 2:
        memory.delete_document(result.doc_id)
    if n % 2:
        memory.update_index()
"""


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "pgvector", "qdrant", "chroma"])
def test_a_killed_writer_leaves_the_previous_state_serving(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = str(request.getfixturevalue("pgvector_url")) if backend == "pgvector" else None
    settings = make_settings(tmp_path, backend=backend, database_url=url)
    env = {**os.environ, **settings.to_env(), "PYTHONPATH": str(Path(__file__).parents[2])}
    if url:
        env["HYBRID_RAG_DATABASE_URL"] = url
    rng = random.Random(13)
    for trial in range(TRIALS):
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(trial)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready", child.stderr and child.stderr.read()
        # The kill comes a random time after the first note is committed, not after
        # the start: on a loaded machine a clock alone may kill before any write.
        assert child.stdout.readline().strip() == "committed", child.stderr and child.stderr.read()
        time.sleep(rng.uniform(0.05, 1.0))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        memory = MemorySystem(settings, embedder=HashingEmbedder())
        try:
            live = set(memory.store.all_ids().tolist())
            assert live, f"trial {trial}: nothing committed"
            for query in ("word3 note1", "word17", f"note{trial}"):
                hits = memory.query(
                    query, memory.settings.search_request(top_k=20, record_access=False)
                ).hits
                assert hits and {h.chunk_id for h in hits} <= live, (trial, query)
            errors = [f for f in memory.index_health().findings if f.severity == "error"]
            assert not errors, (trial, errors)
            if backend == "pgvector":  # in the index as committed, with no update run
                view = memory.published()
                assert view is not None and set(view.member_ids().tolist()) == live
        finally:
            memory.close()
