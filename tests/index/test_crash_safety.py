"""SIGKILL the index writer at random points: the previous version keeps serving."""

from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from memory_pipeline.index.backends.local.reader import IndexReader
from memory_pipeline.index.versions import read_current
from memory_pipeline.system import MemorySystem
from tests.workers import go, spawn_ready

WORKER = Path(__file__).with_name("crash_worker.py")
KILLS = 20  # kills that land inside update_index
MAX_ROUNDS = 80  # about half the kills land after the update finished: room to reach KILLS


def add_docs(system: MemorySystem, tmp: Path, round_no: int, n: int = 40) -> None:
    paths = []
    for i in range(n):
        path = tmp / f"r{round_no}_{i}.md"
        words = f"round{round_no} item{i} " + " ".join(
            f"w{(round_no * 7 + i * 13 + k) % 997}" for k in range(30)
        )
        path.write_text(f"# Note {round_no}-{i}\n\n{words}", encoding="utf-8")
        paths.append(path)
    system.ingest(paths, update_index=False)


def spawn(system: MemorySystem, action: str = "update") -> subprocess.Popen[str]:
    s = system.settings
    return spawn_ready(WORKER, str(s.db_path), str(s.index_path), action)


def run_once(system: MemorySystem, action: str = "update") -> float:
    proc = spawn(system, action)
    start = time.perf_counter()
    go(proc)
    assert proc.wait(timeout=120) == 0
    return time.perf_counter() - start


def assert_findable(system: MemorySystem, sample: int | None = None) -> None:
    """Every live chunk (or a sample) comes back first for its own text."""
    ids = system.store.all_ids().tolist()
    if sample is not None:
        ids = random.Random(len(ids)).sample(ids, min(sample, len(ids)))
    contents = system.store.contents(ids)
    for cid, text in contents.items():
        hits = system.query(text, system.settings.search_request(top_k=3, record_access=False)).hits
        assert cid in [h.chunk_id for h in hits], f"chunk {cid} not found by its own text"


@pytest.mark.slow
def test_sigkill_during_update_index(system: MemorySystem, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    add_docs(system, docs, 0, n=150)
    system.rebuild_index()
    add_docs(system, docs, 1)
    durations = [run_once(system)]  # how long a full update takes in a child
    rng = random.Random(1234)
    outcomes = {"killed": 0, "finished": 0}
    for round_no in range(2, 2 + MAX_ROUNDS):
        if outcomes["killed"] >= KILLS:
            break
        add_docs(system, docs, round_no)
        if round_no % 3 == 0:  # deletions too, so removal paths get killed as well
            victim = system.store.all_ids()[rng.randrange(50)]
            system.delete_document(system.store.get_chunks([int(victim)])[int(victim)].doc_id)
        before = read_current(system.settings.index_path)
        assert before is not None
        proc = spawn(system)
        go(proc)
        time.sleep(rng.uniform(0.0, 0.9 * min(durations)))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        after = read_current(system.settings.index_path)
        assert after is not None
        if after[0].version == before[0].version:
            outcomes["killed"] += 1
        else:
            outcomes["finished"] += 1
            assert after[0].version == before[0].version + 1
        # whatever is published loads completely in a fresh reader
        loaded = IndexReader(system.settings.index_path).current()
        assert loaded is not None and loaded.manifest.version == after[0].version
        assert loaded.sparse.num_docs == loaded.manifest.n_sparse
        assert_findable(system, sample=10)  # correct even before the next update
        durations.append(run_once(system))  # the next update succeeds
        final = read_current(system.settings.index_path)
        assert final is not None and final[0].n_dense == len(system.store.all_ids())
    assert outcomes["killed"] >= KILLS, outcomes
    assert not list(system.settings.index_path.glob(".tmp-*"))
    assert_findable(system)
